// A job's ranks as real convoy-trainer processes, for the trainer tests that start, signal
// and read them (fast_restart_test.cc, bad_steps_test.cc), and what their logs and state
// directories say. Needs CONVOY_TRAINER_BIN.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/trainer/trainer_test_util.h"

namespace convoy::trainer::test_util {

namespace fs = std::filesystem;
using Env = std::map<std::string, std::string>;
using std::chrono::seconds;

inline bool Eventually(const std::function<bool()>& done, seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// `world` convoy-trainer processes with the torchrun environment (LOCAL_RANK = RANK: one
// host), rank R's output in <log>.rank<R>, `env(R)` added on top. The destructor kills and
// reaps whatever still runs.
class Ranks {
 public:
  Ranks(int world, const std::vector<std::string>& args, const std::string& log,
        const std::function<Env(int)>& env = nullptr)
      : log_(log) {
    const int port = FreePort();
    for (int r = 0; r < world; ++r) {
      Env e{{"RANK", std::to_string(r)},       {"WORLD_SIZE", std::to_string(world)},
            {"LOCAL_RANK", std::to_string(r)}, {"LOCAL_WORLD_SIZE", std::to_string(world)},
            {"MASTER_ADDR", "127.0.0.1"},      {"MASTER_PORT", std::to_string(port)}};
      if (env) {
        for (const auto& [k, v] : env(r)) e[k] = v;
      }
      const pid_t pid = fork();
      if (pid == 0) {
        for (const char* name :
             {"CONVOY_METRICS_SOCKET", "CONVOY_CHECKPOINT_DIR", "CONVOY_SNAPSHOT_DIR",
              "CONVOY_PREEMPT_FILE", "CONVOY_JOB_ID", "CONVOY_MAX_WORLD_SIZE", "CONVOY_ATTEMPT"}) {
          unsetenv(name);
        }
        for (const auto& [k, v] : e) setenv(k.c_str(), v.c_str(), 1);
        const int fd = open(Log(r).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        std::vector<std::string> a = args;
        std::vector<char*> argv{const_cast<char*>(CONVOY_TRAINER_BIN)};
        for (auto& s : a) argv.push_back(s.data());
        argv.push_back(nullptr);
        execv(CONVOY_TRAINER_BIN, argv.data());
        _exit(127);
      }
      pids_.push_back(pid);
      status_.push_back(-1);
    }
  }
  ~Ranks() {
    for (size_t r = 0; r < pids_.size(); ++r) {
      if (status_[r] == -1) {
        kill(pids_[r], SIGKILL);
        waitpid(pids_[r], &status_[r], 0);
      }
    }
  }
  std::string Log(int r) const { return log_ + ".rank" + std::to_string(r); }
  std::string Output(int r) const { return ReadFile(Log(r)); }
  void Signal(int r, int sig) { kill(pids_[static_cast<size_t>(r)], sig); }
  // The wait statuses once every rank has exited; a rank still running at `timeout` is
  // killed and fails the test.
  std::vector<int> Wait(seconds timeout) {
    const bool all = Eventually(
        [this] {
          bool done = true;
          for (size_t r = 0; r < pids_.size(); ++r) {
            if (status_[r] == -1 && waitpid(pids_[r], &status_[r], WNOHANG) == 0) {
              status_[r] = -1;
              done = false;
            }
          }
          return done;
        },
        timeout);
    EXPECT_TRUE(all) << "ranks still running after " << timeout.count() << " s";
    return status_;
  }
  // Rank r's wait status once it exited, or -1 at `timeout`.
  int WaitOne(int r, seconds timeout) {
    const size_t i = static_cast<size_t>(r);
    Eventually(
        [&] {
          if (status_[i] == -1 && waitpid(pids_[i], &status_[i], WNOHANG) == 0) status_[i] = -1;
          return status_[i] != -1;
        },
        timeout);
    return status_[i];
  }
  // Stops ranks `which` (SIGSTOP) once `running()` holds of them running and `stopped()` of
  // them stopped (50 ms later: the files they leave are the files seen); while `stopped()`
  // does not hold they go on and it is tried again. They stay stopped; false at `timeout`.
  bool StopWhen(const std::vector<int>& which, const std::function<bool()>& running,
                const std::function<bool()>& stopped, seconds timeout) {
    return Eventually(
        [&] {
          if (!running()) return false;
          for (int r : which) Signal(r, SIGSTOP);
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          if (stopped()) return true;
          for (int r : which) Signal(r, SIGCONT);
          return false;
        },
        timeout);
  }
  bool AllExitedWith(seconds timeout, int code) {
    bool ok = true;
    const auto st = Wait(timeout);
    for (size_t r = 0; r < st.size(); ++r) {
      const bool good = WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == code;
      EXPECT_TRUE(good) << "rank " << r << ": wait status " << st[r] << ", wanted exit " << code
                        << "\n"
                        << Output(static_cast<int>(r));
      ok = ok && good;
    }
    return ok;
  }

 private:
  const std::string log_;
  std::vector<pid_t> pids_;
  std::vector<int> status_;  // -1 while running
};

// The last step in a rank's "rank R epoch E step S/T ..." lines (--log-every 1).
inline int64_t LastStep(const std::string& log) {
  static const std::regex re(R"(^rank \d+ epoch \d+ step (\d+)/\d+ loss)");
  int64_t last = -1;
  std::istringstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, re)) last = std::max<int64_t>(last, std::stoll(m[1]));
  }
  return last;
}

// The newest snapshot's step in `dir` (-1: none).
inline int64_t NewestSnapshot(const fs::path& dir) {
  int64_t best = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("snap-", 0) == 0 && f.size() == 21)
      best = std::max<int64_t>(best, std::stoll(f.substr(5, 12)));
  }
  return best;
}

// The newest disk checkpoint's step in `dir` (-1: none).
inline int64_t NewestCheckpoint(const fs::path& dir) {
  int64_t best = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("ckpt-", 0) == 0 && f.size() == 20)
      best = std::max<int64_t>(best, std::stoll(f.substr(5, 12)));
  }
  return best;
}

inline std::string Padded(int64_t step) {
  std::string s = std::to_string(step);
  return std::string(12 - s.size(), '0') + s;
}

}  // namespace convoy::trainer::test_util
