#include "worker/host/nvml.h"

#include <dlfcn.h>

namespace convoy {

// Declarations after nvml.h; only what is used.
struct Nvml::Api {
  using Device = void*;
  struct Utilization {
    unsigned int gpu;
    unsigned int memory;
  };
  struct Memory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
  };
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned int*) = nullptr;
  int (*handle)(unsigned int, Device*) = nullptr;
  int (*utilization)(Device, Utilization*) = nullptr;
  int (*memory)(Device, Memory*) = nullptr;
  // Optional (Devices leaves the field empty without them).
  int (*name)(Device, char*, unsigned int) = nullptr;
  int (*uuid)(Device, char*, unsigned int) = nullptr;
  // nvmlDeviceGetTotalEccErrors(device, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
  // NVML_VOLATILE_ECC = 0, &count) and nvmlDeviceGetRetiredPagesPendingStatus(device,
  // &state), state NVML_FEATURE_ENABLED = 1. Optional.
  int (*ecc_errors)(Device, int, int, unsigned long long*) = nullptr;
  int (*pages_pending)(Device, int*) = nullptr;
};

std::unique_ptr<Nvml> Nvml::Load() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return nullptr;
  auto api = std::make_unique<Api>();
  api->lib = lib;
  auto sym = [lib](const char* name) { return dlsym(lib, name); };
  api->init = reinterpret_cast<int (*)()>(sym("nvmlInit_v2"));
  api->shutdown = reinterpret_cast<int (*)()>(sym("nvmlShutdown"));
  api->count = reinterpret_cast<int (*)(unsigned int*)>(sym("nvmlDeviceGetCount_v2"));
  api->handle =
      reinterpret_cast<int (*)(unsigned int, Api::Device*)>(sym("nvmlDeviceGetHandleByIndex_v2"));
  api->utilization = reinterpret_cast<int (*)(Api::Device, Api::Utilization*)>(
      sym("nvmlDeviceGetUtilizationRates"));
  api->memory =
      reinterpret_cast<int (*)(Api::Device, Api::Memory*)>(sym("nvmlDeviceGetMemoryInfo"));
  api->name = reinterpret_cast<int (*)(Api::Device, char*, unsigned int)>(sym("nvmlDeviceGetName"));
  api->uuid = reinterpret_cast<int (*)(Api::Device, char*, unsigned int)>(sym("nvmlDeviceGetUUID"));
  api->ecc_errors = reinterpret_cast<int (*)(Api::Device, int, int, unsigned long long*)>(
      sym("nvmlDeviceGetTotalEccErrors"));
  api->pages_pending =
      reinterpret_cast<int (*)(Api::Device, int*)>(sym("nvmlDeviceGetRetiredPagesPendingStatus"));
  if (!api->init || !api->shutdown || !api->count || !api->handle || !api->utilization ||
      !api->memory || api->init() != 0) {
    dlclose(lib);
    return nullptr;
  }
  return std::unique_ptr<Nvml>(new Nvml(std::move(api)));
}

Nvml::Nvml(std::unique_ptr<Api> api) : api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  dlclose(api_->lib);
}

std::vector<GpuSample> Nvml::Sample() const {
  std::vector<GpuSample> out;
  unsigned int n = 0;
  if (api_->count(&n) != 0) return out;
  for (unsigned int i = 0; i < n; ++i) {
    Api::Device dev = nullptr;
    Api::Utilization util{};
    Api::Memory mem{};
    if (api_->handle(i, &dev) != 0 || api_->utilization(dev, &util) != 0 ||
        api_->memory(dev, &mem) != 0) {
      continue;
    }
    out.push_back({static_cast<int>(i), util.gpu / 100.0, static_cast<int64_t>(mem.used),
                   static_cast<int64_t>(mem.total)});
  }
  return out;
}

std::vector<GpuDeviceInfo> Nvml::Devices() const {
  std::vector<GpuDeviceInfo> out;
  unsigned int n = 0;
  if (api_->count(&n) != 0) return out;
  for (unsigned int i = 0; i < n; ++i) {
    Api::Device dev = nullptr;
    if (api_->handle(i, &dev) != 0) continue;
    GpuDeviceInfo d;
    d.index = static_cast<int>(i);
    char text[128] = {};  // NVML's own buffer sizes for names (96) and UUIDs (80)
    if (api_->name != nullptr && api_->name(dev, text, sizeof(text) - 1) == 0) d.model = text;
    text[0] = '\0';
    if (api_->uuid != nullptr && api_->uuid(dev, text, sizeof(text) - 1) == 0) d.uuid = text;
    Api::Memory mem{};
    if (api_->memory(dev, &mem) == 0) d.memory_bytes = static_cast<int64_t>(mem.total);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<GpuHealth> Nvml::Health() const {
  std::vector<GpuHealth> out;
  unsigned int n = 0;
  if (api_->count(&n) != 0) return out;
  for (unsigned int i = 0; i < n; ++i) {
    Api::Device dev = nullptr;
    if (api_->handle(i, &dev) != 0) continue;
    GpuHealth h;
    h.index = static_cast<int>(i);
    unsigned long long errors = 0;
    if (api_->ecc_errors != nullptr && api_->ecc_errors(dev, 1, 0, &errors) == 0) {
      h.uncorrected_ecc_errors = static_cast<int64_t>(errors);
    }
    int pending = 0;
    if (api_->pages_pending != nullptr && api_->pages_pending(dev, &pending) == 0) {
      h.retired_pages_pending = pending == 1;
    }
    out.push_back(h);
  }
  return out;
}

}  // namespace convoy
