#include "worker/files/checkpoint_keeper.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "common/job_paths.h"
#include "common/strings.h"
#include "common/unique_fd.h"
#include "spec/checkpoint_spec.h"
#include "worker/files/file_removal.h"

namespace convoy {
namespace {

using nlohmann::json;

// A manifest larger than this is not one (ten thousand checkpoints with their metrics take
// about 2 MB).
constexpr size_t kMaxManifestBytes = 16 << 20;

void FsyncDir(int dir_fd) {
  if (dir_fd >= 0) fsync(dir_fd);
}

}  // namespace

bool IsKeepableCheckpointPath(const std::string& path) {
  return !path.empty() && path.size() <= 255 && path[0] != '.' &&
         path.find('/') == std::string::npos && path.find('\0') == std::string::npos;
}

std::string ManifestToJson(const CheckpointManifest& m) {
  json j;
  j["version"] = 1;
  j["job_id"] = m.job_id;
  j["job_uid"] = m.job_uid;
  j["checkpoint_dir"] = m.checkpoint_dir;
  j["policy"] = {{"keep_last", m.policy.keep_last()},
                 {"keep_best",
                  {{"metric", m.policy.keep_best().metric()},
                   {"goal", m.policy.keep_best().goal()},
                   {"count", m.policy.keep_best().count()}}}};
  j["next_order"] = m.next_order;
  json kept = json::array();
  for (const KeptCheckpoint& c : m.kept) {
    json metrics = json::object();
    for (const auto& [k, v] : c.metrics) metrics[k] = v;
    json entry = {{"path", c.path},       {"step", c.step},
                  {"attempt", c.attempt}, {"saved_unix_ms", c.saved_unix_ms},
                  {"order", c.order},     {"metrics", metrics}};
    kept.push_back(std::move(entry));
  }
  j["checkpoints"] = kept;
  j["deleting"] = m.deleting;
  return j.dump(1) + "\n";
}

StatusOr<CheckpointManifest> ManifestFromJson(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument("not a checkpoint manifest (not a JSON object)");
  }
  CheckpointManifest m;
  try {
    m.job_id = j.at("job_id").get<std::string>();
    m.job_uid = j.at("job_uid").get<std::string>();
    m.checkpoint_dir = j.at("checkpoint_dir").get<std::string>();
    const json& p = j.at("policy");
    m.policy.set_keep_last(p.at("keep_last").get<int32_t>());
    m.policy.mutable_keep_best()->set_metric(p.at("keep_best").at("metric").get<std::string>());
    m.policy.mutable_keep_best()->set_goal(p.at("keep_best").at("goal").get<std::string>());
    m.policy.mutable_keep_best()->set_count(p.at("keep_best").at("count").get<int32_t>());
    m.next_order = j.at("next_order").get<int64_t>();
    for (const json& c : j.at("checkpoints")) {
      KeptCheckpoint k;
      k.path = c.at("path").get<std::string>();
      k.step = c.at("step").get<int64_t>();
      k.attempt = c.at("attempt").get<int>();
      k.saved_unix_ms = c.at("saved_unix_ms").get<int64_t>();
      k.order = c.at("order").get<int64_t>();
      const json& metrics = c.at("metrics");
      for (auto it = metrics.begin(); it != metrics.end(); ++it) {
        k.metrics[it.key()] = it.value().get<double>();
      }
      if (!IsKeepableCheckpointPath(k.path)) {
        return Status::InvalidArgument("bad checkpoint path in the manifest");
      }
      m.kept.push_back(std::move(k));
    }
    for (const json& d : j.at("deleting")) {
      m.deleting.push_back(d.get<std::string>());
      if (!IsKeepableCheckpointPath(m.deleting.back())) {
        return Status::InvalidArgument("bad checkpoint path in the manifest");
      }
    }
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("not a checkpoint manifest: ") + e.what());
  }
  if (m.checkpoint_dir.empty() || m.checkpoint_dir[0] != '/') {
    return Status::InvalidArgument("the manifest's checkpoint_dir is not absolute");
  }
  return m;
}

StatusOr<CheckpointManifest> ReadManifest(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.fd < 0) {
    return errno == ENOENT ? Status::NotFound(path) : Status::Internal(ErrnoText(path));
  }
  std::string text;
  char buf[65536];
  ssize_t n = 0;
  while ((n = read(fd.fd, buf, sizeof(buf))) > 0) {
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxManifestBytes) return Status::InvalidArgument(path + ": too large");
  }
  if (n < 0) return Status::Internal(ErrnoText(path));
  auto m = ManifestFromJson(text);
  if (!m.ok()) return Status::InvalidArgument(path + ": " + m.status().message());
  return m;
}

Status WriteManifest(const std::string& path, const CheckpointManifest& m) {
  const std::string dir = path.substr(0, path.rfind('/'));
  const std::string tmp = path + ".tmp";
  const std::string text = ManifestToJson(m);
  unlink(tmp.c_str());  // what a write killed in the middle left
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.fd < 0) return Status::Internal(ErrnoText(tmp));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Internal(ErrnoText(tmp));
    done += static_cast<size_t>(n);
  }
  if (fsync(fd.fd) != 0) return Status::Internal(ErrnoText(tmp));
  if (rename(tmp.c_str(), path.c_str()) != 0) return Status::Internal(ErrnoText(path));
  UniqueFd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  FsyncDir(dir_fd.fd);
  return Status::Ok();
}

CheckpointKeeper::CheckpointKeeper(std::string jobs_dir, std::string worker)
    : jobs_dir_(std::move(jobs_dir)), worker_(std::move(worker)) {}

std::string CheckpointKeeper::ManifestPath(const std::string& job_id,
                                           const std::string& job_uid) const {
  return jobs_dir_ + "/" + JobDirName(job_id, job_uid) + "/" + kCheckpointManifestName;
}

Status CheckpointKeeper::FinishDeletions(CheckpointManifest& m, const std::string& manifest_path) {
  if (m.deleting.empty()) return Status::Ok();
  UniqueFd dir(OpenDirNoFollow(m.checkpoint_dir));
  if (dir.fd < 0 && errno != ENOENT) {
    return Status::Internal(ErrnoText("checkpoint directory " + m.checkpoint_dir));
  }
  Status first;
  std::vector<std::string> left;
  for (const std::string& name : m.deleting) {
    if (dir.fd < 0) continue;  // the directory is gone, and its checkpoints with it
    const std::string hidden = kDeletingPrefix + name;
    // 2. hide: a reader sees the whole checkpoint or nothing. Already renamed (or gone):
    // ENOENT, and the removal below finishes the job.
    if (renameat(dir.fd, name.c_str(), dir.fd, hidden.c_str()) != 0 && errno != ENOENT) {
      if (first.ok()) first = Status::Internal(ErrnoText(m.checkpoint_dir + "/" + name));
      left.push_back(name);
      continue;
    }
    FsyncDir(dir.fd);
    if (hook_) hook_(Step::kHidden, name);
    // 3. remove.
    Status st = RemoveEntryAt(dir.fd, hidden, m.checkpoint_dir + "/" + hidden);
    if (!st.ok()) {
      if (first.ok()) first = st;
      left.push_back(name);
      continue;
    }
    if (hook_) hook_(Step::kRemoved, name);
  }
  // 4. done.
  m.deleting = left;
  Status written = WriteManifest(manifest_path, m);
  return first.ok() ? written : first;
}

v1::CheckpointsKept CheckpointKeeper::Kept(const CheckpointManifest& m) const {
  v1::CheckpointsKept out;
  out.set_job_id(m.job_id);
  out.set_job_uid(m.job_uid);
  std::vector<CheckpointCandidate> all;
  for (const KeptCheckpoint& c : m.kept) all.push_back({c.step, c.order, c.metrics});
  const auto why = ApplyCheckpointPolicy(m.policy, all);
  std::vector<size_t> order(m.kept.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&m](size_t a, size_t b) {  // newest first
    if (m.kept[a].step != m.kept[b].step) return m.kept[a].step > m.kept[b].step;
    return m.kept[a].order > m.kept[b].order;
  });
  for (size_t i : order) {
    const KeptCheckpoint& c = m.kept[i];
    v1::CheckpointInfo* info = out.add_checkpoints();
    info->set_path(c.path);
    info->set_worker(worker_);
    info->set_step(c.step);
    info->set_attempt(c.attempt);
    info->set_saved_unix_ms(c.saved_unix_ms);
    for (const auto& [k, v] : c.metrics) (*info->mutable_metrics())[k] = v;
    auto it = why.find(i);
    if (it != why.end()) {
      for (const std::string& w : it->second) info->add_kept_as(w);
    }
  }
  return out;
}

StatusOr<v1::CheckpointsKept> CheckpointKeeper::Record(const Job& job, int attempt,
                                                       const v1::MetricRecord& rec,
                                                       int64_t now_unix_ms) {
  const std::string& name = rec.checkpoint_path();
  if (!IsKeepableCheckpointPath(name)) {
    return Status::InvalidArgument("checkpoint_path '" + name.substr(0, 80) +
                                   "' is not a name in the checkpoint directory");
  }
  const std::string manifest_path = ManifestPath(job.job_id, job.job_uid);
  CheckpointManifest m;
  auto read = ReadManifest(manifest_path);
  if (read.ok()) {
    m = std::move(*read);
  } else if (read.status().code() != StatusCode::kNotFound) {
    spdlog::warn("job {}: {}; starting a new checkpoint manifest", job.job_id,
                 read.status().message());
  }
  m.job_id = job.job_id;
  m.job_uid = job.job_uid;
  m.checkpoint_dir = job.checkpoint_dir;
  m.policy = job.policy;
  // A name marked again is a new checkpoint of that name (the trainer rewrites the file of a
  // step through a rename): it is not the one whose deletion may be under way. Its hidden
  // copy, if renamed already, still goes.
  const auto again = std::find(m.deleting.begin(), m.deleting.end(), name);
  const bool was_deleting = again != m.deleting.end();
  if (was_deleting) m.deleting.erase(again);
  Status finished = FinishDeletions(m, manifest_path);
  if (!finished.ok()) spdlog::warn("job {}: {}", job.job_id, finished.message());
  {
    UniqueFd dir(OpenDirNoFollow(job.checkpoint_dir));
    struct stat st {};
    if (dir.fd < 0 || fstatat(dir.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return Status::InvalidArgument("checkpoint " + job.checkpoint_dir + "/" + name +
                                     " is not there");
    }
    if (was_deleting) RemoveEntryAt(dir.fd, kDeletingPrefix + name, name);
  }
  auto same = std::find_if(m.kept.begin(), m.kept.end(),
                           [&name](const KeptCheckpoint& c) { return c.path == name; });
  if (same == m.kept.end()) {
    m.kept.push_back({});
    same = m.kept.end() - 1;
  }
  same->path = name;
  same->step = rec.step();
  same->attempt = attempt;
  same->saved_unix_ms = now_unix_ms;
  same->order = m.next_order++;
  same->metrics.clear();
  for (const auto& [k, v] : rec.values()) same->metrics[k] = v;
  if (rec.has_loss()) same->metrics["loss"] = rec.loss();
  // The policy: the victims go to `deleting` (1. intent, written), then steps 2-4.
  std::vector<CheckpointCandidate> all;
  for (const KeptCheckpoint& c : m.kept) all.push_back({c.step, c.order, c.metrics});
  const auto keep = ApplyCheckpointPolicy(m.policy, all);
  std::vector<KeptCheckpoint> kept;
  for (size_t i = 0; i < m.kept.size(); ++i) {
    if (keep.count(i) != 0) {
      kept.push_back(std::move(m.kept[i]));
    } else {
      m.deleting.push_back(m.kept[i].path);
    }
  }
  m.kept = std::move(kept);
  CONVOY_RETURN_IF_ERROR(WriteManifest(manifest_path, m));
  if (hook_) {
    for (const std::string& victim : m.deleting) hook_(Step::kIntent, victim);
  }
  if (!m.deleting.empty()) {
    Status st = FinishDeletions(m, manifest_path);
    if (!st.ok()) spdlog::warn("job {}: checkpoints not deleted yet: {}", job.job_id, st.message());
  }
  return Kept(m);
}

std::vector<v1::CheckpointsKept> CheckpointKeeper::RecoverAll() {
  std::vector<v1::CheckpointsKept> out;
  std::vector<std::string> jobs;
  if (DIR* d = opendir(jobs_dir_.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") jobs.push_back(name);
    }
    closedir(d);
  }
  std::sort(jobs.begin(), jobs.end());
  for (const std::string& job_dir : jobs) {
    const std::string path = jobs_dir_ + "/" + job_dir + "/" + kCheckpointManifestName;
    auto m = ReadManifest(path);
    if (!m.ok()) {
      if (m.status().code() != StatusCode::kNotFound) {
        spdlog::warn("checkpoints: {}", m.status().message());
      }
      continue;
    }
    // Only the job whose directory it is in: a copied manifest names no other job's files.
    if (JobDirName(m->job_id, m->job_uid) != job_dir) continue;
    if (!m->deleting.empty()) {
      spdlog::info("job {}: finishing the deletion of {} checkpoint(s) an earlier run left",
                   m->job_id, m->deleting.size());
      Status st = FinishDeletions(*m, path);
      if (!st.ok()) spdlog::warn("job {}: {}", m->job_id, st.message());
    }
    out.push_back(Kept(*m));
  }
  return out;
}

}  // namespace convoy
