// Snapshot files in host memory (issue 17): CONVOY_SNAPSHOT_DIR is a per-job directory on a
// tmpfs, private to the job's user, shared by the job's ranks on the host and kept across the
// job's attempts there. A snapshot holds the same bytes as a disk checkpoint (model,
// optimiser, position and the epoch's sample counts; trainer/checkpoint.h), behind a text
// header that says whose it is and a checksum:
//
//   convoy-snapshot 1
//   job j-000007          (CONVOY_JOB_ID; empty outside Convoy)
//   uid 0123...cdef       (CONVOY_JOB_UID; the line is absent without one)
//   cluster fedc...3210   (CONVOY_CLUSTER_ID; absent without a uid)
//   model fmnist-cnn
//   seed 1234
//   samples 60000         (the training set's size)
//   step 287              (global optimiser step)
//   epoch 1
//   sample 18368          (samples of the epoch consumed)
//   bytes 13060367        (payload length)
//   checksum 9f3c...      (Checksum64 of the payload, mixed with the header lines above it)
//   <empty line>
//   <payload>
//
// Files are `snap-<step, 12 digits>.bin`, written to a temporary name in the directory and
// renamed (so a reader sees a whole file or none); the newest two are kept. Several ranks of a
// host may write the same step: the content is the same (DDP keeps every rank's state
// identical), and the rename is atomic.
//
// No LibTorch here: files, the header and the checksum only. Any thread; the functions share
// no state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/data_cache.h"

namespace convoy::trainer {

struct SnapshotMeta {
  // Identity: a snapshot is used only by a run with the same four, and, when the run has a
  // job uid, the same uid and cluster id (IdentityMismatch).
  std::string job;
  std::string job_uid;
  std::string cluster_id;
  std::string model;
  int64_t seed = 0;
  int64_t samples = 0;
  // Position.
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t sample = 0;
};

// Why state that carries (found_cluster, found_uid) is not this run's (want_cluster,
// want_uid), or "" when it is: a run with a job uid resumes only from state of the same uid
// and cluster (job ids repeat across clusters, uids do not), and refuses state without one
// (an older format, or a run by hand); a run without a uid (by hand) takes any. E.g. "it
// belongs to job <uid> of cluster <id>, not this job (<uid> of cluster <id>)".
std::string IdentityMismatch(const std::string& found_cluster, const std::string& found_uid,
                             const std::string& want_cluster, const std::string& want_uid);

// The file name of the snapshot of `step` in `dir`.
std::string SnapshotPath(const std::string& dir, int64_t step);

// Writes `payload` as the snapshot of `meta.step` in `dir` (created 0700 when missing), then
// removes all but the newest `keep` snapshots and temporary files left by writers that died.
// Returns the path. Throws std::runtime_error naming the file on I/O errors (a full tmpfs).
std::string WriteSnapshotFile(const std::string& dir, const SnapshotMeta& meta,
                              std::string_view payload, int keep = 2);

struct FoundSnapshot {
  std::string path;
  SnapshotMeta meta;
  // What `payload` views: ReadNewestSnapshot's file, mapped (MapReadOnly, common/data_cache.h:
  // a snapshot's megabytes are checked, broadcast and loaded where the page cache holds them,
  // never copied into fresh memory, each page of which is a fault; on a virtual machine a
  // 13 MB copy cost 40 ms). Snapshot files are replaced by rename and never truncated.
  std::shared_ptr<const Bytes> file;
  std::string_view payload;
};

// The newest snapshot in `dir` whose header parses, whose checksum matches and whose identity
// (job, model, seed, samples; uid and cluster as IdentityMismatch says) is `want`'s; corrupt,
// truncated and foreign files are skipped with a warning on stderr naming the file and why
// (another job's identity: "not resuming from <path>: it belongs to job ..."). Nothing when there
// is none (or no `dir`).
std::optional<FoundSnapshot> ReadNewestSnapshot(const std::string& dir, const SnapshotMeta& want);

// Parses a whole snapshot file's bytes: true and `out` filled when the header and checksum are
// good (its payload views `bytes`, which must outlive it); else false with `why` ("checksum
// mismatch", "truncated: ...").
bool ParseSnapshot(std::string_view bytes, FoundSnapshot* out, std::string* why);

// The whole file at `path` into `out`, in one read of its size (a 13 MB state read character
// by character took tens of milliseconds of a restart). False when it cannot be read.
bool ReadWholeFile(const std::string& path, std::string* out);

}  // namespace convoy::trainer
