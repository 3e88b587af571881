// What this machine offers, as the worker registers it: cores, memory, GPUs. Plain
// functions of their inputs (the roots of /proc, /sys/fs/cgroup, /proc/driver/nvidia and
// /dev are parameters, so that tests use fake trees); any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/util.h"  // HumanBytes
#include "worker/host/nvml.h"

namespace convoy {

// CPU cores this process may run on: sched_getaffinity's count (a cpuset or taskset limits
// it), else the online cores; at least 1.
int UsableCores();

// GPU indices visible to ranks. CUDA_VISIBLE_DEVICES when set (its entries up to the first
// invalid one, as CUDA reads it; a UUID (or a prefix of one) is the index of the device in
// `known` that has it, else counts by position; "" or "-1": none), else the /dev/nvidia<N>
// device files under `dev_dir`.
std::vector<int> VisibleGpus(const std::optional<std::string>& cuda_visible_devices,
                             const std::string& dev_dir = "/dev",
                             const std::vector<GpuDeviceInfo>& known = {});

// Physical memory this worker may use, in bytes: MemTotal of `proc_root`/meminfo, lowered to
// the memory.max of the worker's cgroup (cgroup v2, read from `proc_root`/self/cgroup) or of
// any cgroup above it, under `cgroup_root`, when one is smaller. 0 when unknown.
int64_t UsableMemoryBytes(const std::string& proc_root = "/proc",
                          const std::string& cgroup_root = "/sys/fs/cgroup");

// A size as a job spec's memory_per_proc is written: a number of bytes, or a number with a
// unit: Ki, Mi, Gi, Ti (powers of 1024) or K, M, G, T (powers of 1000). An error naming
// `flag` otherwise (or when it is 0 or overflows).
StatusOr<int64_t> ParseByteSize(const std::string& text, const std::string& flag);

// The GPUs of /proc/driver/nvidia/gpus/<PCI bus id>/information under `root` (the driver's
// view, without NVML): in PCI bus order, which is the order NVML and nvidia-smi index them
// in, so the index is the position; model from "Model:", UUID from "GPU UUID:"; memory
// unknown (0). Empty when there is no such directory.
std::vector<GpuDeviceInfo> GpusFromProcDriver(const std::string& root = "/proc/driver/nvidia");

// --gpus: "none" offers no GPU, "0,2" those indices. An error naming the flag otherwise.
StatusOr<std::vector<int>> ParseGpuList(const std::string& text);

// Where the offered GPUs come from. Each source is optional; tests pass fakes.
struct GpuSources {
  std::optional<std::string> gpus_flag;             // --gpus (validated by ParseGpuList)
  std::optional<std::string> cuda_visible_devices;  // the worker's own environment
  std::optional<std::vector<GpuDeviceInfo>> nvml;   // Nvml::Devices() when NVML loaded
  std::string proc_driver_root = "/proc/driver/nvidia";
  std::string dev_dir = "/dev";
};
struct OfferedGpus {
  std::vector<GpuDeviceInfo> devices;  // by index; model, memory, UUID where known
  std::string source;                  // for the log: "NVML", "--gpus 0,1 (NVML)", ...
};
// The GPUs the worker offers: what the machine has (NVML, else the driver's /proc files,
// else /dev/nvidia<N>), narrowed to --gpus (which must name GPUs the machine has, when any
// were found) or else to CUDA_VISIBLE_DEVICES, each with what is known of it.
StatusOr<OfferedGpus> DiscoverGpus(const GpuSources& sources);

// --label KEY=VALUE (repeatable) as a map, each checked as a Kubernetes-style label
// (IsValidLabelKey/IsValidLabelValue); an error names the flag and the bad label.
StatusOr<std::map<std::string, std::string>> ParseLabels(const std::vector<std::string>& labels);

// The first non-loopback IPv4 address of an interface that is up, else "127.0.0.1".
std::string FirstNonLoopbackIpv4();

// The machine's hostname ("localhost" when it cannot be read).
std::string HostName();

// The directory of the running executable (/proc/self/exe), "." when unknown.
std::string SelfDirectory();

}  // namespace convoy
