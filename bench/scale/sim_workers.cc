// convoy-sim-workers: N simulated convoy-workers in one process, each on its own gRPC channel
// and TCP connection, on gRPC's callback client API (no thread per worker). Each registers,
// heartbeats at the interval the coordinator asks for (jittered), answers ReservePort,
// "runs" the ranks of a Launch (ProcessStarted, then ProcessExited with code 0 after
// --run-ms, or the job's env SIM_RUN_MS), obeys Kill, answers ReadLogs, and after a broken stream
// reconnects with jittered exponential backoff and registers again reporting the ranks it still
// runs. With --metrics-ms MS (or the job's env SIM_METRICS_MS) every running rank reports a
// metric record (step, epoch, loss, samples_per_s) every MS, batched per attempt as a real
// worker does. Traffic goes only to --coordinator (loopback in the benchmark).
//
// Prints one JSON line of counters a second on stdout (see Stats below).
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/fd_limit.h"
#include "convoy/v1/worker.grpc.pb.h"

namespace {

using convoy::v1::CoordinatorMessage;
using convoy::v1::WorkerMessage;

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
int64_t MonoMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Options {
  std::string coordinator = "127.0.0.1:7070";
  int workers = 100;
  int64_t run_ms = 0;
  int64_t metrics_ms = 0;  // 0: no metric records
  int ramp_per_s = 0;      // 0: all at once
  int duration_s = 600;
  int first_index = 1;
};

struct Stats {
  std::atomic<int64_t> registered_now{0};
  std::atomic<int64_t> ever_registered{0};
  std::atomic<int64_t> registrations{0};
  std::atomic<int64_t> refused{0};  // stream ended before its RegisterAck
  std::atomic<int64_t> dropped{0};  // stream ended after its RegisterAck
  std::atomic<int64_t> reconnects{0};
  std::atomic<int64_t> launches{0};
  std::atomic<int64_t> first_launch_unix_ms{0};
  std::atomic<int64_t> last_launch_unix_ms{0};
  std::atomic<int64_t> last_register_unix_ms{0};
  std::atomic<int64_t> exits_sent{0};
  std::atomic<int64_t> records_sent{0};
};

Stats g_stats;
std::atomic<bool> g_stopping{false};

class SimWorker;

// One Connect stream of one simulated worker.
class Session : public grpc::ClientBidiReactor<WorkerMessage, CoordinatorMessage> {
 public:
  Session(SimWorker* owner, convoy::v1::WorkerService::Stub* stub);
  void Send(const WorkerMessage& msg);
  void Cancel() { ctx_.TryCancel(); }
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;
  void Start();

 private:
  SimWorker* owner_;
  grpc::ClientContext ctx_;
  CoordinatorMessage in_;
  std::mutex mu_;
  std::deque<WorkerMessage> queue_;
  bool writing_ = false;
  bool dead_ = false;
  bool acked_ = false;
};

struct Rank {
  int rank = 0;
  int local_rank = 0;
  int pid = 0;
  bool running = true;
  int64_t exit_at_mono_ms = 0;  // 0: runs until killed
  int64_t step = 0;
};

class SimWorker {
 public:
  SimWorker(int index, const Options& options) : index_(index), options_(options) {
    char name[32];
    std::snprintf(name, sizeof(name), "sim-%05d", index);
    name_ = name;
    Dial();
    rng_.seed(static_cast<uint32_t>(index * 7919 + getpid()));
  }

  const std::string& name() const { return name_; }

  // Its own channel (and connection) to the coordinator, or to whichever of several leads
  // ("ipv4:A,B,C": followers do not listen).
  void Dial() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // its own connection
    args.SetInt("convoy.sim_worker", index_);
    // A loaded coordinator may take seconds to accept: wait (the min reconnect backoff is
    // also gRPC's connect timeout).
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20000);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 30000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
    channel_ =
        grpc::CreateCustomChannel(options_.coordinator, grpc::InsecureChannelCredentials(), args);
    stub_ = convoy::v1::WorkerService::NewStub(channel_);
  }

  void Connect() {
    std::lock_guard<std::mutex> lock(mu_);
    if (g_stopping) return;
    // Several coordinators: a fresh channel per reconnect, as convoy-worker does, so that the
    // old one's backoff towards followers does not hold off the new leader.
    if (connected_once_ && options_.coordinator.find(',') != std::string::npos) Dial();
    connected_once_ = true;
    session_ = new Session(this, stub_.get());
    next_connect_mono_ms_ = 0;
    WorkerMessage reg;
    BuildRegister(reg.mutable_register_());
    session_->Send(reg);
    session_->Start();
  }

  // Called by the timer thread about every 50 ms.
  void Poll(int64_t now) {
    std::vector<WorkerMessage> out;
    bool connect = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (session_ == nullptr) {
        connect = next_connect_mono_ms_ != 0 && now >= next_connect_mono_ms_;
      } else if (acked_ && now >= next_heartbeat_mono_ms_) {
        WorkerMessage hb;
        hb.mutable_heartbeat()->set_time_unix_ms(UnixMs());
        out.push_back(hb);
        next_heartbeat_mono_ms_ = now + heartbeat_ms_;
      }
      for (auto& [key, ranks] : attempts_) {
        auto every = metrics_ms_.find(key);
        if (every != metrics_ms_.end() && every->second > 0 && now >= next_metrics_mono_ms_[key]) {
          next_metrics_mono_ms_[key] = now + every->second;
          WorkerMessage batch;
          auto* b = batch.mutable_metrics();
          b->set_job_id(key.first);
          b->set_attempt(key.second);
          for (Rank& r : ranks) {
            if (!r.running) continue;
            auto* rec = b->add_records();
            rec->set_rank(r.rank);
            rec->set_attempt(key.second);
            rec->set_time_unix_ms(UnixMs());
            rec->set_step(++r.step);
            rec->set_has_step(true);
            rec->set_epoch(static_cast<int32_t>(r.step / 1000));
            rec->set_loss(2.3 / (1.0 + 0.001 * static_cast<double>(r.step)));
            rec->set_has_loss(true);
            rec->set_kind("step");
            (*rec->mutable_values())["samples_per_s"] = 1000.0 + r.rank % 7;
          }
          if (b->records_size() > 0) {
            g_stats.records_sent += b->records_size();
            out.push_back(std::move(batch));
          }
        }
        for (Rank& r : ranks) {
          if (!r.running || r.exit_at_mono_ms == 0 || now < r.exit_at_mono_ms) continue;
          r.running = false;
          out.push_back(Exited(key, r, 0));
        }
      }
      if (session_ != nullptr && acked_) {
        for (auto& m : out) session_->Send(m);
      }
    }
    if (connect) {
      g_stats.reconnects++;
      Connect();
    }
  }

  void Shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (session_ != nullptr) session_->Cancel();
  }

  // ---- from the session (reactor threads)
  void OnMessage(Session* s, const CoordinatorMessage& msg) {
    std::lock_guard<std::mutex> lock(mu_);
    if (s != session_) return;
    if (msg.has_register_ack()) {
      acked_ = true;
      heartbeat_ms_ = msg.register_ack().heartbeat_interval_ms() > 0
                          ? msg.register_ack().heartbeat_interval_ms()
                          : 1000;
      next_heartbeat_mono_ms_ = MonoMs() + static_cast<int64_t>(rng_() % heartbeat_ms_);
      backoff_ms_ = 500;
      g_stats.registered_now++;
      g_stats.registrations++;
      if (!ever_registered_) {
        ever_registered_ = true;
        g_stats.ever_registered++;
      }
      g_stats.last_register_unix_ms = UnixMs();
      return;
    }
    if (msg.has_reserve_port()) {
      WorkerMessage out;
      auto* p = out.mutable_port_reserved();
      p->set_job_id(msg.reserve_port().job_id());
      p->set_attempt(msg.reserve_port().attempt());
      p->set_port(20000 + index_ % 40000);
      s->Send(out);
    } else if (msg.has_launch()) {
      const auto& l = msg.launch();
      const int64_t now_unix = UnixMs();
      g_stats.launches++;
      int64_t expected = 0;
      g_stats.first_launch_unix_ms.compare_exchange_strong(expected, now_unix);
      g_stats.last_launch_unix_ms = now_unix;
      auto& ranks = attempts_[{l.job_id(), l.attempt()}];
      ranks.clear();
      int64_t metrics_ms = options_.metrics_ms;
      auto metrics_env = l.spec().env().find("SIM_METRICS_MS");
      if (metrics_env != l.spec().env().end()) metrics_ms = std::atoll(metrics_env->second.c_str());
      metrics_ms_[{l.job_id(), l.attempt()}] = metrics_ms;
      // A job's spec may say how long its simulated ranks run (env SIM_RUN_MS).
      int64_t run_ms = options_.run_ms;
      auto env = l.spec().env().find("SIM_RUN_MS");
      if (env != l.spec().env().end()) run_ms = std::atoll(env->second.c_str());
      for (int i = 0; i < l.local_world_size(); ++i) {
        Rank r;
        r.rank = i < l.ranks_size() ? l.ranks(i) : l.group_rank() * l.local_world_size() + i;
        r.local_rank = i;
        r.pid = 100000 + index_ * 8 + i;
        r.exit_at_mono_ms = MonoMs() + run_ms;
        ranks.push_back(r);
        WorkerMessage out;
        auto* st = out.mutable_process_started();
        st->set_job_id(l.job_id());
        st->set_attempt(l.attempt());
        st->set_rank(r.rank);
        st->set_local_rank(i);
        st->set_pid(r.pid);
        s->Send(out);
        if (run_ms == 0) {
          ranks.back().running = false;
          s->Send(Exited({l.job_id(), l.attempt()}, ranks.back(), 0));
        }
      }
    } else if (msg.has_kill()) {
      auto it = attempts_.find({msg.kill().job_id(), msg.kill().attempt()});
      if (it == attempts_.end()) return;
      for (Rank& r : it->second) {
        if (!r.running) continue;
        r.running = false;
        s->Send(Exited(it->first, r, SIGTERM));
      }
    } else if (msg.has_read_logs()) {
      WorkerMessage out;
      out.mutable_log_data()->set_request_id(msg.read_logs().request_id());
      out.mutable_log_data()->set_next_offset(0);
      out.mutable_log_data()->set_eof(true);
      s->Send(out);
    } else if (msg.has_forget_attempt()) {
      attempts_.erase({msg.forget_attempt().job_id(), msg.forget_attempt().attempt()});
      metrics_ms_.erase({msg.forget_attempt().job_id(), msg.forget_attempt().attempt()});
      next_metrics_mono_ms_.erase({msg.forget_attempt().job_id(), msg.forget_attempt().attempt()});
    }
  }

  void OnSessionDone(Session* s, bool was_acked) {
    std::lock_guard<std::mutex> lock(mu_);
    if (s != session_) return;
    session_ = nullptr;
    if (was_acked) {
      g_stats.registered_now--;
      if (!g_stopping) g_stats.dropped++;
    } else if (!g_stopping) {
      g_stats.refused++;
    }
    acked_ = false;
    // Full jitter over [backoff/2, backoff], doubling up to 30 s.
    const int64_t wait = backoff_ms_ / 2 + static_cast<int64_t>(rng_() % (backoff_ms_ / 2 + 1));
    backoff_ms_ = std::min<int64_t>(backoff_ms_ * 2, 30000);
    next_connect_mono_ms_ = MonoMs() + wait;
  }

 private:
  using Key = std::pair<std::string, int>;

  WorkerMessage Exited(const Key& key, const Rank& r, int signal) {
    WorkerMessage out;
    auto* e = out.mutable_process_exited();
    e->set_job_id(key.first);
    e->set_attempt(key.second);
    e->set_rank(r.rank);
    e->set_local_rank(r.local_rank);
    e->set_pid(r.pid);
    if (signal != 0) {
      e->mutable_exit()->set_signal(signal);
      e->mutable_exit()->set_signal_name("SIGTERM");
      e->mutable_exit()->set_killed_by_worker(true);
    }
    g_stats.exits_sent++;
    return out;
  }

  void BuildRegister(convoy::v1::Register* reg) {
    reg->set_name(name_);
    reg->set_address("127.0.0.1");
    reg->set_hostname("sim");
    reg->set_cores(1);
    reg->set_slots(1);
    reg->set_version("sim");
    for (const auto& [key, ranks] : attempts_) {
      auto* a = reg->add_attempts();
      a->set_job_id(key.first);
      a->set_attempt(key.second);
      for (const Rank& r : ranks) {
        auto* rs = a->add_ranks();
        rs->set_rank(r.rank);
        rs->set_local_rank(r.local_rank);
        rs->set_pid(r.pid);
        rs->set_running(r.running);
      }
    }
  }

  friend class Session;
  const int index_;
  const Options options_;
  std::string name_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<convoy::v1::WorkerService::Stub> stub_;
  std::mutex mu_;
  Session* session_ = nullptr;
  bool acked_ = false;
  bool connected_once_ = false;  // Connect ran before (a reconnect dials afresh)
  bool ever_registered_ = false;
  int64_t heartbeat_ms_ = 1000;
  int64_t next_heartbeat_mono_ms_ = 0;
  int64_t next_connect_mono_ms_ = 0;
  int64_t backoff_ms_ = 500;
  std::mt19937 rng_;
  std::map<Key, std::vector<Rank>> attempts_;
  std::map<Key, int64_t> metrics_ms_;            // each attempt's record interval (0: none)
  std::map<Key, int64_t> next_metrics_mono_ms_;  // when its next batch is due
};

Session::Session(SimWorker* owner, convoy::v1::WorkerService::Stub* stub) : owner_(owner) {
  stub->async()->Connect(&ctx_, this);
}

void Session::Start() {
  StartRead(&in_);
  StartCall();
}

void Session::Send(const WorkerMessage& msg) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dead_) return;
  queue_.push_back(msg);
  if (!writing_) {
    writing_ = true;
    StartWrite(&queue_.front());
  }
}

void Session::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.pop_front();
  if (!ok) {
    dead_ = true;
    queue_.clear();
  }
  if (!queue_.empty() && !dead_) {
    StartWrite(&queue_.front());
  } else {
    writing_ = false;
  }
}

void Session::OnReadDone(bool ok) {
  if (!ok) {
    std::lock_guard<std::mutex> lock(mu_);
    dead_ = true;
    return;
  }
  if (in_.has_register_ack()) acked_ = true;
  owner_->OnMessage(this, in_);
  StartRead(&in_);
}

void Session::OnDone(const grpc::Status&) {
  owner_->OnSessionDone(this, acked_);
  delete this;
}

int ThreadCount() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return 0;
}

double CpuSeconds() {
  std::ifstream f("/proc/self/stat");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = all.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields;
  size_t pos = close + 2;
  while (pos < all.size()) {
    size_t next = all.find(' ', pos);
    if (next == std::string::npos) next = all.size();
    fields.push_back(all.substr(pos, next - pos));
    pos = next + 1;
  }
  // fields[0] is the state (field 3): utime is field 14, stime 15.
  if (fields.size() < 13) return 0;
  return (std::atof(fields[11].c_str()) + std::atof(fields[12].c_str())) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--coordinator") {
      o.coordinator = next();
    } else if (a == "--workers") {
      o.workers = std::atoi(next().c_str());
    } else if (a == "--run-ms") {
      o.run_ms = std::atoll(next().c_str());
    } else if (a == "--metrics-ms") {
      o.metrics_ms = std::atoll(next().c_str());
    } else if (a == "--ramp-per-s") {
      o.ramp_per_s = std::atoi(next().c_str());
    } else if (a == "--duration-s") {
      o.duration_s = std::atoi(next().c_str());
    } else if (a == "--first-index") {
      o.first_index = std::atoi(next().c_str());
    } else {
      std::fprintf(stderr,
                   "usage: convoy-sim-workers --coordinator HOST:PORT --workers N [--run-ms MS] "
                   "[--ramp-per-s N] [--duration-s S]\n");
      return 2;
    }
  }
  if (o.workers <= 0) {
    std::fprintf(stderr, "--workers: must be positive\n");
    return 2;
  }
  // As in convoy-coordinator: Debian's abseil checks every mutex acquisition for cycles.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const convoy::FileLimit files = convoy::RaiseFileLimit();
  std::fprintf(stderr, "sim-workers: %d workers, open-file limit %" PRIu64 "\n", o.workers,
               files.soft);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread signals([&set] {
    int sig = 0;
    sigwait(&set, &sig);
    g_stopping = true;
  });
  signals.detach();

  std::vector<std::unique_ptr<SimWorker>> workers;
  workers.reserve(o.workers);
  for (int i = 0; i < o.workers; ++i) {
    workers.push_back(std::make_unique<SimWorker>(o.first_index + i, o));
  }
  const int64_t start = MonoMs();
  std::thread timer([&] {
    size_t started = 0;
    int64_t next_stats = MonoMs();
    double last_cpu = CpuSeconds();
    int64_t last_stats_ms = MonoMs();
    while (!g_stopping) {
      const int64_t now = MonoMs();
      // Ramp: how many should have started by now.
      size_t due = o.ramp_per_s <= 0 ? workers.size()
                                     : static_cast<size_t>((now - start) * o.ramp_per_s / 1000);
      while (started < workers.size() && started < due) workers[started++]->Connect();
      for (size_t i = 0; i < started; ++i) workers[i]->Poll(now);
      if (now >= next_stats) {
        const double cpu = CpuSeconds();
        const double cpu_pct =
            (cpu - last_cpu) * 100000.0 / std::max<int64_t>(1, now - last_stats_ms);
        last_cpu = cpu;
        last_stats_ms = now;
        std::printf(
            "{\"unix_ms\":%" PRId64 ",\"registered_now\":%" PRId64 ",\"ever_registered\":%" PRId64
            ",\"registrations\":%" PRId64 ",\"refused\":%" PRId64 ",\"dropped\":%" PRId64
            ",\"reconnects\":%" PRId64 ",\"launches\":%" PRId64 ",\"first_launch_unix_ms\":%" PRId64
            ",\"last_launch_unix_ms\":%" PRId64 ",\"last_register_unix_ms\":%" PRId64
            ",\"exits_sent\":%" PRId64 ",\"records_sent\":%" PRId64
            ",\"cpu_s\":%.2f,\"cpu_pct\":%.1f,\"threads\":%d}\n",
            UnixMs(), g_stats.registered_now.load(), g_stats.ever_registered.load(),
            g_stats.registrations.load(), g_stats.refused.load(), g_stats.dropped.load(),
            g_stats.reconnects.load(), g_stats.launches.load(), g_stats.first_launch_unix_ms.load(),
            g_stats.last_launch_unix_ms.load(), g_stats.last_register_unix_ms.load(),
            g_stats.exits_sent.load(), g_stats.records_sent.load(), cpu, cpu_pct, ThreadCount());
        std::fflush(stdout);
        next_stats = now + 1000;
      }
      if (now - start > int64_t{o.duration_s} * 1000) g_stopping = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  timer.join();
  for (auto& w : workers) w->Shutdown();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::_Exit(0);  // 10,000 channels need not be torn down one by one
}
