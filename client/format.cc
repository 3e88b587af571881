#include "client/format.h"

#include "client/dependencies.h"
#include "client/sick_nodes.h"
#include "client/sweep.h"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <sstream>

#include "common/util.h"

namespace convoy {

const char* const kExitCodesHelp =
    "Exit codes:\n"
    "  0  success (for watch and submit --watch: the job SUCCEEDED)\n"
    "  1  the watched job ended FAILED or CANCELLED\n"
    "  2  usage error, or an invalid job spec (the message names the field); also --insecure\n"
    "     to a TLS coordinator, or TLS to an --insecure one\n"
    "  3  the coordinator cannot be reached\n"
    "  4  no such job (or worker)\n"
    "  5  any other error from the coordinator\n"
    "  6  not authenticated: no token, or a malformed, unknown, expired or revoked one; or the\n"
    "     coordinator's certificate is not trusted (no --ca, or another cluster's CA)\n"
    "  7  permission denied: the token's role lacks the right (the message names it)\n"
    "The coordinator is --coordinator, else $CONVOY_COORDINATOR, else the config file\n"
    "(~/.config/convoy/config.yaml, written by `convoy login`), else 127.0.0.1:7070.\n"
    "The token is --token, else $CONVOY_TOKEN, else the config file; the CA --ca FILE,\n"
    "else $CONVOY_CA, else the config file. Without a token or CA, a loopback coordinator\n"
    "is spoken to in plain text (convoy-coordinator --insecure).";

int ExitCodeFor(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return kExitOk;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return kExitUsage;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return kExitUnavailable;
    case grpc::StatusCode::NOT_FOUND:
      return kExitNotFound;
    case grpc::StatusCode::UNAUTHENTICATED:
      return kExitUnauthenticated;
    case grpc::StatusCode::PERMISSION_DENIED:
      return kExitPermissionDenied;
    default:
      return kExitRpcError;
  }
}

std::string ToJson(const google::protobuf::Message& msg) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(msg, &out, options).ok()) return "{}";
  return out;
}

namespace {

// A JSON string that a YAML reader would take for something else unquoted: a number
// (proto JSON quotes 64-bit integers), a boolean, null, or nothing.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  const char c = s[0];
  if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.') return true;
  std::string lower;
  for (char ch : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* word : {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"}) {
    if (lower == word) return true;
  }
  return false;
}

// Block style throughout, empty collections as [] / {}, JSON strings kept strings.
void Emit(YAML::Emitter& out, const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      if (node.size() == 0) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      out << YAML::Block << YAML::BeginMap;
      for (auto it = node.begin(); it != node.end(); ++it) {
        out << YAML::Key;
        Emit(out, it->first);
        out << YAML::Value;
        Emit(out, it->second);
      }
      out << YAML::EndMap;
      return;
    case YAML::NodeType::Sequence:
      if (node.size() == 0) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::Block << YAML::BeginSeq;
      for (const YAML::Node& item : node) Emit(out, item);
      out << YAML::EndSeq;
      return;
    case YAML::NodeType::Scalar:
      // Quoted in the JSON (tag "!"): a string, whatever it looks like.
      if (node.Tag() == "!" && NeedsQuotes(node.Scalar())) {
        out << YAML::DoubleQuoted << node.Scalar();
      } else {
        out << node.Scalar();
      }
      return;
    default:
      out << YAML::Null;
  }
}

}  // namespace

std::string JsonToYaml(const std::string& json) {
  try {
    const YAML::Node node = YAML::Load(json);
    YAML::Emitter out;
    Emit(out, node);
    return out.c_str();
  } catch (const YAML::Exception&) {
    return json;
  }
}

std::string ToYaml(const google::protobuf::Message& msg) { return JsonToYaml(ToJson(msg)); }

std::string Printf(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value);
  return buf;
}

bool IsTerminalState(v1::JobState s) {
  return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED;
}

namespace {

// Characters, not bytes, of a UTF-8 string (for column widths: "×" is one).
size_t Width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string RankList(const google::protobuf::RepeatedField<int32_t>& ranks) {
  std::vector<std::string> parts;
  for (int r : ranks) parts.push_back(std::to_string(r));
  return parts.empty() ? "-" : Join(parts, ",");
}

// Every line of `text` (which ends with a newline) prefixed with `prefix`.
std::string Indent(const std::string& text, const std::string& prefix) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size() - 1;
    out += prefix + text.substr(start, end - start + 1);
    start = end + 1;
  }
  return out;
}

const v1::Attempt* CurrentAttempt(const v1::Job& job) {
  for (const auto& a : job.attempts()) {
    if (a.attempt() == job.attempt()) return &a;
  }
  return job.attempts_size() > 0 ? &job.attempts(job.attempts_size() - 1) : nullptr;
}

std::string WorkloadText(const v1::JobSpec& spec) {
  if (!spec.has_trainer()) {
    std::vector<std::string> argv(spec.command().begin(), spec.command().end());
    std::string text = "command: " + Join(argv, " ");
    if (text.size() > 100) text = text.substr(0, 97) + "...";
    return text;
  }
  const v1::TrainerSpec& t = spec.trainer();
  std::vector<std::string> parts;
  if (t.epochs() > 0) parts.push_back("epochs " + std::to_string(t.epochs()));
  if (t.max_steps() > 0) parts.push_back("max steps " + std::to_string(t.max_steps()));
  if (t.batch_size() > 0) parts.push_back("batch " + std::to_string(t.batch_size()));
  if (t.lr() > 0) parts.push_back("lr " + Printf("%g", t.lr()));
  if (!t.optimizer().empty()) parts.push_back(t.optimizer());
  std::string text = "trainer " + (t.model().empty() ? std::string("fmnist-cnn") : t.model());
  if (!parts.empty()) text += " (" + Join(parts, ", ") + ")";
  return text;
}

}  // namespace

std::string FormatDuration(int64_t ms) {
  if (ms <= 0) return "0s";
  if (ms < 1000) return std::to_string(ms) + "ms";
  const int64_t s = ms / 1000;
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>((s % 86400) / 3600));
  }
  return buf;
}

std::string FormatAge(int64_t unix_ms, int64_t now_unix_ms) {
  if (unix_ms <= 0) return "-";
  return FormatDuration(now_unix_ms - unix_ms) + " ago";
}

std::string FormatClock(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  return buf;
}

std::string StateText(v1::JobState state) {
  return state == v1::JOB_STATE_UNSPECIFIED ? "-" : v1::JobState_Name(state);
}

std::string WorkerStateText(v1::WorkerState state) {
  std::string name = v1::WorkerState_Name(state);
  return name.rfind("WORKER_", 0) == 0 ? name.substr(7) : name;
}

std::string ShapeText(const v1::JobSpec& spec) {
  const std::string nodes = spec.max_nodes() > 0 ? std::to_string(spec.min_nodes()) + "-" +
                                                       std::to_string(spec.max_nodes())
                                                 : std::to_string(spec.nodes());
  return nodes + "×" +
         (spec.procs_per_node_gpu() ? std::string("gpu") : std::to_string(spec.procs_per_node()));
}

std::string ExitText(const v1::ProcessExit& exit) {
  if (exit.signal() != 0) {
    const std::string name =
        exit.signal_name().empty() ? SignalName(exit.signal()) : exit.signal_name();
    return "killed by " + name + (exit.killed_by_worker() ? " (sent by the worker)" : "");
  }
  if (exit.exit_code() != 0) return "exited with code " + std::to_string(exit.exit_code());
  return "";
}

std::string FormatPercent(double fraction) { return Printf("%.2f%%", fraction * 100); }

std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(header.size(), 0);
  auto measure = [&widths](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], Width(row[i]));
    }
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  std::ostringstream out;
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - Width(row[i]) + 2, ' ');
    }
    out << line << "\n";
  };
  print(header);
  for (const auto& row : rows) print(row);
  return out.str();
}

std::string FormatJobTable(const v1::ListJobsResponse& jobs, int64_t now) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::Job& j : jobs.jobs()) {
    rows.push_back({j.id(), j.spec().name(), j.owner().empty() ? "-" : j.owner(),
                    StateText(j.state()), std::to_string(j.attempt()), ShapeText(j.spec()),
                    j.created_unix_ms() > 0 ? FormatDuration(now - j.created_unix_ms()) : "-",
                    ListMessage(j)});  // a sweep's and a trial's: client/sweep.h
  }
  return FormatTable({"ID", "NAME", "OWNER", "STATE", "ATTEMPT", "NODES×PROCS", "AGE", "MESSAGE"},
                     rows);
}

std::string FormatQueue(const v1::ListJobsResponse& jobs, int64_t now) {
  std::vector<const v1::Job*> waiting;
  for (const v1::Job& j : jobs.jobs()) {
    if (ShownInQueue(j)) waiting.push_back(&j);
  }
  std::stable_sort(waiting.begin(), waiting.end(),
                   [](const v1::Job* a, const v1::Job* b) { return QueueOrderLess(*a, *b); });
  if (waiting.empty()) return "no job is waiting\n";
  std::vector<std::vector<std::string>> rows;
  for (const v1::Job* j : waiting) {
    rows.push_back(
        {QueuePositionCell(*j), j->id(), j->spec().name(), j->owner().empty() ? "-" : j->owner(),
         std::to_string(j->spec().priority()), ShapeText(j->spec()),
         j->created_unix_ms() > 0 ? FormatDuration(now - j->created_unix_ms()) : "-",
         j->estimated_start_unix_ms() > 0 ? FormatClock(j->estimated_start_unix_ms()) : "-",
         j->pending_reason()});
  }
  return FormatTable(
      {"#", "ID", "NAME", "OWNER", "PRIO", "NODES×PROCS", "WAITED", "STARTS BY", "WHY IT WAITS"},
      rows);
}

std::string FormatBytes(int64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(std::max<int64_t>(bytes, 0));
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  const bool whole = u == 0 || v >= 100 || std::fabs(v - std::round(v)) < 0.05;
  return Printf(whole ? "%.0f" : "%.1f", v) + " " + kUnits[u];
}

std::string FormatUsedOfBytes(int64_t used, int64_t total) {
  if (total <= 0) return used > 0 ? FormatBytes(used) + "/?" : "-";
  // Both in the total's unit: "30/64 GiB", "1.5/23.4 GiB".
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double scale = 1;
  while (static_cast<double>(total) / scale >= 1024 && u < 5) {
    scale *= 1024;
    ++u;
  }
  auto number = [&](int64_t bytes) -> std::string {
    const double v = static_cast<double>(std::max<int64_t>(bytes, 0)) / scale;
    if (bytes > 0 && v < 0.05) return "<0.1";  // in use, but less than the unit shows
    const bool whole = u == 0 || v >= 100 || std::fabs(v - std::round(v)) < 0.05;
    return Printf(whole ? "%.0f" : "%.1f", v);
  };
  return number(used) + "/" + number(total) + " " + kUnits[u];
}

std::string GpuModelShort(const std::string& model) {
  std::vector<std::string> words;
  std::istringstream in(model);
  for (std::string w; in >> w;) {
    if (words.empty() && (w == "NVIDIA" || w == "Tesla" || w == "GeForce" || w == "Quadro")) {
      continue;  // the vendor and product-line words say nothing here
    }
    words.push_back(w);
  }
  if (words.empty()) return "";
  // "H100" of "H100 80GB HBM3"; a first word of letters only names a family: "RTX A6000".
  const bool letters = std::all_of(words[0].begin(), words[0].end(), [](char c) {
    return std::isalpha(static_cast<unsigned char>(c));
  });
  return letters && words.size() > 1 ? words[0] + " " + words[1] : words[0];
}

namespace {

// Joins `items` with commas, the first `max` of them and "+N" for the rest; "-" for none.
std::string JoinSome(const std::vector<std::string>& items, size_t max) {
  if (items.empty()) return "-";
  std::string out;
  for (size_t i = 0; i < items.size() && i < max; ++i) out += (i == 0 ? "" : ",") + items[i];
  if (items.size() > max) out += " +" + std::to_string(items.size() - max);
  return out;
}

std::string GpuCell(const v1::WorkerInfo& w) {
  const int total = std::max(w.gpus_size(), w.gpu_devices_size());
  if (total == 0) return "-";
  std::vector<std::string> models;
  for (const v1::GpuDevice& d : w.gpu_devices()) {
    const std::string m = GpuModelShort(d.model());
    if (!m.empty() && std::find(models.begin(), models.end(), m) == models.end()) {
      models.push_back(m);
    }
  }
  std::string cell = std::to_string(w.used_gpus_size()) + "/" + std::to_string(total);
  if (!models.empty()) cell += " " + Join(models, "+");
  return cell;
}

std::string LabelCell(const v1::WorkerInfo& w) {
  if (w.labels().empty()) return "-";
  // Sorted by key (the proto map has no order); long sets are cut: -o json has them all.
  std::map<std::string, std::string> sorted(w.labels().begin(), w.labels().end());
  std::string out;
  for (const auto& [k, v] : sorted) out += (out.empty() ? "" : ",") + k + "=" + v;
  constexpr size_t kMax = 24;
  if (Width(out) > kMax) out = out.substr(0, kMax - 1) + "…";
  return out;
}

}  // namespace

std::string FormatWorkerTable(const v1::ListWorkersResponse& workers, int64_t now) {
  std::vector<std::vector<std::string>> rows;
  bool any_why = false;  // when nodes are sick: a WHY column, only when a worker needs one
  for (const v1::WorkerInfo& w : workers.workers()) any_why = any_why || !SickReason(w).empty();
  for (const v1::WorkerInfo& w : workers.workers()) {
    std::string state = WorkerStateText(w.state());
    if (w.drained()) state += ",DRAINED";
    state += SickStateSuffix(w);
    std::vector<std::string> jobs(w.jobs().begin(), w.jobs().end());
    rows.push_back({w.name(), state,
                    std::to_string(w.used_slots()) + "/" + std::to_string(w.slots()),
                    std::to_string(w.used_cpus()) + "/" + std::to_string(w.cores()),
                    FormatUsedOfBytes(w.used_memory_bytes(), w.memory_bytes()), GpuCell(w),
                    LabelCell(w), FormatAge(w.last_heartbeat_unix_ms(), now), JoinSome(jobs, 2)});
    if (any_why) rows.back().push_back(SickReason(w).empty() ? "-" : SickReason(w));
  }
  std::vector<std::string> head = {"NAME", "STATE",  "SLOTS",     "CORES", "MEMORY",
                                   "GPUS", "LABELS", "HEARTBEAT", "JOBS"};
  if (any_why) head.push_back("WHY");
  return FormatTable(head, rows);
}

std::string FormatFailureDetails(const v1::RankFailure& f, const std::string& indent) {
  std::string where = "rank " + std::to_string(f.rank());
  if (f.local_rank() != f.rank()) where += " (local " + std::to_string(f.local_rank()) + ")";
  if (!f.worker().empty()) where += ", worker " + f.worker();
  if (!f.host().empty()) where += ", host " + f.host();
  const std::string exit = ExitText(f.exit());
  std::string out = indent + where + (exit.empty() ? "" : ": " + exit) + "\n";
  if (!f.exit().error_type().empty() || !f.exit().error_message().empty()) {
    out += indent + "raised " + f.exit().error_type() +
           (f.exit().error_message().empty() ? "" : ": " + f.exit().error_message()) + "\n";
  }
  if (!f.exit().error_traceback().empty()) {
    out += indent + "traceback (TORCHELASTIC_ERROR_FILE):\n";
    std::string tb = f.exit().error_traceback();
    size_t start = 0;
    while (start < tb.size()) {
      size_t end = tb.find('\n', start);
      if (end == std::string::npos) end = tb.size();
      out += indent + "  | " + tb.substr(start, end - start) + "\n";
      start = end + 1;
    }
  } else if (f.exit().stderr_tail_size() > 0) {
    out += indent + "last lines of its stderr:\n";
    for (const auto& line : f.exit().stderr_tail()) out += indent + "  | " + line + "\n";
  }
  return out;
}

std::string FormatFailure(const v1::RankFailure& f, const std::string& indent) {
  if (f.reason().empty()) return FormatFailureDetails(f, indent);
  std::string out = indent + f.reason() + "\n";
  if (f.origin() == v1::FAILURE_ORIGIN_NODE) {
    out += indent + "  the node's fault: " + f.origin_reason() + "\n";
  }
  return out + FormatFailureDetails(f, indent + "  ");
}

std::string FormatEvent(const v1::JobEvent& e) {
  // An event that changed no state (a straggler named, a worker cordoned) shows the state once.
  if (e.from() == e.to() && e.from() != v1::JOB_STATE_UNSPECIFIED) {
    return FormatClock(e.time_unix_ms()) + "  " + StateText(e.to()) + "  " + e.reason();
  }
  return FormatClock(e.time_unix_ms()) + "  " + StateText(e.from()) + " -> " + StateText(e.to()) +
         "  " + e.reason();
}

std::string FormatRankProgress(const v1::MetricRecord& m) {
  std::vector<std::string> parts;
  parts.push_back("epoch " + std::to_string(m.epoch()));
  std::string step = "step " + std::to_string(m.step());
  auto total = m.values().find("total_steps");
  if (total != m.values().end() && total->second > 0) step += Printf("/%.0f", total->second);
  parts.push_back(step);
  if (m.has_loss()) parts.push_back(Printf("loss %.4f", m.loss()));
  auto rate = m.values().find("samples_per_s");
  if (rate != m.values().end()) parts.push_back(Printf("%.0f samples/s", rate->second));
  auto acc = m.values().find("test_accuracy");
  if (acc != m.values().end()) parts.push_back("test acc " + FormatPercent(acc->second));
  return Join(parts, "  ");
}

double TestAccuracy(const std::vector<v1::MetricRecord>& records, int attempt) {
  double sum = 0;
  int n = 0;
  for (const auto& m : records) {
    if (m.attempt() != attempt) continue;
    auto it = m.values().find("test_accuracy");
    if (it == m.values().end()) continue;
    sum += it->second;
    ++n;
  }
  return n == 0 ? -1 : sum / n;
}

double TestAccuracy(const v1::Job& job) {
  return TestAccuracy(std::vector<v1::MetricRecord>(job.latest().begin(), job.latest().end()),
                      job.attempt());
}

std::string FormatJobStatus(const v1::Job& job, int64_t now) {
  const v1::JobSpec& spec = job.spec();
  std::ostringstream out;
  out << "job " << job.id() << " (" << spec.name() << "): " << StateText(job.state()) << "\n";
  if (!job.message().empty()) out << "  message:  " << job.message() << "\n";
  out << FormatDependencies(job);  // `after`: what it waits for
  if (!job.pending_reason().empty() && job.waiting_for_size() == 0) {
    out << "  waiting:  #" << job.queue_position() << " in the queue: " << job.pending_reason()
        << "\n";
    if (job.estimated_start_unix_ms() > 0) {
      out << "  starts:   by " << FormatClock(job.estimated_start_unix_ms()) << " (estimated)\n";
    }
  }
  if (job.spec().priority() != 0 || job.spec().max_runtime_s() > 0) {
    out << "  priority: " << job.spec().priority();
    if (job.spec().max_runtime_s() > 0) {
      out << ", max_runtime " << FormatDuration(job.spec().max_runtime_s() * 1000);
    }
    out << "\n";
  }
  out << "  shape:    " << ShapeText(spec) << " (nodes×procs), backend "
      << (spec.backend().empty() ? "gloo" : spec.backend()) << "\n";
  out << "  runs:     " << WorkloadText(spec) << "\n";
  out << "  attempt:  " << job.attempt() << " (restarts used " << job.restarts() << " of "
      << spec.max_restarts() << ")";
  if (job.preemptions() > 0) {
    out << "; preempted or resized " << job.preemptions() << " time"
        << (job.preemptions() == 1 ? "" : "s") << ", no restart used";
  }
  out << "\n";
  out << "  created:  " << FormatAge(job.created_unix_ms(), now)
      << (job.owner().empty() ? "" : " by " + job.owner()) << ", updated "
      << FormatAge(job.updated_unix_ms(), now) << "\n";
  if (!job.uid().empty()) out << "  uid:      " << job.uid() << "\n";
  const double accuracy = TestAccuracy(job);
  if (accuracy >= 0) out << "  test accuracy: " << FormatPercent(accuracy) << "\n";

  if (const v1::Attempt* a = CurrentAttempt(job)) {
    out << "placement (attempt " << a->attempt() << "): master "
        << (a->master_addr().empty() ? "-"
                                     : a->master_addr() + ":" + std::to_string(a->master_port()))
        << "\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& n : a->nodes()) {
      rows.push_back(
          {std::to_string(n.group_rank()), n.worker(), n.address(), RankList(n.ranks())});
    }
    out << Indent(FormatTable({"NODE", "WORKER", "ADDRESS", "RANKS"}, rows), "  ");
  }

  std::vector<const v1::MetricRecord*> latest;
  for (const auto& m : job.latest()) {
    if (m.attempt() == job.attempt()) latest.push_back(&m);
  }
  std::sort(latest.begin(), latest.end(), [](auto* a, auto* b) { return a->rank() < b->rank(); });
  if (!latest.empty()) {
    out << "progress (latest record of each rank):\n";
    for (const auto* m : latest) {
      out << "  rank " << m->rank() << "  " << FormatRankProgress(*m) << "  ("
          << FormatAge(m->time_unix_ms(), now) << ")\n";
    }
  }

  if (const std::string sick = FormatSickRanks(job); !sick.empty()) {
    out << "sick ranks and nodes:\n" << sick;
  }

  bool any_failure = false;
  for (const auto& a : job.attempts()) {
    if (!a.has_failure()) continue;
    if (!any_failure) out << "failures (the root cause of each failed attempt):\n";
    any_failure = true;
    out << "  attempt " << a.attempt() << ":\n" << FormatFailure(a.failure(), "    ");
  }

  out << "events:\n";
  for (const auto& e : job.events()) out << "  " << FormatEvent(e) << "\n";
  return out.str();
}

}  // namespace convoy
