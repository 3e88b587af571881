#include "worker/check_config.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "common/config_file.h"
#include "worker/credentials.h"
#include "worker/posix_process_launcher.h"
#include "worker/resources.h"

namespace convoy {
namespace {

StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::InvalidArgument(flag + " " + path + ": cannot be read");
  std::string data;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, n);
  fclose(f);
  return data;
}

}  // namespace

Status CheckWorkerConfig(const WorkerFlags& flags, std::vector<std::string>* notes) {
  // ParseWorkerFlags already checked the coordinator address, the name and flag pairs.
  notes->push_back("coordinator " + flags.coordinator);
  if (!flags.metrics_listen.empty()) {
    notes->push_back("/metrics, /healthz, /readyz on " + flags.metrics_listen);
  }
  if (Status s = CheckWritableDir("--work-dir", flags.work_dir); !s.ok()) return s;
  if (Status s = CheckWritableDir("--job-root", flags.job_root); !s.ok()) return s;
  notes->push_back("work dir " + flags.work_dir + " and job root " + flags.job_root + " writable");
  auto user = ResolveRankUser(flags.run_as, flags.allow_root_jobs, geteuid());
  if (!user.ok()) return user.status();
  notes->push_back(*user ? "ranks run as " + flags.run_as
                         : "ranks run as this (non-root) user; --run-as applies to root");
  const std::string trainer =
      flags.trainer.empty() ? SelfDirectory() + "/convoy-trainer" : flags.trainer;
  if (access(trainer.c_str(), X_OK) != 0) {
    return Status::InvalidArgument("--trainer " + trainer + ": not an executable file");
  }
  // What the worker would offer (the same discovery as at start).
  const int64_t memory = flags.memory_bytes > 0 ? flags.memory_bytes : UsableMemoryBytes();
  GpuSources gpu_sources;
  if (!flags.gpus.empty()) gpu_sources.gpus_flag = flags.gpus;
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES")) gpu_sources.cuda_visible_devices = cvd;
  if (auto nvml = Nvml::Load()) gpu_sources.nvml = nvml->Devices();
  auto gpus = DiscoverGpus(gpu_sources);
  if (!gpus.ok()) return gpus.status();
  std::string labels;
  for (const auto& [k, v] : flags.label_map) labels += (labels.empty() ? "" : ", ") + k + "=" + v;
  notes->push_back("offers " + (memory > 0 ? HumanBytes(memory) : std::string("unknown")) +
                   " of memory, " + std::to_string(gpus->devices.size()) + " GPU(s) (" +
                   gpus->source + "); labels: " + (labels.empty() ? "none" : labels));
  std::error_code ec;
  for (const std::string& p : flags.data_paths) {
    if (!std::filesystem::is_directory(p, ec)) {
      notes->push_back("data path " + p + " does not exist (ignored)");
    }
  }
  if (!flags.tls_cert.empty()) {
    auto cert = ReadFile("--tls-cert", flags.tls_cert);
    auto key = ReadFile("--tls-key", flags.tls_key);
    auto ca = ReadFile("--tls-ca", flags.tls_ca);
    for (const auto* r : {&cert, &key, &ca}) {
      if (!r->ok()) return r->status();
    }
    const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    if (Status s = CheckWorkerCertificate(*key, *cert, *ca, flags.name, "", now_s); !s.ok()) {
      return Status::InvalidArgument("--tls-cert: " + s.message());
    }
    notes->push_back("TLS files load and name " + flags.name);
  } else if (!flags.join_token.empty()) {
    if (flags.ca_fingerprint.rfind("SHA256:", 0) != 0) {
      return Status::InvalidArgument(
          "--ca-fingerprint must look like SHA256:... (printed by "
          "convoy-coordinator init)");
    }
    notes->push_back("joins with a token, trusting CA " + flags.ca_fingerprint);
  }
  return Status::Ok();
}

}  // namespace convoy
