// The warm Python (worker/exec/warm_trainer.h, worker/exec/convoy-forkserver.py) with real
// processes: which ranks fork from it and which start cold, one forkserver for every identity (each
// rank dropping to its own), exits reported. Needs Debian's python3-torch (skipped without it).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "worker/exec/posix_process_launcher.h"
#include "worker/exec/warm_trainer.h"

namespace convoy {
namespace worker_warm_python_test {

constexpr const char* kPython = "/usr/bin/python3";

pid_t ParentOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (s.empty()) return -1;
  int ppid = -1;
  char state = 0;
  sscanf(s.c_str() + s.rfind(')') + 1, " %c %d", &state, &ppid);
  return ppid;
}

class WarmPythonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/usr/lib/python3/dist-packages/torch")) {
      GTEST_SKIP() << "needs Debian's python3-torch";
    }
    dir_ = std::filesystem::temp_directory_path() / ("convoy-warm-py-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    std::filesystem::permissions(dir_, std::filesystem::perms::all);
    std::ofstream(dir_ / "s.py")
        << "import sys\nsys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)\n";
    std::filesystem::permissions(dir_ / "s.py", std::filesystem::perms::all);
    warm_ = std::make_unique<WarmTrainerLauncher>(
        cold_, "/nonexistent/convoy-trainer",
        std::map<std::string, std::string>{{"PATH", "/usr/bin:/bin"}});
  }
  void TearDown() override {
    // Every rank started is reaped (each is reported once).
    for (int i = 0; i < 2000 && !running_.empty(); ++i) {
      Reap(10);
    }
    EXPECT_TRUE(running_.empty()) << running_.size() << " rank(s) never reported";
    warm_.reset();
    std::filesystem::remove_all(dir_);
  }
  // Waits (up to 10 ms) for the launcher's descriptors, then collects exits.
  void Reap(int wait_ms) {
    std::vector<int> fds;
    warm_->ExitWakeFds(&fds);
    std::vector<pollfd> p;
    for (int fd : fds) p.push_back({fd, POLLIN, 0});
    poll(p.data(), p.size(), wait_ms);
    for (const ReapedProcess& r : warm_->PollExits()) {
      EXPECT_EQ(running_.count(r.pid), 1u) << "pid " << r.pid << " reported twice or never started";
      exits_[r.pid] = r.wait_status;
      running_.erase(r.pid);
    }
  }
  bool WaitReady() {
    for (int i = 0; i < 6000 && !warm_->python_ready(); ++i) Reap(10);
    return warm_->python_ready();
  }
  LaunchRequest Request(std::vector<std::string> argv) {
    LaunchRequest r;
    r.argv = std::move(argv);
    r.env = {{"PATH", "/usr/bin:/bin"}, {"PYTHONUNBUFFERED", "1"}};
    r.working_dir = dir_.string();
    return r;
  }
  // Launches and returns the rank's parent: the forkserver's pid or this process's.
  pid_t ParentOfLaunch(const LaunchRequest& r) {
    auto p = warm_->Launch(r);
    EXPECT_TRUE(p.ok()) << p.status().message();
    if (!p.ok()) return -1;
    running_.insert(p->pid);
    close(p->stdout_fd);
    close(p->stderr_fd);
    return ParentOf(p->pid);
  }

  std::filesystem::path dir_;
  PosixProcessLauncher cold_;
  std::unique_ptr<WarmTrainerLauncher> warm_;
  std::set<pid_t> running_;
  std::map<pid_t, int> exits_;
};

TEST_F(WarmPythonTest, ScriptsAndModulesForkWarmEverythingElseStartsCold) {
  const std::string script = std::string(CONVOY_SOURCE_DIR) + "/worker/exec/convoy-forkserver.py";
  ASSERT_TRUE(warm_->StartPython(kPython, script));
  ASSERT_TRUE(WaitReady());
  const pid_t server = warm_->python_pid();
  const pid_t self = getpid();
  EXPECT_EQ(ParentOfLaunch(Request({"python3", "s.py"})), server);
  EXPECT_EQ(ParentOfLaunch(Request({"python3", "-u", "s.py", "4"})), server);
  EXPECT_EQ(ParentOfLaunch(Request({"/usr/bin/python3", "-m", "json.tool", "--help"})), server);
  auto cuda = Request({"python3", "s.py"});
  cuda.env["CUDA_VISIBLE_DEVICES"] = "1";  // read when CUDA starts, in the rank
  cuda.env["OMP_NUM_THREADS"] = "3";       // applied after the fork
  EXPECT_EQ(ParentOfLaunch(cuda), server);
  // Cold: other interpreter options, -c, another interpreter, a missing script, a
  // variable read while Python or torch load, another program.
  EXPECT_EQ(ParentOfLaunch(Request({"python3", "-c", "pass"})), self);
  EXPECT_EQ(ParentOfLaunch(Request({"python3", "-B", "s.py"})), self);
  EXPECT_EQ(ParentOfLaunch(Request({"python3.11", "s.py"})), self);
  EXPECT_EQ(ParentOfLaunch(Request({"python3", "missing.py"})), self);
  auto path = Request({"python3", "s.py"});
  path.env["PYTHONPATH"] = "/opt/lib";
  EXPECT_EQ(ParentOfLaunch(path), self);
  auto torch = Request({"python3", "s.py"});
  torch.env["TORCH_SHOW_CPP_STACKTRACES"] = "1";
  EXPECT_EQ(ParentOfLaunch(torch), self);
  EXPECT_EQ(ParentOfLaunch(Request({"true"})), self);
  EXPECT_EQ(warm_->python_launches(), 4);
  // Exits come back with their status, each once (TearDown reaps the rest).
  for (int i = 0; i < 3000 && running_.size() > 0; ++i) Reap(10);
  bool saw_four = false;
  for (const auto& [pid, status] : exits_) {
    saw_four = saw_four || (WIFEXITED(status) && WEXITSTATUS(status) == 4);
  }
  EXPECT_TRUE(saw_four) << "the exit code of `python3 -u s.py 4`";
}

// Exits 3 when the string argv[1] names (reversed, so that the needle is made only after
// the memory was read) is in this process's writable memory, else 0.
constexpr const char* kScan = R"(import sys
chunks = []
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
    for line in maps:
        fields = line.split()
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if not fields[1].startswith("rw") or end - start > (64 << 20):
            continue
        try:
            mem.seek(start)
            chunks.append(mem.read(end - start))
        except OSError:
            pass
needle = sys.argv[1][::-1].encode()
sys.exit(3 if any(needle in c for c in chunks) else 0)
)";

TEST_F(WarmPythonTest, ARankFindsNoEarlierRequestInTheMemoryItInherits) {
  std::ofstream(dir_ / "scan.py") << kScan;
  const std::string script = std::string(CONVOY_SOURCE_DIR) + "/worker/exec/convoy-forkserver.py";
  ASSERT_TRUE(warm_->StartPython(kPython, script));
  ASSERT_TRUE(WaitReady());
  const std::string secret = "convoy-secret-" + std::to_string(getpid()) + "-q9z";
  const std::string reversed(secret.rbegin(), secret.rend());
  // A request that fails in the forkserver's child: its working directory (which the 'F'
  // reply names) and its environment carry the secret.
  auto bad = Request({"python3", (dir_ / "s.py").string()});
  bad.working_dir = "/nonexistent/" + secret;
  bad.env["TOKEN"] = secret;
  bad.env["A_PAD"] = std::string(3000, 'x');  // (a later, shorter request overwrites less)
  auto failed = warm_->Launch(bad);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(),
            "chdir /nonexistent/" + secret + ": No such file or directory");
  auto scan = [&](std::map<std::string, std::string> extra) {
    auto r = Request({"python3", "scan.py", reversed});
    for (const auto& [k, v] : extra) r.env[k] = v;
    auto p = warm_->Launch(r);
    EXPECT_TRUE(p.ok());
    running_.insert(p->pid);
    close(p->stdout_fd);
    close(p->stderr_fd);
    for (int i = 0; i < 3000 && running_.count(p->pid) != 0; ++i) Reap(10);
    return exits_.count(p->pid) != 0 ? exits_[p->pid] : -1;
  };
  const int later = scan({});
  ASSERT_TRUE(WIFEXITED(later)) << later;
  EXPECT_EQ(WEXITSTATUS(later), 0) << "a later rank found an earlier request's secret";
  // (The scan finds what is there: its own environment.)
  const int own = scan({{"MINE", secret}});
  ASSERT_TRUE(WIFEXITED(own)) << own;
  EXPECT_EQ(WEXITSTATUS(own), 3);
  EXPECT_EQ(warm_->python_launches(), 2);
}

TEST_F(WarmPythonTest, AForkserverThatCannotLoadIsNotStartedOverAndOver) {
  // An "interpreter" that fails at once, as one without torch does after a moment.
  const std::string fake = (dir_ / "fakepython").string();
  std::ofstream(fake) << "#!/bin/sh\nexit 1\n";
  std::filesystem::permissions(fake, std::filesystem::perms::all);
  warm_->StartPython(fake, std::string(CONVOY_SOURCE_DIR) + "/worker/exec/convoy-forkserver.py");
  for (int i = 0; i < 500 && warm_->python_pid() > 0; ++i) Reap(10);
  ASSERT_EQ(warm_->python_pid(), -1) << "it should have died";
  // Its ranks start cold, and no new forkserver is started for each of them.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ParentOfLaunch(Request({fake, "s.py"})), getpid());
    EXPECT_EQ(warm_->python_pid(), -1);
  }
  // Once the interpreter changes, it is tried again (this one lives: a fake that failed again
  // could be reaped before it is looked at, under load). It is started as `fakepython -I -u
  // .../convoy-forkserver.py FD`: the script is not its first argument.
  std::ofstream(fake) << "#!/bin/sh\nfor a in \"$@\"; do\n"
                      << "  case \"$a\" in *convoy-forkserver.py) exec sleep 60;; esac\n"
                      << "done\nexit 1\n";
  EXPECT_EQ(ParentOfLaunch(Request({fake, "s.py"})), getpid());
  EXPECT_GT(warm_->python_pid(), 0);
}

// Issue 45: one forkserver serves every identity, so the first job of a new identity forks
// warm like the hundredth; each rank drops to its own uid, gid and groups after the fork.
TEST_F(WarmPythonTest, OneForkserverServesEveryIdentityEachRankDropsToItsOwn) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run ranks as other users";
  const std::string script = std::string(CONVOY_SOURCE_DIR) + "/worker/exec/convoy-forkserver.py";
  std::ofstream(dir_ / "who.py") << "import os, sys\n"
                                 << "open(sys.argv[1], 'w').write('%s %s' % (os.getresuid(), "
                                    "os.getgroups()))\n";
  std::filesystem::permissions(dir_ / "who.py", std::filesystem::perms::all);
  const RunAsUser nobody{65534, 65534, "nobody", "/nonexistent"};
  const RunAsUser job{60417, 60417, "convoy-job", "/nonexistent"};  // a pool uid: no account
  ASSERT_TRUE(warm_->StartPython(kPython, script));
  ASSERT_TRUE(WaitReady());
  const pid_t server = warm_->python_pid();
  std::vector<pid_t> ranks;
  for (const RunAsUser& u : {nobody, job}) {
    auto r = Request({"python3", "who.py", (dir_ / std::to_string(u.uid)).string()});
    r.user = u;
    auto p = warm_->Launch(r);
    ASSERT_TRUE(p.ok()) << p.status().message();
    running_.insert(p->pid);
    close(p->stdout_fd);
    close(p->stderr_fd);
    EXPECT_EQ(ParentOf(p->pid), server) << "uid " << u.uid << " did not fork warm";
    ranks.push_back(p->pid);
  }
  for (int i = 0; i < 3000 && !running_.empty(); ++i) Reap(10);
  for (pid_t pid : ranks) EXPECT_EQ(exits_[pid], 0);
  auto read = [&](uid_t uid) {
    std::ifstream in(dir_ / std::to_string(uid));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(read(65534), "(65534, 65534, 65534) [65534]");
  EXPECT_EQ(read(60417), "(60417, 60417, 60417) [60417]");
  EXPECT_EQ(warm_->python_launches(), 2);
}

// What a process runs as (the real, effective, saved and file-system uids of
// /proc/PID/status) and its command line, NULs as spaces.
std::string UidsOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Uid:", 0) == 0) return line.substr(4);
  }
  return "";
}
std::string CmdlineOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : s) c = c == '\0' ? ' ' : c;
  return s;
}

// The forkserver runs as the worker (root here), isolated (-I) with a home no job can write:
// a .pth a job planted in its user's home directory (its user site, which a Python run with
// that HOME executes at start) runs neither in the forkserver nor in the rank forked from it.
TEST_F(WarmPythonTest, TheForkserverIsIsolatedAndRunsNoPlantedPth) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run a rank as another user";
  const std::string script = std::string(CONVOY_SOURCE_DIR) + "/worker/exec/convoy-forkserver.py";
  const std::filesystem::path home = dir_ / "home";
  const std::filesystem::path marks = dir_ / "marks";
  std::filesystem::create_directories(marks);
  std::filesystem::permissions(marks, std::filesystem::perms::all);
  for (int minor = 9; minor <= 13; ++minor) {  // the user site of whichever python3 this is
    const std::filesystem::path site =
        home / ".local/lib" / ("python3." + std::to_string(minor)) / "site-packages";
    std::filesystem::create_directories(site);
    std::ofstream(site / "planted.pth")
        << "import os; open('" << marks.string() << "/ran-as-%d' % os.getuid(), 'w').close()\n";
  }
  std::filesystem::permissions(dir_ / "home", std::filesystem::perms::all);
  const RunAsUser nobody{65534, 65534, "nobody", home.string()};
  // The planted file runs where the user site is on: a cold `python3 -c pass` as root with
  // that HOME proves the file would be executed.
  ASSERT_EQ(std::system(("HOME=" + home.string() + " /usr/bin/python3 -c pass").c_str()), 0);
  ASSERT_TRUE(std::filesystem::exists(marks / "ran-as-0")) << "the planted .pth is not valid";
  std::filesystem::remove(marks / "ran-as-0");

  ASSERT_TRUE(warm_->StartPython(kPython, script));
  ASSERT_TRUE(WaitReady());
  const pid_t server = warm_->python_pid();
  EXPECT_EQ(UidsOf(server), "\t0\t0\t0\t0") << "the worker's own (root)";
  EXPECT_NE(CmdlineOf(server).find(" -I -u "), std::string::npos) << CmdlineOf(server);
  auto r = Request({"python3", "s.py"});
  r.user = nobody;
  auto p = warm_->Launch(r);
  ASSERT_TRUE(p.ok()) << p.status().message();
  running_.insert(p->pid);
  close(p->stdout_fd);
  close(p->stderr_fd);
  EXPECT_EQ(ParentOf(p->pid), server);
  for (int i = 0; i < 3000 && !running_.empty(); ++i) Reap(10);
  ASSERT_EQ(exits_.count(p->pid), 1u);
  EXPECT_EQ(exits_[p->pid], 0);
  std::vector<std::string> ran;
  for (const auto& e : std::filesystem::directory_iterator(marks)) {
    ran.push_back(e.path().filename().string());
  }
  EXPECT_TRUE(ran.empty()) << "the planted .pth ran in the warm Python: " << ran[0];
}

}  // namespace worker_warm_python_test
}  // namespace convoy
