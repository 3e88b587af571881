#include "client/format.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <ctime>
#include <sstream>

namespace convoy {

int ExitCodeFor(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return kExitOk;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return kExitUsage;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return kExitUnavailable;
    case grpc::StatusCode::NOT_FOUND:
      return kExitNotFound;
    default:
      return kExitRpcError;
  }
}

std::string ToJson(const google::protobuf::Message& msg) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(msg, &out, options);
  return out;
}

std::string FormatDuration(int64_t ms) {
  if (ms < 0) ms = 0;
  int64_t s = ms / 1000;
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  }
  return buf;
}

std::string FormatClock(int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  return buf;
}

std::string StateText(v1::JobState state) { return v1::JobState_Name(state); }

namespace {

std::string Pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

std::string Shape(const v1::JobSpec& spec) {
  return std::to_string(spec.nodes()) + "x" +
         (spec.procs_per_node_gpu() ? std::string("gpu") : std::to_string(spec.procs_per_node()));
}

}  // namespace

std::string FormatJobTable(const v1::ListJobsResponse& jobs, int64_t now) {
  std::ostringstream out;
  out << Pad("ID", 10) << Pad("NAME", 20) << Pad("STATE", 11) << Pad("ATTEMPT", 8)
      << Pad("SHAPE", 7) << Pad("AGE", 8) << "MESSAGE\n";
  for (const v1::Job& j : jobs.jobs()) {
    out << Pad(j.id(), 10) << Pad(j.spec().name(), 20) << Pad(StateText(j.state()), 11)
        << Pad(std::to_string(j.attempt()), 8) << Pad(Shape(j.spec()), 7)
        << Pad(FormatDuration(now - j.created_unix_ms()), 8) << j.message() << "\n";
  }
  return out.str();
}

std::string FormatWorkerTable(const v1::ListWorkersResponse& workers, int64_t now) {
  std::ostringstream out;
  out << Pad("NAME", 12) << Pad("STATE", 12) << Pad("ADDRESS", 16) << Pad("CORES", 6)
      << Pad("GPUS", 5) << Pad("SLOTS", 7) << Pad("HEARD", 7) << "JOBS\n";
  for (const v1::WorkerInfo& w : workers.workers()) {
    std::string state = v1::WorkerState_Name(w.state());
    if (state.rfind("WORKER_", 0) == 0) state = state.substr(7);
    std::string jobs;
    for (const auto& j : w.jobs()) jobs += (jobs.empty() ? "" : ",") + j;
    out << Pad(w.name(), 12) << Pad(state, 12) << Pad(w.address(), 16)
        << Pad(std::to_string(w.cores()), 6) << Pad(std::to_string(w.gpus_size()), 5)
        << Pad(std::to_string(w.used_slots()) + "/" + std::to_string(w.slots()), 7)
        << Pad(FormatDuration(now - w.last_heartbeat_unix_ms()) + "", 7)
        << (jobs.empty() ? "-" : jobs) << "\n";
  }
  return out.str();
}

std::string FormatFailure(const v1::RankFailure& f, const std::string& indent) {
  std::ostringstream out;
  out << indent << f.reason() << "\n";
  if (f.exit().stderr_tail_size() > 0) {
    out << indent << "last stderr lines of rank " << f.rank() << ":\n";
    for (const auto& line : f.exit().stderr_tail()) out << indent << "  | " << line << "\n";
  }
  return out.str();
}

std::string FormatRankProgress(const v1::MetricRecord& m) {
  char buf[256];
  std::string extra;
  auto it = m.values().find("samples_per_s");
  if (it != m.values().end()) {
    char s[64];
    std::snprintf(s, sizeof(s), "  %8.0f samples/s", it->second);
    extra += s;
  }
  auto acc = m.values().find("test_accuracy");
  if (acc != m.values().end()) {
    char s[64];
    std::snprintf(s, sizeof(s), "  test acc %.2f%%", acc->second * 100);
    extra += s;
  }
  std::snprintf(buf, sizeof(buf), "rank %-3d epoch %-3d step %-7lld loss %-9.4f", m.rank(),
                m.epoch(), static_cast<long long>(m.step()), m.loss());
  return buf + extra;
}

double FinalAccuracy(const v1::Job& job) {
  double sum = 0;
  int n = 0;
  for (const auto& m : job.latest()) {
    auto it = m.values().find("test_accuracy");
    if (it != m.values().end()) {
      sum += it->second;
      ++n;
    }
  }
  return n == 0 ? -1 : sum / n;
}

std::string FormatJobStatus(const v1::Job& job, int64_t now) {
  std::ostringstream out;
  out << "job:       " << job.id() << " (" << job.spec().name() << ")\n";
  out << "state:     " << StateText(job.state()) << " — " << job.message() << "\n";
  out << "shape:     " << Shape(job.spec()) << " over "
      << (job.spec().backend().empty() ? "gloo" : job.spec().backend()) << ", "
      << (job.spec().has_trainer()
              ? "built-in trainer (" +
                    (job.spec().trainer().model().empty() ? std::string("fmnist-cnn")
                                                          : job.spec().trainer().model()) +
                    ")"
              : "command " +
                    (job.spec().command_size() > 0 ? job.spec().command(0) : std::string()))
      << "\n";
  out << "attempt:   " << job.attempt() << " (restarts " << job.restarts() << " of "
      << job.spec().max_restarts() << ")\n";
  out << "age:       " << FormatDuration(now - job.created_unix_ms()) << "\n";
  if (job.attempts_size() > 0) {
    const v1::Attempt& a = job.attempts(job.attempts_size() - 1);
    out << "placement: master " << (a.master_addr().empty() ? "-" : a.master_addr()) << ":"
        << a.master_port() << "\n";
    for (const auto& n : a.nodes()) {
      std::string ranks;
      for (int r : n.ranks()) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      out << "  node " << n.group_rank() << ": worker " << n.worker() << " (" << n.address()
          << "), ranks " << ranks << "\n";
    }
  }
  if (job.latest_size() > 0) {
    out << "progress:\n";
    for (const auto& m : job.latest()) out << "  " << FormatRankProgress(m) << "\n";
  }
  const double acc = FinalAccuracy(job);
  if (acc >= 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.2f%%", acc * 100);
    out << "test accuracy: " << buf << "\n";
  }
  bool any_failure = false;
  for (const auto& a : job.attempts()) {
    if (a.failure().reason().empty()) continue;
    if (!any_failure) out << "failures (root cause of each attempt):\n";
    any_failure = true;
    out << "  attempt " << a.attempt() << ":\n" << FormatFailure(a.failure(), "    ");
  }
  out << "events:\n";
  for (const auto& e : job.events()) {
    out << "  " << FormatClock(e.time_unix_ms()) << "  "
        << Pad(e.from() == v1::JOB_STATE_UNSPECIFIED ? "" : StateText(e.from()), 11) << "-> "
        << Pad(StateText(e.to()), 11) << e.reason() << "\n";
  }
  return out.str();
}

}  // namespace convoy
