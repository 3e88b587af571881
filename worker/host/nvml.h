// NVML (libnvidia-ml.so.1) loaded with dlopen at run time: no build or package dependency,
// and nothing at all on machines without NVIDIA's driver. Used for the GPUs a worker offers
// (resources.h) and for the GPU series of its /metrics (worker_metrics.h). Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace convoy {

// One GPU as NVML reports it now.
struct GpuSample {
  int index = 0;
  double utilization_ratio = 0;  // 0..1 over NVML's last sample period
  int64_t memory_used_bytes = 0;
  int64_t memory_total_bytes = 0;
};

// What a GPU is (the worker's Register.gpu_devices): unknown fields are empty or 0.
struct GpuDeviceInfo {
  int index = 0;  // NVML's index: PCI bus order, as nvidia-smi numbers them
  std::string model;
  int64_t memory_bytes = 0;
  std::string uuid;
};

// A GPU's memory health as NVML reports it (README "When nodes are sick").
struct GpuHealth {
  int index = 0;
  // Uncorrected ECC errors since the driver loaded (0 on a GPU without ECC).
  int64_t uncorrected_ecc_errors = 0;
  // A page retirement waits for the next reset: the GPU's memory is not to be trusted.
  bool retired_pages_pending = false;
};

class Nvml {
 public:
  // Null when the library or a symbol is missing or nvmlInit fails.
  static std::unique_ptr<Nvml> Load();
  ~Nvml();
  // Every device NVML can read; a device that fails a query is left out.
  std::vector<GpuSample> Sample() const;
  // Every device NVML knows, by index, with its name, memory and UUID where NVML gives them.
  std::vector<GpuDeviceInfo> Devices() const;
  // Every device's memory health; a counter NVML does not support (no ECC) reads as 0.
  std::vector<GpuHealth> Health() const;

 private:
  struct Api;
  explicit Nvml(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace convoy
