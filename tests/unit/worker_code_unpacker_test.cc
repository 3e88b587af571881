// Code archives are unpacked off the supervisor thread, one at a time, in order; a stop drops
// what is still queued.
#include "worker/files/code_unpacker.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include "common/code_archive.h"
#include "tests/support/temp_dir.h"

namespace convoy {
namespace worker_code_unpacker_test {

namespace fs = std::filesystem;

// Results as they arrive on the unpacking thread.
struct Results {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::string, StatusOr<int64_t>>> got;
  CodeUnpacker::Done For(const std::string& name) {
    return [this, name](StatusOr<int64_t> r) {
      std::lock_guard<std::mutex> lock(mu);
      got.emplace_back(name, std::move(r));
      cv.notify_all();
    };
  }
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] { return got.size() >= n; });
  }
};

TEST(CodeUnpackerTest, UnpacksInOrderAndSaysWhenAnArchiveIsMissing) {
  testing::TempDir work("code-unpacker");
  const std::string src = work / "src";
  fs::create_directories(src + "/pkg");
  std::ofstream(src + "/train.py") << "print('hi')\n";
  std::ofstream(src + "/pkg/util.py") << "x = 1\n";
  auto packed = PackCodeDirectory(src);
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  const std::string sha = "ab" + std::string(62, '0');
  fs::create_directories(work / "code");
  std::ofstream(CodeArchivePath(work.path().string(), sha), std::ios::binary) << packed->archive;
  fs::create_directories(work / "dest");

  Results results;
  CodeUnpacker unpacker(work.path().string(), nullptr);
  unpacker.Start();
  unpacker.Unpack(sha, work / "dest", -1, -1, results.For("first"));
  unpacker.Unpack("cd" + std::string(62, '0'), work / "dest", -1, -1, results.For("missing"));
  ASSERT_TRUE(results.WaitFor(2));
  ASSERT_EQ(results.got[0].first, "first");
  ASSERT_TRUE(results.got[0].second.ok()) << results.got[0].second.status().message();
  EXPECT_EQ(*results.got[0].second, 2);
  EXPECT_TRUE(fs::exists(work / "dest/pkg/util.py"));
  EXPECT_EQ(results.got[1].first, "missing");
  EXPECT_EQ(results.got[1].second.status().code(), StatusCode::kNotFound);
}

TEST(CodeUnpackerTest, StopWaitsForTheArchiveInHandAndNothingRunsAfterIt) {
  testing::TempDir work("code-unpacker");
  Results results;
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool in_hook = false, open = false;
  CodeUnpacker unpacker(work.path().string(), [&](const std::string&) {
    std::unique_lock<std::mutex> lock(gate_mu);
    in_hook = true;
    gate_cv.notify_all();
    gate_cv.wait(lock, [&] { return open; });
  });
  unpacker.Start();
  unpacker.Unpack("a", work / "x", -1, -1, results.For("in hand"));
  {
    std::unique_lock<std::mutex> lock(gate_mu);
    gate_cv.wait(lock, [&] { return in_hook; });
  }
  std::thread stopper([&] { unpacker.Stop(); });
  {
    std::lock_guard<std::mutex> lock(gate_mu);
    open = true;
    gate_cv.notify_all();
  }
  stopper.join();
  // The archive in hand was finished (its result given) before Stop returned.
  ASSERT_EQ(results.got.size(), 1u);
  EXPECT_EQ(results.got[0].first, "in hand");
  unpacker.Unpack("b", work / "x", -1, -1, results.For("after the stop"));
  unpacker.Stop();  // idempotent
  EXPECT_EQ(results.got.size(), 1u);
}

}  // namespace worker_code_unpacker_test
}  // namespace convoy
