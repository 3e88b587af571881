// The cgroup module (worker/exec/cgroups.h) on fake hierarchies in a temp dir: detection of v2, v1
// and none, the files and values that Create writes, the v2 move into daemon/, OOM counters,
// leftovers and errors. Directories that the module makes are filled, through its hook, with
// the files the kernel would put there. tests/integration/worker_cgroups_v1_test.cc runs the
// real v1 controllers.
#include "worker/exec/cgroups.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/temp_dir.h"

namespace convoy {
namespace worker_cgroups_test {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kGiB = int64_t{1} << 30;

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A pure v2 host (Debian 12): the worker runs in a systemd service's cgroup.
class FakeV2 {
 public:
  static constexpr const char* kOwn = "/system.slice/convoy-worker.service";

  FakeV2() {
    Write(root_ / "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
    Write(root_ / "cgroup.procs", "1\n");
    Write(own() + "/cgroup.controllers", "cpuset cpu io memory pids\n");
    Write(own() + "/cgroup.procs", "");
    Write(own() + "/cgroup.subtree_control", "");
  }

  std::string root() const { return root_.str(); }
  std::string own() const { return root_ / (std::string(kOwn).substr(1)); }
  std::string base() const { return own() + "/convoy-worker-w1"; }
  std::string proc_self_cgroup() const { return std::string("0::") + kOwn + "\n"; }

  // What the kernel puts in a new v2 cgroup (with swap accounting and cgroup.kill).
  Cgroups::MadeDirHook hook() const {
    return [this](const std::string& dir) {
      Write(dir + "/cgroup.procs", "");
      Write(dir + "/cgroup.controllers", "cpu memory pids\n");
      Write(dir + "/cgroup.subtree_control", "");
      Write(dir + "/cgroup.kill", "");
      Write(dir + "/memory.max", "max\n");
      if (with_swap) Write(dir + "/memory.swap.max", "max\n");
      Write(dir + "/memory.oom.group", "0\n");
      Write(dir + "/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
      if (with_cpu_max) Write(dir + "/cpu.max", "max 100000\n");
      Write(dir + "/pids.max", "max\n");
    };
  }

  StatusOr<std::unique_ptr<Cgroups>> Open() const {
    return Cgroups::Open(root(), proc_self_cgroup(), "convoy-worker-w1", hook());
  }

  bool with_swap = true;
  bool with_cpu_max = true;

 private:
  testing::TempDir root_{"cgroups-v2"};
};

// A v1 host laid out as this machine's: each controller its own mount, the worker in a
// nested memory cgroup and at the root of the others.
class FakeV1 {
 public:
  FakeV1() {
    for (const char* c : {"memory", "cpu", "cpuacct", "pids", "devices"}) {
      Write(root_ / (std::string(c) + "/cgroup.procs"), "1\n");
    }
    Write(root_ / "memory/process_api/abc/cgroup.procs", "4242\n");
  }

  std::string root() const { return root_.str(); }
  std::string proc_self_cgroup() const {
    return "9:name=systemd:/\n8:pids:/\n7:devices:/\n4:memory:/process_api/abc\n2:cpuacct:/\n"
           "1:cpu:/\n0::/\n";
  }
  std::string memory_base() const { return root_ / "memory/process_api/abc/convoy-worker-w1"; }
  std::string cpu_base() const { return root_ / "cpu/convoy-worker-w1"; }
  std::string pids_base() const { return root_ / "pids/convoy-worker-w1"; }

  Cgroups::MadeDirHook hook() const {
    const std::string root = root_.str();
    return [this, root](const std::string& dir) {
      Write(dir + "/cgroup.procs", "");
      if (dir.rfind(root + "/memory/", 0) == 0) {
        Write(dir + "/memory.limit_in_bytes", "9223372036854771712\n");
        if (with_memsw) Write(dir + "/memory.memsw.limit_in_bytes", "9223372036854771712\n");
        Write(dir + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
      } else if (dir.rfind(root + "/cpu", 0) == 0) {
        Write(dir + "/cpu.cfs_period_us", "100000\n");
        Write(dir + "/cpu.cfs_quota_us", "-1\n");
      } else if (dir.rfind(root + "/pids/", 0) == 0) {
        Write(dir + "/pids.max", "max\n");
      }
    };
  }

  StatusOr<std::unique_ptr<Cgroups>> Open() const {
    return Cgroups::Open(root(), proc_self_cgroup(), "convoy-worker-w1", hook());
  }

  bool with_memsw = true;

 private:
  testing::TempDir root_{"cgroups-v1"};
};

const CgroupLimits kLimits{4 * kGiB, 1.5, 256};

TEST(CgroupsDetectTest, V2WhenTheRootListsItsControllers) {
  FakeV2 tree;
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  EXPECT_EQ((*cgroups)->version(), 2);
  EXPECT_EQ((*cgroups)->Describe(), "cgroup v2 (memory, cpu, pids) under " + tree.base());
  EXPECT_TRUE(fs::is_directory(tree.base()));
  // Nobody else was in the worker's cgroup: nothing to move.
  EXPECT_FALSE(fs::exists(tree.own() + "/daemon"));
}

TEST(CgroupsDetectTest, V1WhenMemoryCpuAndPidsAreMounted) {
  FakeV1 tree;
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  EXPECT_EQ((*cgroups)->version(), 1);
  EXPECT_EQ((*cgroups)->Describe(), "cgroup v1 (memory, cpu, pids) under " + tree.memory_base() +
                                        ", " + tree.cpu_base() + ", " + tree.pids_base());
  for (const auto& base : {tree.memory_base(), tree.cpu_base(), tree.pids_base()}) {
    EXPECT_TRUE(fs::is_directory(base)) << base;
  }
}

TEST(CgroupsDetectTest, V1WithCpuAndCpuacctMountedTogether) {
  testing::TempDir root("cgroups-v1-cpuacct");
  for (const char* c : {"memory", "cpu,cpuacct", "pids"}) {
    Write(root / (std::string(c) + "/cgroup.procs"), "");
  }
  auto cgroups =
      Cgroups::Open(root.str(), "5:pids:/\n3:cpu,cpuacct:/\n2:memory:/\n", "convoy-worker-w1");
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  EXPECT_THAT((*cgroups)->Describe(), HasSubstr(root / "cpu,cpuacct/convoy-worker-w1"));
}

TEST(CgroupsDetectTest, NoHierarchySaysWhatIsMissing) {
  testing::TempDir root("cgroups-none");
  auto cgroups = Cgroups::Open(root.str(), "0::/\n", "convoy-worker-w1");
  ASSERT_FALSE(cgroups.ok());
  EXPECT_EQ(cgroups.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(cgroups.status().message(), HasSubstr("no cgroup hierarchy under " + root.str()));
  EXPECT_THAT(cgroups.status().message(), HasSubstr("cannot be enforced"));
  EXPECT_THAT(cgroups.status().message(), HasSubstr("cgroup v2"));
}

TEST(CgroupsDetectTest, V1WithoutPidsNamesIt) {
  testing::TempDir root("cgroups-v1-nopids");
  Write(root / "memory/cgroup.procs", "");
  Write(root / "cpu/cgroup.procs", "");
  auto cgroups = Cgroups::Open(root.str(), "2:memory:/\n1:cpu:/\n", "convoy-worker-w1");
  ASSERT_FALSE(cgroups.ok());
  EXPECT_THAT(cgroups.status().message(), HasSubstr("lacks the pids controller"));
}

TEST(CgroupsDetectTest, V1OwnCgroupMustBeInTheMount) {
  FakeV1 tree;
  auto cgroups = Cgroups::Open(tree.root(), "8:pids:/\n4:memory:/elsewhere\n1:cpu:/\n",
                               "convoy-worker-w1", tree.hook());
  ASSERT_FALSE(cgroups.ok());
  EXPECT_THAT(cgroups.status().message(),
              HasSubstr("memory cgroup /elsewhere (from /proc/self/cgroup) is not at " +
                        tree.root() + "/memory/elsewhere"));
  auto no_line = Cgroups::Open(tree.root(), "4:memory:/\n1:cpu:/\n", "w", tree.hook());
  ASSERT_FALSE(no_line.ok());
  EXPECT_THAT(no_line.status().message(), HasSubstr("no line for the cgroup v1 pids controller"));
}

TEST(CgroupsDetectTest, V2ControllerNotDelegatedNamesTheFix) {
  FakeV2 tree;
  Write(tree.own() + "/cgroup.controllers", "cpu pids\n");
  auto cgroups = tree.Open();
  ASSERT_FALSE(cgroups.ok());
  EXPECT_THAT(cgroups.status().message(),
              HasSubstr("the memory controller is not delegated to the worker's cgroup " +
                        tree.own() + " (its cgroup.controllers: 'cpu pids')"));
  EXPECT_THAT(cgroups.status().message(), HasSubstr("Delegate=yes"));

  Write(tree.root() + "/cgroup.controllers", "cpu memory io\n");
  cgroups = tree.Open();
  ASSERT_FALSE(cgroups.ok());
  EXPECT_THAT(cgroups.status().message(),
              HasSubstr("cgroup v2 at " + tree.root() + " has no pids controller"));
}

TEST(CgroupsDetectTest, BaseNameIsOnePart) {
  FakeV2 tree;
  for (const char* bad : {"", "a/b", "..", "a b"}) {
    auto cgroups = Cgroups::Open(tree.root(), tree.proc_self_cgroup(), bad, tree.hook());
    EXPECT_FALSE(cgroups.ok()) << bad;
    EXPECT_EQ(cgroups.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(CgroupsDetectTest, NotWritableSaysRunAsRootOrDelegate) {
  // As an unprivileged user (nobody), in a child: the fake tree is root's, 0755.
  FakeV1 tree;
  fs::permissions(tree.root(), fs::perms(0755));
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become another user";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    auto cgroups = Cgroups::Open(tree.root(), tree.proc_self_cgroup(), "convoy-worker-w1");
    if (cgroups.ok()) _exit(3);
    const std::string& m = cgroups.status().message();
    const bool named = m.find("cannot create cgroup " + tree.memory_base() +
                              ": Permission denied") != std::string::npos &&
                       m.find(
                           "run the worker as root, or under a systemd unit with "
                           "Delegate=yes") != std::string::npos;
    _exit(named ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: cannot become nobody, 3: opened, 4: message";
}

TEST(CgroupsV2Test, WorkerMovesIntoDaemonAndControllersAreEnabled) {
  FakeV2 tree;
  Write(tree.own() + "/cgroup.procs", "4242\n");
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  EXPECT_EQ(Read(tree.own() + "/daemon/cgroup.procs"), "4242");
  EXPECT_EQ(Read(tree.own() + "/cgroup.subtree_control"), "+memory +cpu +pids");
  EXPECT_EQ(Read(tree.base() + "/cgroup.subtree_control"), "+memory +cpu +pids");
  // The daemon group is the worker's, not a job's.
  EXPECT_THAT((*cgroups)->Leftovers(), IsEmpty());
}

TEST(CgroupsV2Test, CreateWritesTheLimits) {
  FakeV2 tree;
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  auto group = (*cgroups)->Create("job-7/attempt-1/rank-0", kLimits);
  ASSERT_TRUE(group.ok()) << group.status().message();
  const std::string dir = tree.base() + "/job-7/attempt-1/rank-0";
  EXPECT_EQ(Read(dir + "/memory.max"), "4294967296");
  EXPECT_EQ(Read(dir + "/memory.swap.max"), "0");
  EXPECT_EQ(Read(dir + "/memory.oom.group"), "1");
  EXPECT_EQ(Read(dir + "/cpu.max"), "150000 100000");
  EXPECT_EQ(Read(dir + "/pids.max"), "256");
  // The parents pass the controllers down.
  EXPECT_EQ(Read(tree.base() + "/job-7/cgroup.subtree_control"), "+memory +cpu +pids");
  EXPECT_EQ(Read(tree.base() + "/job-7/attempt-1/cgroup.subtree_control"), "+memory +cpu +pids");
  EXPECT_EQ((*group)->name(), "job-7/attempt-1/rank-0");
  EXPECT_THAT((*group)->JoinFiles(), ElementsAre(dir + "/cgroup.procs"));
  EXPECT_EQ((*group)->MemoryLimit(), 4 * kGiB);
  EXPECT_THAT((*group)->Pids(), IsEmpty());
  (*group)->KillAll();  // nothing in it: returns at once
}

TEST(CgroupsV2Test, UnsetLimitsAreLeftAlone) {
  FakeV2 tree;
  tree.with_swap = false;
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  auto group = (*cgroups)->Create("free", CgroupLimits{});
  ASSERT_TRUE(group.ok()) << group.status().message();
  EXPECT_EQ(Read(tree.base() + "/free/memory.max"), "max\n");
  EXPECT_EQ(Read(tree.base() + "/free/cpu.max"), "max 100000\n");
  EXPECT_EQ(Read(tree.base() + "/free/pids.max"), "max\n");
  EXPECT_EQ((*group)->MemoryLimit(), 0);
  // Without swap accounting, memory.max alone; a tiny CPU share gets the kernel's 1 ms floor.
  auto small = (*cgroups)->Create("small", CgroupLimits{kGiB, 0.001, 0});
  ASSERT_TRUE(small.ok()) << small.status().message();
  EXPECT_EQ(Read(tree.base() + "/small/memory.max"), "1073741824");
  EXPECT_FALSE(fs::exists(tree.base() + "/small/memory.swap.max"));
  EXPECT_EQ(Read(tree.base() + "/small/cpu.max"), "1000 100000");
}

TEST(CgroupsV2Test, OomKillsFromMemoryEvents) {
  FakeV2 tree;
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  auto group = (*cgroups)->Create("rank-3", kLimits);
  ASSERT_TRUE(group.ok()) << group.status().message();
  EXPECT_EQ((*group)->OomKills(), 0);
  Write(tree.base() + "/rank-3/memory.events",
        "low 0\nhigh 0\nmax 17\noom 2\noom_kill 2\noom_group_kill 1\n");
  EXPECT_EQ((*group)->OomKills(), 2);
  fs::remove(tree.base() + "/rank-3/memory.events");
  EXPECT_EQ((*group)->OomKills(), 0);
}

TEST(CgroupsV2Test, AFailedWriteNamesTheFile) {
  FakeV2 tree;
  tree.with_cpu_max = false;  // as if the cpu controller were not enabled here
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  auto group = (*cgroups)->Create("rank-0", kLimits);
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().message(), "cannot write '150000 100000' to " + tree.base() +
                                          "/rank-0/cpu.max: No such file or directory");
}

TEST(CgroupsV1Test, CreateWritesTheLimitsInEachController) {
  FakeV1 tree;
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  auto group = (*cgroups)->Create("job-7/rank-0", kLimits);
  ASSERT_TRUE(group.ok()) << group.status().message();
  const std::string memory = tree.memory_base() + "/job-7/rank-0";
  const std::string cpu = tree.cpu_base() + "/job-7/rank-0";
  const std::string pids = tree.pids_base() + "/job-7/rank-0";
  EXPECT_EQ(Read(memory + "/memory.limit_in_bytes"), "4294967296");
  EXPECT_EQ(Read(memory + "/memory.memsw.limit_in_bytes"), "4294967296");
  EXPECT_EQ(Read(cpu + "/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(Read(cpu + "/cpu.cfs_quota_us"), "150000");
  EXPECT_EQ(Read(pids + "/pids.max"), "256");
  EXPECT_THAT((*group)->JoinFiles(),
              ElementsAre(memory + "/cgroup.procs", cpu + "/cgroup.procs", pids + "/cgroup.procs"));
  // v1 has no subtree_control: none is written.
  EXPECT_FALSE(fs::exists(tree.memory_base() + "/job-7/cgroup.subtree_control"));
}

TEST(CgroupsV1Test, WithoutSwapAccountingMemoryAlone) {
  FakeV1 tree;
  tree.with_memsw = false;
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  auto group = (*cgroups)->Create("rank-0", CgroupLimits{kGiB, 0, 0});
  ASSERT_TRUE(group.ok()) << group.status().message();
  EXPECT_EQ(Read(tree.memory_base() + "/rank-0/memory.limit_in_bytes"), "1073741824");
  EXPECT_FALSE(fs::exists(tree.memory_base() + "/rank-0/memory.memsw.limit_in_bytes"));
  EXPECT_EQ(Read(tree.cpu_base() + "/rank-0/cpu.cfs_quota_us"), "-1\n");
  EXPECT_EQ(Read(tree.pids_base() + "/rank-0/pids.max"), "max\n");
}

TEST(CgroupsV1Test, OomKillsFromOomControlAndPidsOverControllers) {
  FakeV1 tree;
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  auto group = (*cgroups)->Create("rank-1", kLimits);
  ASSERT_TRUE(group.ok()) << group.status().message();
  EXPECT_EQ((*group)->OomKills(), 0);
  Write(tree.memory_base() + "/rank-1/memory.oom_control",
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
  EXPECT_EQ((*group)->OomKills(), 1);
  // A kernel before 4.13 has no oom_kill line.
  Write(tree.memory_base() + "/rank-1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n");
  EXPECT_EQ((*group)->OomKills(), 0);

  Write(tree.memory_base() + "/rank-1/cgroup.procs", "12\n7\n");
  Write(tree.pids_base() + "/rank-1/cgroup.procs", "7\n30\n");
  EXPECT_THAT((*group)->Pids(), ElementsAre(7, 12, 30));
}

TEST(CgroupsCreateTest, AnExistingNameIsRefused) {
  FakeV1 tree;
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  ASSERT_TRUE((*cgroups)->Create("rank-0", kLimits).ok());
  auto again = (*cgroups)->Create("rank-0", kLimits);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(again.status().message(), "cgroup " + tree.memory_base() + "/rank-0 exists already");
  // One controller's directory is enough to refuse.
  fs::create_directories(tree.pids_base() + "/rank-9");
  auto partial = (*cgroups)->Create("rank-9", kLimits);
  ASSERT_FALSE(partial.ok());
  EXPECT_EQ(partial.status().message(), "cgroup " + tree.pids_base() + "/rank-9 exists already");
  EXPECT_FALSE(fs::exists(tree.memory_base() + "/rank-9"));
}

TEST(CgroupsCreateTest, BadNamesAndLimitsAreRefused) {
  FakeV2 tree;
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  for (const char* bad : {"", "/abs", "a/", "a//b", "../up", "a/./b", "rank 0", "a\nb"}) {
    auto group = (*cgroups)->Create(bad, kLimits);
    ASSERT_FALSE(group.ok()) << bad;
    EXPECT_EQ(group.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto memory = (*cgroups)->Create("m", CgroupLimits{-1, 0, 0});
  ASSERT_FALSE(memory.ok());
  EXPECT_THAT(memory.status().message(), HasSubstr("memory_bytes"));
  auto cpus = (*cgroups)->Create("c", CgroupLimits{0, -0.5, 0});
  ASSERT_FALSE(cpus.ok());
  EXPECT_THAT(cpus.status().message(), HasSubstr("cpus"));
  auto nan = (*cgroups)->Create("c", CgroupLimits{0, std::nan(""), 0});
  ASSERT_FALSE(nan.ok());
  EXPECT_THAT(nan.status().message(), HasSubstr("cpus"));
  auto pids = (*cgroups)->Create("p", CgroupLimits{0, 0, -3});
  ASSERT_FALSE(pids.ok());
  EXPECT_THAT(pids.status().message(), HasSubstr("pids"));
  EXPECT_THAT((*cgroups)->Leftovers(), IsEmpty());
}

TEST(CgroupsLeftoversTest, GroupsUnderTheBaseAreListedAfterAReopen) {
  FakeV1 tree;
  {
    auto cgroups = tree.Open();
    ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
    ASSERT_TRUE((*cgroups)->Create("job-2/rank-0", kLimits).ok());
    ASSERT_TRUE((*cgroups)->Create("job-1", kLimits).ok());
    EXPECT_THAT((*cgroups)->Leftovers(), ElementsAre("job-1", "job-2"));
  }
  // A group left in one controller only (a worker killed while making it) is listed too.
  fs::create_directories(tree.cpu_base() + "/job-3");
  auto reopened = tree.Open();
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  EXPECT_THAT((*reopened)->Leftovers(), ElementsAre("job-1", "job-2", "job-3"));
  EXPECT_FALSE((*reopened)->RemoveLeftover("../job-1").ok());
}

TEST(CgroupsRemoveTest, ErrorsNameTheDirectory) {
  // On the fake tree a group's directory holds real files, so rmdir fails as a busy group's
  // would: the message names it and errno's text.
  FakeV2 tree;
  auto cgroups = tree.Open();
  ASSERT_TRUE(cgroups.ok()) << cgroups.status().message();
  auto group = (*cgroups)->Create("rank-0", kLimits);
  ASSERT_TRUE(group.ok()) << group.status().message();
  Status removed = (*group)->Remove();
  ASSERT_FALSE(removed.ok());
  EXPECT_EQ(removed.message(), "cannot remove cgroup " + tree.base() +
                                   "/rank-0: Directory not empty (processes or groups are "
                                   "still in it)");
  Status base = (*cgroups)->RemoveBase();
  ASSERT_FALSE(base.ok());
  EXPECT_THAT(base.message(), HasSubstr("cannot remove cgroup " + tree.base() + ": "));
  Status leftover = (*cgroups)->RemoveLeftover("rank-0");
  ASSERT_FALSE(leftover.ok());
  EXPECT_THAT(leftover.message(), HasSubstr(tree.base() + "/rank-0"));
  // A group already gone is not an error.
  fs::remove_all(tree.base() + "/rank-0");
  EXPECT_TRUE((*group)->Remove().ok());
}

}  // namespace worker_cgroups_test
}  // namespace convoy
