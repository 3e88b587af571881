// coordinator/code_store: archives stored once, by a hash that was checked, 0600.
#include "coordinator/store/code_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/pki.h"
#include "tests/support/temp_dir.h"

namespace convoy {
namespace coordinator_code_store_test {

TEST(CodeStoreTest, ChunksInOrderAreStoredOnceUnderTheirCheckedHash) {
  testing::TempDir dir;
  auto store = CodeStore::Open((dir.path() / "code").string());
  ASSERT_TRUE(store.ok());
  const std::string data = "0123456789";
  const std::string sha = Sha256Hex(data);
  EXPECT_FALSE((*store)->Has(sha));
  auto p = (*store)->Append(sha, 10, 0, data.substr(0, 4), "alice");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->received, 4);
  EXPECT_FALSE(p->complete);
  EXPECT_FALSE((*store)->Append(sha, 10, 7, "789", "alice").ok());  // a gap
  p = (*store)->Append(sha, 10, 4, data.substr(4), "alice");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->complete);
  EXPECT_TRUE((*store)->Has(sha));
  struct stat st {};
  ASSERT_EQ(stat((dir.path() / "code" / (sha + ".tar.gz")).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((dir.path() / "code").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE((*store)->OwnedBy(sha, "alice"));
  // Again: complete at once, nothing written.
  p = (*store)->Append(sha, 10, 0, "", "alice");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->complete);
  int64_t total = 0;
  auto back = (*store)->Read(sha, 3, 4, &total);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "3456");
  EXPECT_EQ(total, 10);
  EXPECT_EQ((*store)->Read(std::string(64, 'a'), 0, 4, &total).status().code(),
            StatusCode::kNotFound);
}

TEST(CodeStoreTest, BytesThatDoNotHashToTheNameAreRefused) {
  testing::TempDir dir;
  auto store = CodeStore::Open((dir.path() / "code").string());
  ASSERT_TRUE(store.ok());
  const std::string sha = Sha256Hex("the real bytes");
  auto p = (*store)->Append(sha, 5, 0, "other", "alice");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("do not hash"), std::string::npos);
  EXPECT_FALSE((*store)->Has(sha));
  EXPECT_FALSE((*store)->Append("../../etc", 5, 0, "x", "alice").ok());
  EXPECT_FALSE((*store)->Append(sha, int64_t{200} << 20, 0, "x", "alice").ok());  // over 100 MB
}

// Issue 28: a job names only code its owner uploaded. Knowing the hash is not enough: anyone
// but an owner sends the bytes again (checked against the hash) before it is theirs too, and
// no upload writes into another uploader's unfinished one.
TEST(CodeStoreTest, AnArchiveIsItsUploadersAndAnotherUserMustProveTheBytes) {
  testing::TempDir dir;
  auto store = CodeStore::Open((dir.path() / "code").string());
  ASSERT_TRUE(store.ok());
  const std::string data = "alice's code";
  const std::string sha = Sha256Hex(data);
  const int64_t n = static_cast<int64_t>(data.size());
  // Bob starts an upload of the hash before alice finishes hers: his bytes never mix in.
  ASSERT_TRUE((*store)->Append(sha, n, 0, "garbage", "bob").ok());
  ASSERT_TRUE((*store)->Append(sha, n, 0, data.substr(0, 5), "alice").ok());
  auto p = (*store)->Append(sha, n, 5, data.substr(5), "alice");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->complete);
  EXPECT_TRUE((*store)->OwnedBy(sha, "alice"));
  EXPECT_FALSE((*store)->OwnedBy(sha, "bob"));
  // Bob names it without the bytes: not complete, not his.
  p = (*store)->Append(sha, n, 0, "", "bob");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->complete);
  EXPECT_FALSE((*store)->OwnedBy(sha, "bob"));
  // Wrong bytes: refused; alice's archive is untouched.
  EXPECT_FALSE((*store)->Append(sha, n, 0, std::string(data.size(), 'x'), "bob").ok());
  EXPECT_FALSE((*store)->OwnedBy(sha, "bob"));
  int64_t total = 0;
  auto back = (*store)->Read(sha, 0, 100, &total);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, data);
  // The same bytes: his too.
  p = (*store)->Append(sha, n, 0, data, "bob");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->complete);
  EXPECT_TRUE((*store)->OwnedBy(sha, "bob"));
  EXPECT_TRUE((*store)->OwnedBy(sha, "alice"));
  EXPECT_FALSE((*store)->OwnedBy(sha, "carol"));
  // Nothing of the uploads in progress is left.
  for (const auto& e : std::filesystem::directory_iterator(dir.path() / "code")) {
    EXPECT_NE(e.path().extension(), ".part") << e.path();
  }
}

// Issue 28: archives no kept job names are collected once their grace is over; a named one,
// or one stored within the grace, stays; abandoned uploads go at the next start.
TEST(CodeStoreTest, ArchivesNoJobNamesAreCollectedAndPartsGoAtStart) {
  testing::TempDir dir;
  const std::string code = (dir.path() / "code").string();
  auto store = CodeStore::Open(code);
  ASSERT_TRUE(store.ok());
  auto put = [&](const std::string& data) {
    const std::string sha = Sha256Hex(data);
    auto p = (*store)->Append(sha, static_cast<int64_t>(data.size()), 0, data, "alice");
    EXPECT_TRUE(p.ok() && p->complete);
    return sha;
  };
  const std::string named = put("named by a job");
  const std::string orphan = put("named by nothing");
  const std::string fresh = put("just uploaded");
  // An upload that never finished.
  const std::string partial = Sha256Hex("never finished");
  ASSERT_TRUE((*store)->Append(partial, 100, 0, "never", "alice").ok());
  auto age = [&](const std::string& sha) {
    const auto p = std::filesystem::path(code) / (sha + ".tar.gz");
    std::filesystem::last_write_time(
        p, std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
  };
  age(named);
  age(orphan);
  const auto removed = (*store)->Collect({named}, 3600);
  EXPECT_EQ(removed, std::vector<std::string>{orphan});
  EXPECT_TRUE((*store)->Has(named));
  EXPECT_TRUE((*store)->OwnedBy(named, "alice"));
  EXPECT_FALSE((*store)->Has(orphan));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(code) / (orphan + ".owners")));
  EXPECT_TRUE((*store)->Has(fresh));  // within its grace
  // Uploading it again starts the grace anew.
  age(fresh);
  put("just uploaded");
  EXPECT_TRUE((*store)->Collect({named}, 3600).empty());
  EXPECT_TRUE((*store)->Has(fresh));

  auto parts = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(code)) {
      n += e.path().extension() == ".part";
    }
    return n;
  };
  EXPECT_EQ(parts(), 1);  // within its grace
  store->reset();
  store = CodeStore::Open(code);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(parts(), 0);
  EXPECT_TRUE((*store)->Has(fresh));
}

// A replica that holds each Put until it is let go, noting the thread it ran on.
class HeldReplica : public CodeReplica {
 public:
  Status Put(const std::string&, const std::string&, const std::vector<std::string>&) override {
    MutexLock lock(mu_);
    put_thread_ = std::this_thread::get_id();
    entered_ = true;
    cv_.SignalAll();
    while (held_) cv_.Wait(mu_);
    return Status::Ok();
  }
  Status Get(const std::string&, std::string*, std::vector<std::string>*) override {
    return Status::NotFound("none");
  }
  Status Remove(const std::string&) override { return Status::Ok(); }
  StatusOr<std::vector<std::pair<std::string, int64_t>>> List() override {
    return std::vector<std::pair<std::string, int64_t>>{};
  }
  void WaitEntered() {
    MutexLock lock(mu_);
    while (!entered_) cv_.Wait(mu_);
  }
  void LetGo() {
    MutexLock lock(mu_);
    held_ = false;
    cv_.SignalAll();
  }
  std::thread::id put_thread() {
    MutexLock lock(mu_);
    return put_thread_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool held_ GUARDED_BY(mu_) = true;
  bool entered_ GUARDED_BY(mu_) = false;
  std::thread::id put_thread_ GUARDED_BY(mu_);
};

// Issue 44: an archive's last chunk (hashing up to 100 MB, handing it to the replica) is
// completed on the store's own thread, not the caller's (a gRPC callback thread), and
// without the store's mutex: other uploads and reads go on meanwhile.
TEST(CodeStoreTest, TheLastChunkIsCompletedOffTheCallersThreadAndMutex) {
  testing::TempDir dir;
  auto replica = std::make_unique<HeldReplica>();
  HeldReplica* held = replica.get();
  auto store = CodeStore::Open((dir.path() / "code").string(), std::move(replica));
  ASSERT_TRUE(store.ok());
  const std::string data = "the whole archive";
  const std::string sha = Sha256Hex(data);
  std::promise<StatusOr<CodeStore::Progress>> answer;
  std::thread::id caller;  // a gRPC callback thread, say
  auto appended = std::async(std::launch::async, [&] {
    caller = std::this_thread::get_id();
    (*store)->Append(sha, static_cast<int64_t>(data.size()), 0, data, "alice",
                     [&](StatusOr<CodeStore::Progress> p) { answer.set_value(std::move(p)); });
  });
  held->WaitEntered();  // the completion has hashed the bytes and waits on the replica
  // Meanwhile Append has returned, and the store's mutex is free: another upload's chunk and
  // a read are answered.
  const bool returned = appended.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  auto other = std::async(std::launch::async, [&] {
    const bool stored = (*store)->Has(sha);
    auto p = (*store)->Append(Sha256Hex("another"), 7, 0, "ano", "bob");
    return !stored && p.ok() && !p->complete;
  });
  const bool free = other.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  auto answered = answer.get_future();
  const bool early = answered.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready;
  held->LetGo();
  appended.wait();
  auto p = answered.get();
  ASSERT_TRUE(returned) << "Append waited for the archive's completion";
  ASSERT_TRUE(free) << "the store's mutex is held while the last chunk is completed";
  EXPECT_FALSE(early) << "answered before the replica kept the archive";
  EXPECT_NE(held->put_thread(), caller);
  EXPECT_TRUE(other.get());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->complete);
  EXPECT_TRUE((*store)->OwnedBy(sha, "alice"));
}

}  // namespace coordinator_code_store_test
}  // namespace convoy
