// Enforced limits for the ranks (issue 27): each group of ranks (one rank of one attempt, say)
// runs in a cgroup of its own under the worker's subtree, with memory, CPU and pids limits.
// cgroup v2 is the target; the v1 memory, cpu and pids controllers (hosts that boot the legacy
// or hybrid layout) work behind the same interface. Only files under the hierarchy are touched;
// a test points `fs_root` at a fake tree.
//
// Threads: Cgroups and Cgroup may be used from any thread. Create, Remove, RemoveLeftover and
// RemoveBase hold one mutex of the worker's subtree (shared by the groups it made), so a group
// being made never loses a parent that another group's Remove prunes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace convoy {

// A group's limits; 0 is no limit (the kernel's default for a new group is left alone).
struct CgroupLimits {
  int64_t memory_bytes = 0;  // v2 memory.max (and memory.swap.max 0); v1 memory.limit_in_bytes
  double cpus = 0;           // cores: a CFS quota of cpus × 100 ms per 100 ms (at least 1 ms)
  int64_t pids = 0;          // processes and threads: pids.max
};

// One group under the worker's subtree, made by Cgroups::Create. Dropping the object leaves
// the group and its processes as they are (Cgroups::Leftovers finds them at the next start).
class Cgroup {
 public:
  virtual ~Cgroup() = default;

  // The name given to Cgroups::Create (relative to the worker's base).
  virtual const std::string& name() const = 0;

  // The files that a process writes "0\n" into to move itself into this group: v2 the
  // group's cgroup.procs; v1 the memory, cpu and pids controllers' cgroup.procs, in that order.
  // A rank's child writes them after fork, as root and before dropping privileges and exec,
  // with open/write/close only (async-signal-safe); a failed write must end the child.
  virtual std::vector<std::string> JoinFiles() const = 0;

  // The processes in the group now, sorted, without duplicates (v1: over its controllers).
  // Zombies are not listed. Empty when the group is gone.
  virtual std::vector<pid_t> Pids() const = 0;

  // How many processes the kernel's OOM killer killed in this group because of its memory
  // limit: v2 memory.events `oom_kill`, v1 memory.oom_control `oom_kill` (kernel 4.13 and
  // later). 0 when the file or the line is missing.
  virtual int64_t OomKills() const = 0;

  // The memory limit as set by Create, in bytes (0: none), for messages such as "killed by
  // the kernel OOM killer at its 4 GiB memory_per_proc".
  virtual int64_t MemoryLimit() const = 0;

  // Kills every process in the group and waits (up to about 1 s, polling every 10 ms) for
  // them to leave: v2 writes 1 into cgroup.kill when the kernel has it (5.14+), and otherwise
  // sends SIGKILL to each listed process; v1 sends SIGKILL to each process listed in each
  // controller's cgroup.procs, again until none is left (a process forked meanwhile is caught
  // by the next round). Returns without error when processes remain (e.g. in uninterruptible
  // sleep); Remove then says so.
  virtual void KillAll() = 0;

  // Removes the group (each controller's directory for v1), then its parents under the base
  // that are left empty. A group already gone is not an error. Fails, naming the directory
  // and errno's text (EBUSY: processes are still in it), when a directory cannot be removed.
  virtual Status Remove() = 0;
};

class Cgroups {
 public:
  // For unit tests on a fake tree: called after each directory that Cgroups makes, so that the
  // test can put in it the files the kernel would. Empty on a real hierarchy.
  using MadeDirHook = std::function<void(const std::string& dir)>;

  // Finds the hierarchy under `fs_root`: cgroup v2 when fs_root/cgroup.controllers exists
  // (it must list memory, cpu and pids), else v1 when fs_root/memory, fs_root/cpu (or
  // cpu,cpuacct) and fs_root/pids are mounted controllers. `proc_self_cgroup` is the text of
  // /proc/self/cgroup, which gives the worker's own cgroup (per controller for v1). The base
  // is `<own cgroup>/<base_name>` (e.g. "convoy-worker-w1"), made when missing (an existing one
  // holds an earlier worker's Leftovers). v2 follows the "no internal processes" rule: when
  // the worker's own cgroup holds processes, they (the worker among them) move into
  // <own>/daemon; then +memory +cpu +pids go into <own>/cgroup.subtree_control and base's.
  // Returns an error that says what is missing and how to fix it when there is no usable
  // hierarchy, a controller is missing or not delegated, or the worker may not write there.
  // The worker prints it at start and in --check-config, and refuses specs that set limits.
  static StatusOr<std::unique_ptr<Cgroups>> Open(const std::string& fs_root,
                                                 const std::string& proc_self_cgroup,
                                                 const std::string& base_name,
                                                 MadeDirHook made_dir = nullptr);
  // Open with /sys/fs/cgroup and this process's /proc/self/cgroup.
  static StatusOr<std::unique_ptr<Cgroups>> OpenSystem(const std::string& base_name);

  ~Cgroups();
  Cgroups(const Cgroups&) = delete;
  Cgroups& operator=(const Cgroups&) = delete;

  int version() const { return version_; }  // 1 or 2

  // The worker's base: one directory for v2; memory's, cpu's and pids' for v1, in that order.
  std::vector<std::string> BaseDirs() const;

  // One line for the log and --check-config, e.g. "cgroup v2 (memory, cpu, pids) under
  // /sys/fs/cgroup/system.slice/convoy-worker.service/convoy-worker-w1"; v1 names each
  // controller's base.
  std::string Describe() const;

  // Makes the group base/`name` with `limits`. `name` is one or more '/'-separated parts of
  // letters, digits, '.', '_' and '-' (not "." or ".."); missing parents are made (v2: with
  // the controllers enabled in their subtree_control). Limits written, each only when set:
  // v2 memory.max, memory.swap.max 0 (when the file exists), memory.oom.group 1 (when it
  // exists: an OOM kill takes the whole group), cpu.max "QUOTA 100000", pids.max; v1
  // memory.limit_in_bytes then memory.memsw.limit_in_bytes (when it exists; never below the
  // memory limit), cpu.cfs_period_us 100000 then cpu.cfs_quota_us, pids.max. An existing
  // group of that name (AlreadyExists), a bad name or negative limit (InvalidArgument) and
  // a failed write are errors that name the path; on error nothing of the group is left.
  StatusOr<std::unique_ptr<Cgroup>> Create(const std::string& name, const CgroupLimits& limits);

  // The groups directly under the base (v1: under any controller's base), sorted: those that
  // an earlier worker process left (killed with -9). The worker removes them at start.
  std::vector<std::string> Leftovers() const;

  // Kills the processes of base/`name` and of every group under it, then removes them,
  // deepest first. Errors name the directory that could not be removed.
  Status RemoveLeftover(const std::string& name);

  // Removes the base itself (each controller's for v1), at a clean shutdown; fails with the
  // reason while groups are in it. The v2 <own>/daemon group stays (the worker is in it).
  Status RemoveBase();

 private:
  struct Base {
    std::string controller;  // "memory", "cpu", "pids" for v1; "" for v2
    std::string dir;         // <mount>/<own cgroup>/<base_name>
  };
  Cgroups(int version, std::vector<Base> bases, MadeDirHook made_dir);

  static StatusOr<std::unique_ptr<Cgroups>> OpenV1(const std::string& fs_root,
                                                   const std::string& proc_self_cgroup,
                                                   const std::string& base_name,
                                                   MadeDirHook made_dir);
  static StatusOr<std::unique_ptr<Cgroups>> OpenV2(const std::string& fs_root,
                                                   const std::string& proc_self_cgroup,
                                                   const std::string& base_name,
                                                   MadeDirHook made_dir);
  // A group object for base/`name` as it is, made or not.
  std::unique_ptr<Cgroup> Attach(const std::string& name, int64_t memory_limit) const;
  Status WriteLimits(const std::string& name, const CgroupLimits& limits) const;
  Status MakeDir(const std::string& dir, bool exist_ok) const;

  const int version_;
  const std::vector<Base> bases_;
  const MadeDirHook made_dir_;
  // Serialises making and removing directories under the base; shared with the groups.
  const std::shared_ptr<Mutex> mu_;
};

}  // namespace convoy
