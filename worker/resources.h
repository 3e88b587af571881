// What this machine offers, as the worker registers it. Plain functions; any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace convoy {

// CPU cores this process may run on: sched_getaffinity's count (a cpuset or taskset limits
// it), else the online cores; at least 1.
int UsableCores();

// GPU indices visible to ranks. CUDA_VISIBLE_DEVICES when set (its entries up to the first
// invalid one, as CUDA reads it; UUIDs count by position; "" or "-1": none), else the
// /dev/nvidia<N> device files under `dev_dir`.
std::vector<int> VisibleGpus(const std::optional<std::string>& cuda_visible_devices,
                             const std::string& dev_dir = "/dev");

// The first non-loopback IPv4 address of an interface that is up, else "127.0.0.1".
std::string FirstNonLoopbackIpv4();

// The machine's hostname ("localhost" when it cannot be read).
std::string HostName();

// The directory of the running executable (/proc/self/exe), "." when unknown.
std::string SelfDirectory();

}  // namespace convoy
