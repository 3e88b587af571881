#include "worker/exec/cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

namespace convoy {
namespace {

constexpr int64_t kCpuPeriodUs = 100000;  // 100 ms: the kernel's default CFS period
constexpr int64_t kMinCpuQuotaUs = 1000;  // the kernel refuses a quota under 1 ms
constexpr auto kKillWait = std::chrono::seconds(1);
constexpr auto kKillPoll = std::chrono::milliseconds(10);
const char* const kDelegateHint =
    "run the worker as root, or under a systemd unit with Delegate=yes";

std::string ErrnoText(int err) { return std::strerror(err); }

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

bool IsDir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Internal("cannot read " + path + ": " + ErrnoText(errno));
  std::string text;
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return Status::Internal("cannot read " + path + ": " + ErrnoText(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

// One write(2) of `text`, as the kernel's cgroup files want (no O_CREAT: a file the kernel
// does not offer is an error).
Status WriteFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) {
    return Status::Internal("cannot write '" + text + "' to " + path + ": " + ErrnoText(errno));
  }
  ssize_t n;
  do {
    n = write(fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  close(fd);
  if (n < 0)
    return Status::Internal("cannot write '" + text + "' to " + path + ": " + ErrnoText(err));
  if (static_cast<size_t>(n) != text.size()) {
    return Status::Internal("short write of '" + text + "' to " + path);
  }
  return Status::Ok();
}

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string JoinWords(const std::string& text) {
  std::string out;
  for (const auto& w : Words(text)) out += (out.empty() ? "" : " ") + w;
  return out;
}

bool Lists(const std::vector<std::string>& words, const std::string& word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

// The processes listed in a cgroup.procs file; empty when it cannot be read.
std::vector<pid_t> ReadPids(const std::string& procs_file) {
  std::vector<pid_t> pids;
  auto text = ReadFile(procs_file);
  if (!text.ok()) return pids;
  for (const auto& w : Words(*text)) {
    char* end = nullptr;
    const long pid = std::strtol(w.c_str(), &end, 10);
    if (end != w.c_str() && *end == '\0' && pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

// The value of `key` in a "key value" per line file (memory.events, memory.oom_control).
int64_t ReadKeyedCounter(const std::string& path, const std::string& key) {
  auto text = ReadFile(path);
  if (!text.ok()) return 0;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string k;
    long long v = 0;
    if (fields >> k >> v && k == key) return v;
  }
  return 0;
}

// The directories directly in `dir`, sorted.
std::vector<std::string> SubDirs(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (IsDir(dir + "/" + n)) names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// `name` relative to the base: parts of [A-Za-z0-9._-], not "." or "..".
Status ValidateName(const std::string& name, bool nested_ok) {
  if (name.empty()) return Status::InvalidArgument("cgroup name is empty");
  std::string part;
  std::istringstream in(name);
  while (std::getline(in, part, '/')) {
    if (part.empty() || part == "." || part == ".." ||
        !std::all_of(part.begin(), part.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
        })) {
      return Status::InvalidArgument("cgroup name '" + name +
                                     "': each '/'-separated part must be letters, digits, '.', "
                                     "'_' or '-' (and not '.' or '..')");
    }
  }
  if (name.back() == '/') return Status::InvalidArgument("cgroup name '" + name + "' ends in '/'");
  if (!nested_ok && name.find('/') != std::string::npos) {
    return Status::InvalidArgument("cgroup name '" + name + "' must be one part, without '/'");
  }
  return Status::Ok();
}

std::string Parent(const std::string& name) {
  const auto slash = name.rfind('/');
  return slash == std::string::npos ? "" : name.substr(0, slash);
}

// /proc/self/cgroup: "ID:controller[,controller...]:path" per hierarchy; v2's is "0::path".
// Returns controller -> path ("" for the v2 line).
std::vector<std::pair<std::string, std::string>> ParseProcSelfCgroup(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto c1 = line.find(':');
    if (c1 == std::string::npos) continue;
    const auto c2 = line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string path = line.substr(c2 + 1);
    if (controllers.empty()) {
      out.emplace_back("", path);
      continue;
    }
    std::istringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) out.emplace_back(c, path);
  }
  return out;
}

std::string FindPath(const std::vector<std::pair<std::string, std::string>>& lines,
                     const std::string& controller, bool* found) {
  for (const auto& [c, path] : lines) {
    if (c == controller) {
      *found = true;
      return path;
    }
  }
  *found = false;
  return "";
}

std::string Under(const std::string& mount, const std::string& cgroup_path) {
  std::string p = cgroup_path;
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (!p.empty() && p.front() != '/') p = "/" + p;
  return mount + p;
}

bool IsPermissionError(int err) { return err == EACCES || err == EPERM || err == EROFS; }

// rmdir of each of `dirs`; one already gone is not an error.
Status RemoveDirs(const std::vector<std::string>& dirs) {
  for (const auto& dir : dirs) {
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT) {
      const int err = errno;
      std::string msg = "cannot remove cgroup " + dir + ": " + ErrnoText(err);
      if (err == EBUSY || err == ENOTEMPTY) msg += " (processes or groups are still in it)";
      return Status::Internal(msg);
    }
  }
  return Status::Ok();
}

// The group `name` under each base, then the parents under the base left empty.
Status RemoveGroup(const std::vector<std::string>& bases, const std::string& name) {
  std::vector<std::string> dirs;
  for (const auto& base : bases) dirs.push_back(base + "/" + name);
  CONVOY_RETURN_IF_ERROR(RemoveDirs(dirs));
  for (const auto& base : bases) {
    for (std::string p = Parent(name); !p.empty(); p = Parent(p)) {
      if (rmdir((base + "/" + p).c_str()) != 0) break;  // in use by another group
    }
  }
  return Status::Ok();
}

class DirCgroup : public Cgroup {
 public:
  DirCgroup(std::string name, std::vector<std::string> bases, int64_t memory_limit,
            std::shared_ptr<Mutex> mu)
      : name_(std::move(name)),
        bases_(std::move(bases)),
        memory_limit_(memory_limit),
        mu_(std::move(mu)) {
    for (const auto& base : bases_) dirs_.push_back(base + "/" + name_);
  }

  const std::string& name() const override { return name_; }

  std::vector<std::string> JoinFiles() const override {
    std::vector<std::string> files;
    for (const auto& dir : dirs_) files.push_back(dir + "/cgroup.procs");
    return files;
  }

  std::vector<pid_t> Pids() const override {
    std::set<pid_t> all;
    for (const auto& dir : dirs_) {
      for (pid_t pid : ReadPids(dir + "/cgroup.procs")) all.insert(pid);
    }
    return {all.begin(), all.end()};
  }

  int64_t MemoryLimit() const override { return memory_limit_; }

  Status Remove() override {
    MutexLock lock(*mu_);
    return RemoveGroup(bases_, name_);
  }

 protected:
  // The memory controller's directory (the first).
  const std::string& memory_dir() const { return dirs_.front(); }

  // SIGKILL to everything listed until nothing is, for up to kKillWait. `kill_file` (v2's
  // cgroup.kill, or "") is tried first: it kills atomically, forks in flight included.
  void KillUntilEmpty(const std::string& kill_file) {
    const auto deadline = std::chrono::steady_clock::now() + kKillWait;
    bool tried_kill_file = kill_file.empty();
    const pid_t self = getpid();
    while (true) {
      const std::vector<pid_t> pids = Pids();
      if (pids.empty()) return;
      bool killed = false;
      if (!tried_kill_file) {
        tried_kill_file = true;
        killed = Exists(kill_file) && WriteFile(kill_file, "1").ok();
      }
      if (!killed) {
        for (pid_t pid : pids) {
          if (pid > 1 && pid != self) kill(pid, SIGKILL);
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        spdlog::warn("cgroup {}: {} process(es) still in it 1 s after SIGKILL", dirs_.front(),
                     pids.size());
        return;
      }
      std::this_thread::sleep_for(kKillPoll);
    }
  }

 private:
  const std::string name_;
  const std::vector<std::string> bases_;
  std::vector<std::string> dirs_;
  const int64_t memory_limit_;
  const std::shared_ptr<Mutex> mu_;
};

class CgroupV1 final : public DirCgroup {
 public:
  using DirCgroup::DirCgroup;
  int64_t OomKills() const override {
    return ReadKeyedCounter(memory_dir() + "/memory.oom_control", "oom_kill");
  }
  void KillAll() override { KillUntilEmpty(""); }
};

class CgroupV2 final : public DirCgroup {
 public:
  using DirCgroup::DirCgroup;
  int64_t OomKills() const override {
    return ReadKeyedCounter(memory_dir() + "/memory.events", "oom_kill");
  }
  void KillAll() override { KillUntilEmpty(memory_dir() + "/cgroup.kill"); }
};

const char* const kV1Controllers[] = {"memory", "cpu", "pids"};
const char* const kV2Enable = "+memory +cpu +pids";

}  // namespace

Cgroups::Cgroups(int version, std::vector<Base> bases, MadeDirHook made_dir)
    : version_(version),
      bases_(std::move(bases)),
      made_dir_(std::move(made_dir)),
      mu_(std::make_shared<Mutex>()) {}

Cgroups::~Cgroups() = default;

StatusOr<std::unique_ptr<Cgroups>> Cgroups::OpenSystem(const std::string& base_name) {
  auto self = ReadFile("/proc/self/cgroup");
  if (!self.ok()) return self.status();
  return Open("/sys/fs/cgroup", *self, base_name);
}

StatusOr<std::unique_ptr<Cgroups>> Cgroups::Open(const std::string& fs_root,
                                                 const std::string& proc_self_cgroup,
                                                 const std::string& base_name,
                                                 MadeDirHook made_dir) {
  CONVOY_RETURN_IF_ERROR(ValidateName(base_name, /*nested_ok=*/false));
  if (Exists(fs_root + "/cgroup.controllers")) {
    return OpenV2(fs_root, proc_self_cgroup, base_name, std::move(made_dir));
  }
  return OpenV1(fs_root, proc_self_cgroup, base_name, std::move(made_dir));
}

StatusOr<std::unique_ptr<Cgroups>> Cgroups::OpenV1(const std::string& fs_root,
                                                   const std::string& proc_self_cgroup,
                                                   const std::string& base_name,
                                                   MadeDirHook made_dir) {
  std::vector<std::string> mounts;
  std::vector<std::string> missing;
  for (const std::string c : kV1Controllers) {
    std::string mount = fs_root + "/" + c;
    if (c == "cpu" && !Exists(mount + "/cgroup.procs")) mount = fs_root + "/cpu,cpuacct";
    if (!Exists(mount + "/cgroup.procs")) missing.push_back(c);
    mounts.push_back(mount);
  }
  if (missing.size() == std::size(kV1Controllers)) {
    return Status::FailedPrecondition(
        "no cgroup hierarchy under " + fs_root + ": neither cgroup v2 (" + fs_root +
        "/cgroup.controllers) nor the cgroup v1 memory, cpu and pids controllers (" + fs_root +
        "/memory, " + fs_root + "/cpu, " + fs_root +
        "/pids) are mounted, so memory and CPU limits cannot be enforced; boot the host with "
        "cgroup v2 (systemd.unified_cgroup_hierarchy=1), or mount those v1 controllers");
  }
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    return Status::FailedPrecondition("cgroup v1 under " + fs_root + " lacks the " + names +
                                      " controller(s) (not mounted there); limits need memory, "
                                      "cpu and pids: mount them, or boot with cgroup v2");
  }
  const auto lines = ParseProcSelfCgroup(proc_self_cgroup);
  std::vector<Base> bases;
  for (size_t i = 0; i < mounts.size(); ++i) {
    const std::string c = kV1Controllers[i];
    bool found = false;
    const std::string path = FindPath(lines, c, &found);
    if (!found) {
      return Status::FailedPrecondition("/proc/self/cgroup has no line for the cgroup v1 " + c +
                                        " controller, so the worker's own " + c +
                                        " cgroup is unknown");
    }
    const std::string own = Under(mounts[i], path);
    if (!IsDir(own)) {
      return Status::FailedPrecondition(
          "the worker's " + c + " cgroup " + path + " (from /proc/self/cgroup) is not at " + own +
          ": is " + fs_root +
          " the host's hierarchy (a container needs its own cgroup namespace)?");
    }
    bases.push_back({c, own + "/" + base_name});
  }
  std::unique_ptr<Cgroups> cgroups(new Cgroups(1, std::move(bases), std::move(made_dir)));
  for (const auto& base : cgroups->bases_) {
    CONVOY_RETURN_IF_ERROR(cgroups->MakeDir(base.dir, /*exist_ok=*/true));
  }
  return cgroups;
}

StatusOr<std::unique_ptr<Cgroups>> Cgroups::OpenV2(const std::string& fs_root,
                                                   const std::string& proc_self_cgroup,
                                                   const std::string& base_name,
                                                   MadeDirHook made_dir) {
  auto root_controllers = ReadFile(fs_root + "/cgroup.controllers");
  if (!root_controllers.ok()) return root_controllers.status();
  for (const std::string c : kV1Controllers) {
    if (!Lists(Words(*root_controllers), c)) {
      return Status::FailedPrecondition("cgroup v2 at " + fs_root + " has no " + c +
                                        " controller (" + fs_root + "/cgroup.controllers: '" +
                                        JoinWords(*root_controllers) +
                                        "'); limits need memory, cpu and pids");
    }
  }
  bool found = false;
  const std::string path = FindPath(ParseProcSelfCgroup(proc_self_cgroup), "", &found);
  if (!found) {
    return Status::FailedPrecondition(
        "/proc/self/cgroup has no cgroup v2 line (0::PATH), so the worker's own cgroup is "
        "unknown");
  }
  const std::string own = Under(fs_root, path);
  auto own_controllers = ReadFile(own + "/cgroup.controllers");
  if (!own_controllers.ok()) {
    return Status::FailedPrecondition(
        "the worker's cgroup " + path +
        " (from /proc/self/cgroup): " + own_controllers.status().message());
  }
  for (const std::string c : kV1Controllers) {
    if (!Lists(Words(*own_controllers), c)) {
      return Status::FailedPrecondition(
          "the " + c + " controller is not delegated to the worker's cgroup " + own +
          " (its cgroup.controllers: '" + JoinWords(*own_controllers) + "'); " + kDelegateHint);
    }
  }
  std::unique_ptr<Cgroups> cgroups(
      new Cgroups(2, {{"", own + "/" + base_name}}, std::move(made_dir)));
  // No internal processes: a cgroup that enables controllers for its children holds no
  // processes itself (the root excepted), so the worker and whatever shares its cgroup move
  // into <own>/daemon.
  const bool is_root = own == fs_root;
  const std::vector<pid_t> own_pids = ReadPids(own + "/cgroup.procs");
  if (!is_root && !own_pids.empty()) {
    const std::string daemon = own + "/daemon";
    CONVOY_RETURN_IF_ERROR(cgroups->MakeDir(daemon, /*exist_ok=*/true));
    for (pid_t pid : own_pids) {
      Status moved = WriteFile(daemon + "/cgroup.procs", std::to_string(pid));
      if (!moved.ok() && kill(pid, 0) == 0) {  // one that has exited meanwhile is no error
        return Status::FailedPrecondition(moved.message() + "; " + kDelegateHint);
      }
    }
  }
  for (const std::string& dir : {own, cgroups->bases_.front().dir}) {
    if (dir != own) CONVOY_RETURN_IF_ERROR(cgroups->MakeDir(dir, /*exist_ok=*/true));
    Status enabled = WriteFile(dir + "/cgroup.subtree_control", kV2Enable);
    if (!enabled.ok()) return Status::FailedPrecondition(enabled.message() + "; " + kDelegateHint);
  }
  return cgroups;
}

Status Cgroups::MakeDir(const std::string& dir, bool exist_ok) const {
  if (mkdir(dir.c_str(), 0711) != 0) {
    const int err = errno;
    if (err == EEXIST) {
      if (exist_ok && IsDir(dir)) return Status::Ok();
      return Status::AlreadyExists("cgroup " + dir + " exists already");
    }
    std::string msg = "cannot create cgroup " + dir + ": " + ErrnoText(err);
    if (IsPermissionError(err)) {
      return Status::FailedPrecondition(msg + "; " + kDelegateHint);
    }
    return Status::Internal(msg);
  }
  // Whatever the worker's umask: a rank's user passes through to its own group's
  // cgroup.procs (a warm Python's child joins as that user); nobody lists the groups.
  if (chmod(dir.c_str(), 0711) != 0) {
    return Status::Internal("cannot chmod cgroup " + dir + ": " + ErrnoText(errno));
  }
  if (made_dir_) made_dir_(dir);
  return Status::Ok();
}

std::vector<std::string> Cgroups::BaseDirs() const {
  std::vector<std::string> dirs;
  for (const auto& base : bases_) dirs.push_back(base.dir);
  return dirs;
}

std::string Cgroups::Describe() const {
  std::string dirs;
  for (const auto& base : bases_) dirs += (dirs.empty() ? "" : ", ") + base.dir;
  return "cgroup v" + std::to_string(version_) + " (memory, cpu, pids) under " + dirs;
}

std::unique_ptr<Cgroup> Cgroups::Attach(const std::string& name, int64_t memory_limit) const {
  std::vector<std::string> bases;
  for (const auto& base : bases_) bases.push_back(base.dir);
  if (version_ == 2) return std::make_unique<CgroupV2>(name, std::move(bases), memory_limit, mu_);
  return std::make_unique<CgroupV1>(name, std::move(bases), memory_limit, mu_);
}

StatusOr<std::unique_ptr<Cgroup>> Cgroups::Create(const std::string& name,
                                                  const CgroupLimits& limits) {
  CONVOY_RETURN_IF_ERROR(ValidateName(name, /*nested_ok=*/true));
  if (limits.memory_bytes < 0) {
    return Status::InvalidArgument("memory_bytes must be 0 (no limit) or more, not " +
                                   std::to_string(limits.memory_bytes));
  }
  if (!(limits.cpus >= 0) || !std::isfinite(limits.cpus)) {
    return Status::InvalidArgument("cpus must be 0 (no limit) or more, not " +
                                   std::to_string(limits.cpus));
  }
  if (limits.pids < 0) {
    return Status::InvalidArgument("pids must be 0 (no limit) or more, not " +
                                   std::to_string(limits.pids));
  }
  MutexLock lock(*mu_);
  for (const auto& base : bases_) {
    if (Exists(base.dir + "/" + name)) {
      return Status::AlreadyExists("cgroup " + base.dir + "/" + name + " exists already");
    }
  }
  Status made = Status::Ok();
  for (const auto& base : bases_) {
    std::vector<std::string> parents;
    for (std::string p = Parent(name); !p.empty(); p = Parent(p)) parents.push_back(p);
    std::reverse(parents.begin(), parents.end());
    for (const auto& p : parents) {
      const std::string dir = base.dir + "/" + p;
      made = MakeDir(dir, /*exist_ok=*/true);
      if (made.ok() && version_ == 2) made = WriteFile(dir + "/cgroup.subtree_control", kV2Enable);
      if (!made.ok()) break;
    }
    if (made.ok()) made = MakeDir(base.dir + "/" + name, /*exist_ok=*/false);
    if (!made.ok()) break;
  }
  if (made.ok()) made = WriteLimits(name, limits);
  if (!made.ok()) {
    // Nothing of it existed before (checked above, under the lock): all of it goes.
    Status removed = RemoveGroup(BaseDirs(), name);
    if (!removed.ok()) spdlog::warn("{}", removed.message());
    return made;
  }
  return Attach(name, limits.memory_bytes);
}

Status Cgroups::WriteLimits(const std::string& name, const CgroupLimits& limits) const {
  const int64_t quota =
      limits.cpus > 0 ? std::max<int64_t>(kMinCpuQuotaUs, std::llround(limits.cpus * kCpuPeriodUs))
                      : 0;
  if (version_ == 2) {
    const std::string dir = bases_.front().dir + "/" + name;
    if (limits.memory_bytes > 0) {
      CONVOY_RETURN_IF_ERROR(WriteFile(dir + "/memory.max", std::to_string(limits.memory_bytes)));
      if (Exists(dir + "/memory.swap.max")) {
        CONVOY_RETURN_IF_ERROR(WriteFile(dir + "/memory.swap.max", "0"));
      }
      if (Exists(dir + "/memory.oom.group")) {
        CONVOY_RETURN_IF_ERROR(WriteFile(dir + "/memory.oom.group", "1"));
      }
    }
    if (quota > 0) {
      CONVOY_RETURN_IF_ERROR(
          WriteFile(dir + "/cpu.max", std::to_string(quota) + " " + std::to_string(kCpuPeriodUs)));
    }
    if (limits.pids > 0) {
      CONVOY_RETURN_IF_ERROR(WriteFile(dir + "/pids.max", std::to_string(limits.pids)));
    }
    return Status::Ok();
  }
  for (const auto& base : bases_) {
    const std::string dir = base.dir + "/" + name;
    if (base.controller == "memory" && limits.memory_bytes > 0) {
      const std::string bytes = std::to_string(limits.memory_bytes);
      // memsw (memory + swap) may never be below the memory limit: it goes second.
      CONVOY_RETURN_IF_ERROR(WriteFile(dir + "/memory.limit_in_bytes", bytes));
      if (Exists(dir + "/memory.memsw.limit_in_bytes")) {
        CONVOY_RETURN_IF_ERROR(WriteFile(dir + "/memory.memsw.limit_in_bytes", bytes));
      }
    } else if (base.controller == "cpu" && quota > 0) {
      CONVOY_RETURN_IF_ERROR(WriteFile(dir + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs)));
      CONVOY_RETURN_IF_ERROR(WriteFile(dir + "/cpu.cfs_quota_us", std::to_string(quota)));
    } else if (base.controller == "pids" && limits.pids > 0) {
      CONVOY_RETURN_IF_ERROR(WriteFile(dir + "/pids.max", std::to_string(limits.pids)));
    }
  }
  return Status::Ok();
}

std::vector<std::string> Cgroups::Leftovers() const {
  std::set<std::string> names;
  for (const auto& base : bases_) {
    for (const auto& n : SubDirs(base.dir)) names.insert(n);
  }
  return {names.begin(), names.end()};
}

Status Cgroups::RemoveLeftover(const std::string& name) {
  CONVOY_RETURN_IF_ERROR(ValidateName(name, /*nested_ok=*/true));
  MutexLock lock(*mu_);
  // Every group at or under `name`, in any controller, parents before children.
  std::set<std::string> groups;
  std::vector<std::string> todo = {name};
  while (!todo.empty()) {
    const std::string g = todo.back();
    todo.pop_back();
    for (const auto& base : bases_) {
      if (!IsDir(base.dir + "/" + g)) continue;
      groups.insert(g);
      for (const auto& child : SubDirs(base.dir + "/" + g)) todo.push_back(g + "/" + child);
    }
  }
  std::vector<std::string> deepest_first(groups.begin(), groups.end());
  std::stable_sort(
      deepest_first.begin(), deepest_first.end(), [](const std::string& a, const std::string& b) {
        return std::count(a.begin(), a.end(), '/') > std::count(b.begin(), b.end(), '/');
      });
  for (const auto& g : deepest_first) Attach(g, 0)->KillAll();
  for (const auto& g : deepest_first) {
    std::vector<std::string> dirs;
    for (const auto& base : bases_) dirs.push_back(base.dir + "/" + g);
    CONVOY_RETURN_IF_ERROR(RemoveDirs(dirs));
  }
  return Status::Ok();
}

Status Cgroups::RemoveBase() {
  MutexLock lock(*mu_);
  std::vector<std::string> dirs;
  for (const auto& base : bases_) dirs.push_back(base.dir);
  return RemoveDirs(dirs);
}

}  // namespace convoy
