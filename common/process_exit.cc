#include "common/process_exit.h"

#include "common/util.h"

namespace convoy {

std::string DescribeExit(const v1::ProcessExit& e) {
  std::string raised;  // from its TORCHELASTIC_ERROR_FILE (torch's @record)
  if (!e.error_type().empty() || !e.error_message().empty()) {
    raised = ": raised " + (e.error_type().empty() ? std::string("an exception") : e.error_type());
    if (!e.error_message().empty()) raised += ": " + e.error_message();
  }
  if (e.oom_killed()) {
    return "killed by the kernel OOM killer" +
           (e.memory_limit_bytes() > 0
                ? " at its " + HumanBytes(e.memory_limit_bytes()) + " memory_per_proc"
                : std::string()) +
           raised;
  }
  if (e.signal() != 0) {
    return "killed by " + (e.signal_name().empty() ? SignalName(e.signal()) : e.signal_name()) +
           raised;
  }
  return "exited with code " + std::to_string(e.exit_code()) + raised;
}

}  // namespace convoy
