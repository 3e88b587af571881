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

class Nvml {
 public:
  // Null when the library or a symbol is missing or nvmlInit fails.
  static std::unique_ptr<Nvml> Load();
  ~Nvml();
  // Every device NVML can read; a device that fails a query is left out.
  std::vector<GpuSample> Sample() const;
  // Every device NVML knows, by index, with its name, memory and UUID where NVML gives them.
  std::vector<GpuDeviceInfo> Devices() const;

 private:
  struct Api;
  explicit Nvml(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace convoy
