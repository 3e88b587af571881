// The coordinator's store of job code archives (JobService.UploadCode, WorkerService.FetchCode),
// one file per archive, `<dir>/<sha256>.tar.gz`, mode 0600, in a 0700 directory under the
// state dir, with the users who uploaded it in `<sha256>.owners` (a name a line). A job may
// name only code its owner uploaded (issue 28): knowing a hash (GetJob shows it) is not
// having the code. An archive is stored once: a second upload of the same hash by one of its
// owners is answered complete at once; anyone else sends the bytes again, which are checked
// against the hash (proof of possession) and make them an owner. Uploads in progress are
// `<sha256>.<uploader>.part` (the uploader's name hashed), one per uploader, so that no
// upload can write into another's; a hash is only ever visible once its bytes were checked
// against it.
//
// With a CodeReplica (coordinators on etcd: etcd_code_replica.h), an upload is acknowledged only
// once the replica holds the archive and its owners, and an archive missing here (uploaded to
// a previous leader) is restored from it when asked for: the next leader has every archive a
// job may name.
//
// Threading: every method may be called from any thread (gRPC's callback threads); a
// mutex of its own serialises them (file I/O of at most one chunk, and the replica's reads:
// code calls wait on each other, nothing else does). An archive's last chunk is checked
// elsewhere: hashing up to 100 MB and handing it to the replica run on a thread of the
// store's own, without the mutex, and the upload is answered from there (issue 44: nothing
// slow on a callback thread). It never touches the coordinator's state lock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/work_thread.h"

namespace convoy {

// Where archives are kept besides the coordinator's disk. Each method is one or more round
// trips; thread-safe.
class CodeReplica {
 public:
  virtual ~CodeReplica() = default;
  // Stores the archive (unless it holds it already) and then its owners: an archive with
  // owners is whole.
  virtual Status Put(const std::string& sha256, const std::string& bytes,
                     const std::vector<std::string>& owners) = 0;
  // The archive's bytes (checked against the hash) and owners; NOT_FOUND when it has none.
  virtual Status Get(const std::string& sha256, std::string* bytes,
                     std::vector<std::string>* owners) = 0;
  virtual Status Remove(const std::string& sha256) = 0;
  // Every archive it holds, with when it was stored (Unix seconds).
  virtual StatusOr<std::vector<std::pair<std::string, int64_t>>> List() = 0;
};

class CodeStore {
 public:
  // Creates `dir` (0700) when missing, and removes the `.part` files of uploads that were in
  // progress when the last coordinator stopped (their clients start over). `replica`: see
  // above; null: this disk only (SQLite).
  static StatusOr<std::unique_ptr<CodeStore>> Open(const std::string& dir,
                                                   std::unique_ptr<CodeReplica> replica = nullptr);

  struct Progress {
    int64_t received = 0;
    bool complete = false;
  };
  // Appends one chunk of the archive `sha256` (see UploadCodeRequest). Offset 0 starts over;
  // another offset must equal what was received so far. The last chunk checks the hash.
  // `uploader`: who sends it (the principal's name; empty on an --insecure coordinator).
  // `done` gets the progress: on the calling thread for a chunk that leaves the archive
  // incomplete (or an error found before the hash); for the last chunk, on the store's own
  // thread once the bytes were hashed and the replica keeps them. `done` must not call Append.
  using AppendFn = std::function<void(StatusOr<Progress>)>;
  void Append(const std::string& sha256, int64_t total_size, int64_t offset,
              const std::string& data, const std::string& uploader, AppendFn done) EXCLUDES(mu_);
  // The same, waiting for the answer (tests, tools; never on the store's thread).
  StatusOr<Progress> Append(const std::string& sha256, int64_t total_size, int64_t offset,
                            const std::string& data, const std::string& uploader) EXCLUDES(mu_);
  // Whether the archive is stored (complete and checked).
  bool Has(const std::string& sha256);
  // Whether `user` uploaded the stored archive (a job of theirs may name it).
  bool OwnedBy(const std::string& sha256, const std::string& user);
  // How many stored archives `user` owns (the per-user limit on archives kept).
  int CountOwnedBy(const std::string& user);
  // Up to `max_bytes` of a stored archive from `offset`, and its total size.
  StatusOr<std::string> Read(const std::string& sha256, int64_t offset, int64_t max_bytes,
                             int64_t* total_size);
  // Removes the stored archives (and their owners) that no job names (`referenced`) and
  // that were stored or uploaded again more than `grace_s` ago (an upload is followed by its
  // submit: the grace keeps it until then), and `.part` files untouched for as long. The
  // coordinator calls it every minute with the jobs it keeps (a deleted job's code goes
  // once its grace is over). Returns the archives removed.
  std::vector<std::string> Collect(const std::set<std::string>& referenced, int64_t grace_s);

 private:
  CodeStore(std::string dir, std::unique_ptr<CodeReplica> replica)
      : dir_(std::move(dir)), replica_(std::move(replica)) {}
  // Whether the archive is here, restoring it from the replica when it is not.
  bool PresentLocked(const std::string& sha256) REQUIRES(mu_);
  std::vector<std::string> OwnersLocked(const std::string& sha256) REQUIRES(mu_);
  std::string PathOf(const std::string& sha256) const { return dir_ + "/" + sha256 + ".tar.gz"; }
  std::string OwnersOf(const std::string& sha256) const { return dir_ + "/" + sha256 + ".owners"; }
  bool OwnedByLocked(const std::string& sha256, const std::string& user) REQUIRES(mu_);
  Status AddOwnerLocked(const std::string& sha256, const std::string& user) REQUIRES(mu_);
  // On the store's thread: hashes the whole upload at `whole` (renamed from its .part, so no
  // new upload writes into it), has the replica keep it, and stores it as the archive.
  StatusOr<Progress> Complete(const std::string& sha256, int64_t total_size,
                              const std::string& whole, const std::string& uploader) EXCLUDES(mu_);

  const std::string dir_;
  const std::unique_ptr<CodeReplica> replica_;
  Mutex mu_;                                  // serialises file operations and the replica's reads
  uint64_t completions_ GUARDED_BY(mu_) = 0;  // names each upload being completed
  WorkThread completer_;                      // last: its work uses the members above
};

}  // namespace convoy
