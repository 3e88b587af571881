#include "coordinator/state/fault_origin.h"

#include <csignal>
#include <string_view>

namespace convoy {
namespace {

// What a rank prints when the machine, not its job, failed it: the C library's strerror text
// for the errno values of a sick machine, and the words of CUDA, NCCL and the kernel for a
// sick GPU. Matched as written (case-sensitive), anywhere in a line.
constexpr std::string_view kNodeSignatures[] = {
    "No space left on device",             // ENOSPC: the disk or /dev/shm is full
    "Input/output error",                  // EIO: a failing disk or network file system
    "Read-only file system",               // EROFS: a file system remounted after errors
    "uncorrectable ECC error",             // CUDA_ERROR_ECC_UNCORRECTABLE
    "ECC error",                           // NVML, nvidia-smi, the driver's words
    "GPU has fallen off the bus",          // Xid 79
    "CUDA error: unknown error",           // a device the driver lost
    "CUDA_ERROR_ECC_UNCORRECTABLE",        // the driver API's name of it
    "NCCL error: unhandled system error",  // a NIC or the driver underneath NCCL
    "Machine check",                       // MCE
    "Bus error",                           // SIGBUS reported by a shell or Python
};

std::string FindIn(const std::string& text) {
  for (std::string_view sig : kNodeSignatures) {
    if (text.find(sig) != std::string::npos) return std::string(sig);
  }
  return "";
}

}  // namespace

std::string NodeSignatureIn(const v1::ProcessExit& exit) {
  if (std::string s = FindIn(exit.error_message()); !s.empty()) return s;
  if (std::string s = FindIn(exit.error_type()); !s.empty()) return s;
  for (const std::string& line : exit.stderr_tail()) {
    if (std::string s = FindIn(line); !s.empty()) return s;
  }
  return "";
}

bool NodeMoveIsFree(const v1::Job& job, const v1::RankFailure& cause) {
  if (cause.origin() != v1::FAILURE_ORIGIN_NODE || job.node_moves() >= kMaxFreeNodeMoves) {
    return false;
  }
  for (const v1::Attempt& a : job.attempts()) {
    if (a.attempt() == job.attempt() || !a.has_failure()) continue;
    if (a.failure().origin() == v1::FAILURE_ORIGIN_NODE && a.failure().worker() == cause.worker()) {
      return false;
    }
  }
  return true;
}

void AttributeOrigin(v1::RankFailure* f, const v1::WorkerInfo* worker) {
  auto node = [f](std::string why) {
    f->set_origin(v1::FAILURE_ORIGIN_NODE);
    f->set_origin_reason(std::move(why));
  };
  if (f->cause() == v1::FAILURE_WORKER_LOST) {
    return node("worker " + f->worker() + " or its link went away with the rank");
  }
  if (worker != nullptr && worker->health().state() == v1::HEALTH_FAILING) {
    return node("worker " + f->worker() +
                " is failing its health check: " + worker->health().reason());
  }
  const v1::ProcessExit& exit = f->exit();
  if (exit.signal() == SIGBUS && !exit.killed_by_worker()) {
    return node("the rank was killed by SIGBUS (a machine check or a bad page)");
  }
  if (f->cause() == v1::FAILURE_RANK_EXIT || f->cause() == v1::FAILURE_SIGNAL) {
    if (std::string sig = NodeSignatureIn(exit); !sig.empty()) {
      return node("'" + sig + "' in what the rank said last");
    }
  }
  f->set_origin(v1::FAILURE_ORIGIN_JOB);
  f->clear_origin_reason();
}

}  // namespace convoy
