#include "worker/daemon/check_config.h"
#include "common/util.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "common/config_file.h"
#include "common/job_paths.h"
#include "common/pki.h"
#include "worker/exec/cgroups.h"
#include "worker/exec/posix_process_launcher.h"
#include "worker/files/job_root.h"
#include "worker/files/snapshot_dir.h"
#include "worker/host/job_identity.h"
#include "worker/host/resources.h"
#include "worker/link/credentials.h"

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

int64_t NowS() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Whether <work dir>/tls holds a usable certificate for this worker, as
// WorkerCredentials::LoadStored decides at start (a store cut short counts when the files it
// left complete a valid set), but read-only. OK, NotFound (no set there) or why the set there
// is not usable.
Status StoredCertificate(const WorkerFlags& flags, const std::string& dir, int64_t* not_after_s) {
  const char* names[] = {"ca.crt", "worker.key", "worker.crt"};
  auto check = [&](bool prefer_tmp) -> Status {
    std::string pem[3];
    for (int i = 0; i < 3; ++i) {
      const std::string path = dir + "/" + names[i];
      auto text =
          ReadFile("stored",
                   prefer_tmp && access((path + ".tmp").c_str(), F_OK) == 0 ? path + ".tmp" : path);
      if (!text.ok()) return Status::NotFound("");
      pem[i] = *text;
    }
    Status valid =
        CheckWorkerCertificate(pem[1], pem[2], pem[0], flags.name, flags.ca_fingerprint, NowS());
    if (!valid.ok()) return Status::InvalidArgument(dir + ": " + valid.message());
    auto info = InspectCertificate(pem[2]);
    if (info.ok()) *not_after_s = info->not_after_s;
    return Status::Ok();
  };
  if (check(true).ok()) return Status::Ok();
  return check(false);
}

void CheckCredentials(const WorkerFlags& flags, std::vector<std::string>* notes,
                      std::vector<std::string>* errors) {
  if (flags.insecure) {
    notes->push_back("plain text to the coordinator (--insecure)");
    return;
  }
  if (!flags.tls_cert.empty()) {
    if (flags.tls_key.empty() || flags.tls_ca.empty()) return;  // the parse said so
    auto cert = ReadFile("--tls-cert", flags.tls_cert);
    auto key = ReadFile("--tls-key", flags.tls_key);
    auto ca = ReadFile("--tls-ca", flags.tls_ca);
    bool read = true;
    for (const auto* r : {&cert, &key, &ca}) {
      if (!r->ok()) errors->push_back(r->status().message());
      read = read && r->ok();
    }
    if (!read) return;
    if (Status s = CheckWorkerCertificate(*key, *cert, *ca, flags.name, "", NowS()); !s.ok()) {
      errors->push_back("--tls-cert: " + s.message());
      return;
    }
    notes->push_back("TLS files load and name " + flags.name);
    return;
  }
  const std::string work_dir =
      std::filesystem::absolute(flags.work_dir).lexically_normal().string();
  const std::string dir = (std::filesystem::path(work_dir) / "tls").string();
  int64_t not_after_s = 0;
  const Status stored = StoredCertificate(flags, dir, &not_after_s);
  if (stored.ok()) {
    notes->push_back("uses the certificate stored in " + dir + " (valid until " +
                     UtcIso8601(not_after_s) + ")");
    return;
  }
  if (!flags.join_token.empty()) {
    if (!flags.ca_fingerprint.empty()) {
      notes->push_back("joins with a token, trusting CA " + flags.ca_fingerprint +
                       (stored.message().empty() ? "" : " (" + stored.message() + ")"));
    }
    return;  // a missing or malformed fingerprint: the parse said so
  }
  errors->push_back(
      "no credentials: a secured worker needs a join token (--join-token or "
      "CONVOY_JOIN_TOKEN, with --ca-fingerprint), or --tls-cert, --tls-key and --tls-ca, or a "
      "valid certificate for '" +
      flags.name + "' in " + dir + " from an earlier join; --insecure only for a coordinator " +
      "on loopback" + (stored.message().empty() ? "" : " (stored: " + stored.message() + ")"));
}

}  // namespace

void CheckWorkerConfig(const WorkerFlags& flags, std::vector<std::string>* notes,
                       std::vector<std::string>* errors) {
  auto fail = [errors](const Status& s) {
    if (!s.ok()) errors->push_back(s.message());
    return !s.ok();
  };
  // ParseWorkerFlags already checked the coordinator address, the name and flag pairs.
  notes->push_back("coordinator " + flags.coordinator);
  if (!flags.metrics_listen.empty()) {
    notes->push_back("/metrics, /healthz, /readyz on " + flags.metrics_listen);
  }
  const std::string job_root =
      flags.job_root.empty() ? flags.work_dir + "/job-root" : flags.job_root;
  const bool work_ok = !fail(CheckWritableDir("--work-dir", flags.work_dir));
  const bool root_ok = !fail(CheckWritableDir("--job-root", job_root));
  if (work_ok && root_ok)
    notes->push_back("work dir " + flags.work_dir + " and job root " + job_root + " writable");
  StatusOr<std::optional<RunAsUser>> user = std::optional<RunAsUser>();
  if (flags.run_as == "pool" && geteuid() == 0) {
    auto pool = ParseUidRange("--run-as-pool", flags.run_as_pool);
    if (pool.ok()) {
      Status free = CheckRangeFree("--run-as-pool", *pool);
      if (free.ok()) {
        notes->push_back("ranks run as an identity of their own per job: uids and gids " +
                         flags.run_as_pool + ", which no account or group uses");
        user = std::optional<RunAsUser>(PoolRepresentative(*pool));
      } else {
        user = free;
      }
    } else {
      user = pool.status();
    }
  } else if (flags.run_as == "owner" && geteuid() == 0) {
    notes->push_back(
        "ranks run as their job owner's account (--run-as owner; never root): jobs of "
        "different owners are isolated from each other, one owner's jobs are not");
    user = std::optional<RunAsUser>(OwnerRepresentative());
  } else if (flags.run_as != "pool" && flags.run_as != "owner") {
    user = ResolveRankUser(flags.run_as, flags.allow_root_jobs, geteuid());
  }
  if (!fail(user.status())) {
    if (flags.run_as != "pool" && flags.run_as != "owner" && *user) {
      notes->push_back("ranks run as " + flags.run_as +
                       ", every job as that one user: jobs are not isolated from each other "
                       "(any job can read, write and signal another's); --run-as pool gives "
                       "each job its own");
    } else if (!*user) {
      notes->push_back("ranks run as this (non-root) user; --run-as applies to root");
    }
    const std::string snapshots = flags.snapshot_dir == "none" ? ""
                                  : flags.snapshot_dir.empty()
                                      ? DefaultSnapshotRoot(flags.name, flags.work_dir)
                                      : flags.snapshot_dir;
    auto work = CanonicalPath(flags.work_dir);
    if (!fail(StartupJobRoot(flags.job_root, work.ok() ? *work : flags.work_dir, snapshots, *user,
                             /*create=*/false)
                  .status())) {
      notes->push_back("job root " + job_root + " apart from the work dir, reachable by the ranks");
    }
  }
  const std::string trainer =
      flags.trainer.empty() ? SelfDirectory() + "/convoy-trainer" : flags.trainer;
  if (access(trainer.c_str(), X_OK) != 0) {
    errors->push_back("--trainer " + trainer + ": not an executable file");
  }
  // What the worker would offer (the same discovery as at start).
  const int64_t memory = flags.memory_bytes > 0 ? flags.memory_bytes : UsableMemoryBytes();
  GpuSources gpu_sources;
  if (!flags.gpus.empty()) gpu_sources.gpus_flag = flags.gpus;
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES")) gpu_sources.cuda_visible_devices = cvd;
  if (auto nvml = Nvml::Load()) gpu_sources.nvml = nvml->Devices();
  auto gpus = DiscoverGpus(gpu_sources);
  if (!fail(gpus.status())) {
    std::string labels;
    for (const auto& [k, v] : flags.label_map) labels += (labels.empty() ? "" : ", ") + k + "=" + v;
    notes->push_back("offers " + (memory > 0 ? HumanBytes(memory) : std::string("unknown")) +
                     " of memory, " + std::to_string(gpus->devices.size()) + " GPU(s) (" +
                     gpus->source + "); labels: " + (labels.empty() ? "none" : labels));
  }
  // Enforced limits: made and removed under a probe's name (never the running worker's base).
  if (flags.cgroups == "off") {
    notes->push_back(
        "--cgroups off: limits are not enforced, and jobs that set memory_per_proc or "
        "cpus_per_proc are refused");
  } else {
    auto probe = Cgroups::OpenSystem("convoy-check-" + std::to_string(getpid()));
    if (probe.ok()) {
      notes->push_back("limits enforced: each rank in a cgroup of its own: " +
                       (*probe)->Describe());
      (void)(*probe)->RemoveBase();
    } else if (flags.cgroups == "required") {
      errors->push_back("--cgroups required: " + probe.status().message());
    } else {
      notes->push_back("limits are not enforced (" + probe.status().message() +
                       "): jobs that set memory_per_proc or cpus_per_proc are refused");
    }
  }
  std::error_code ec;
  for (const std::string& p : flags.data_paths) {
    if (!std::filesystem::is_directory(p, ec)) {
      notes->push_back("data path " + p + " does not exist (ignored)");
    }
  }
  CheckCredentials(flags, notes, errors);
}

}  // namespace convoy
