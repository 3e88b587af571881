#include "worker/supervise/attempt_ports.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace convoy {

AttemptPorts::AttemptPorts(std::string address, const Clock& clock, const AttemptTable& table,
                           Reporter& reporter, Preparing preparing)
    : table_(table),
      reporter_(reporter),
      preparing_(std::move(preparing)),
      ports_(std::move(address), clock) {}

void AttemptPorts::Reserve(const v1::ReservePort& req) {
  v1::WorkerMessage out;
  v1::PortReserved* p = out.mutable_port_reserved();
  p->set_job_id(req.job_id());
  p->set_job_uid(req.job_uid());
  p->set_attempt(req.attempt());
  // Held until the attempt's ranks have ended (UseOf).
  auto port = ports_.Reserve({req.job_id(), req.attempt(), req.job_uid()});
  if (port.ok()) {
    p->set_port(*port);
  } else {
    p->set_error(port.status().message());
    spdlog::error("job {} attempt {}: cannot reserve a port: {}", req.job_id(), req.attempt(),
                  p->error());
  }
  reporter_.Send(out);
}

PortReservations::Use AttemptPorts::UseOf(const AttemptKey& key) const {
  if (const Attempt* a = table_.Find(key)) {
    return a->AnyRunning() ? PortReservations::Use::kRunning : PortReservations::Use::kEnded;
  }
  return preparing_ && preparing_(key) ? PortReservations::Use::kRunning
                                       : PortReservations::Use::kNotHere;
}

void AttemptPorts::ReleaseUnused() {
  ports_.ReleaseUnused([this](const AttemptKey& key) { return UseOf(key); });
}

int64_t AttemptPorts::NextExpiryMs() const {
  return ports_.NextExpiryMs([this](const AttemptKey& key) { return UseOf(key); });
}

}  // namespace convoy
