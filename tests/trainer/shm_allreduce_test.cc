// The shared-memory all-reduce between real processes: exact sums in chunks, identical on
// every rank; a dead peer is an error rather than a hang; setup failures reach every rank; a
// rank killed during setup leaves nothing in /dev/shm.
#include "trainer/shm_allreduce.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

namespace convoy::trainer {
namespace shm_allreduce_test {

namespace fs = std::filesystem;

// Setup through files in a directory (what a TCPStore does for the trainer).
SetupChannel FileChannel(const fs::path& dir) {
  SetupChannel c;
  c.set = [dir](const std::string& key, const std::string& value) {
    std::string name = key;
    for (char& ch : name) ch = ch == '/' ? '_' : ch;
    const fs::path tmp = dir / (name + ".tmp" + std::to_string(getpid()));
    std::ofstream(tmp) << value;
    fs::rename(tmp, dir / name);
  };
  c.get = [dir](const std::string& key) {
    std::string name = key;
    for (char& ch : name) ch = ch == '/' ? '_' : ch;
    for (;;) {
      std::ifstream in(dir / name);
      if (in) return std::string(std::istreambuf_iterator<char>(in), {});
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  return c;
}

std::vector<float> RankData(int rank, int64_t n) {
  std::mt19937 gen(static_cast<unsigned>(100 + rank));
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

class ShmAllReduceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convoy-shm-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    before_ = Segments();
  }
  // Convoy's segments now in /dev/shm.
  static std::set<std::string> Segments() {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator("/dev/shm")) {
      const std::string name = e.path().filename().string();
      if (name.rfind("convoy-allreduce-", 0) == 0) out.insert(name);
    }
    return out;
  }
  std::set<std::string> before_;
  void TearDown() override { fs::remove_all(dir_); }

  // Forks `world` ranks running `body(rank)`, whose return value is the exit code.
  std::vector<int> RunRanks(int world, const std::function<int(int)>& body) {
    std::vector<pid_t> pids;
    for (int r = 0; r < world; ++r) {
      pid_t pid = fork();
      if (pid == 0) _exit(body(r));
      pids.push_back(pid);
    }
    std::vector<int> codes;
    for (pid_t pid : pids) {
      int status = 0;
      waitpid(pid, &status, 0);
      codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    return codes;
  }
  fs::path dir_;
};

TEST_F(ShmAllReduceTest, SumsInChunksIdenticallyOnEveryRank) {
  constexpr int kWorld = 3;
  constexpr int64_t kN = 10000 + 7;  // three chunks of 4096 and an odd tail
  auto codes = RunRanks(kWorld, [&](int rank) {
    std::string why;
    auto shm =
        ShmAllReduce::Create(rank, kWorld, FileChannel(dir_), std::chrono::seconds(30), &why, 4096);
    if (shm == nullptr) return 10;
    std::vector<float> data = RankData(rank, kN);
    shm->SumAsync(data.data(), kN).get();
    // The expected sum, added in rank order as the segment does.
    std::vector<float> want = RankData(0, kN);
    for (int r = 1; r < kWorld; ++r) {
      std::vector<float> other = RankData(r, kN);
      for (int64_t i = 0; i < kN; ++i) want[i] += other[i];
    }
    if (std::memcmp(data.data(), want.data(), sizeof(float) * kN) != 0) return 11;
    // In place in the segment: a range, read from this rank's own result area.
    for (int64_t i = 0; i < 100; ++i) shm->slot()[50 + i] = static_cast<float>(rank + i);
    shm->SumRangeAsync(50, 100).get();
    for (int64_t i = 0; i < 100; ++i) {
      if (shm->result()[50 + i] != static_cast<float>(0 + 1 + 2 + 3 * i)) return 12;
    }
    return 0;
  });
  EXPECT_EQ(codes, std::vector<int>(kWorld, 0));
  // Nothing is left behind in /dev/shm: the name goes as soon as every rank has mapped it.
  EXPECT_EQ(Segments(), before_);
}

TEST_F(ShmAllReduceTest, ADeadPeerIsAnErrorNotAHang) {
  const fs::path message = dir_ / "message";
  auto codes = RunRanks(2, [&](int rank) {
    std::string why;
    auto shm =
        ShmAllReduce::Create(rank, 2, FileChannel(dir_), std::chrono::seconds(120), &why, 1024);
    if (shm == nullptr) return 10;
    if (rank == 1) _exit(3);  // dies without joining the sum
    std::vector<float> data(100, 1.0f);
    try {
      shm->SumAsync(data.data(), 100).get();
    } catch (const std::exception& e) {
      std::ofstream(message) << e.what();
      return 0;
    }
    return 11;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 3}));
  std::ifstream in(message);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("rank 1"), std::string::npos) << text;
  EXPECT_NE(text.find("has exited"), std::string::npos) << text;
  EXPECT_EQ(Segments(), before_);
}

TEST_F(ShmAllReduceTest, ASetupFailureReachesEveryRank) {
  // Far more than /dev/shm holds: rank 0 cannot reserve it, and every rank learns why.
  auto codes = RunRanks(2, [&](int rank) {
    std::string why;
    auto shm = ShmAllReduce::Create(rank, 2, FileChannel(dir_), std::chrono::seconds(30), &why,
                                    int64_t{1} << 40);
    if (shm != nullptr) return 10;
    return why.find("rank 0") != std::string::npos && why.find("/dev/shm") != std::string::npos
               ? 0
               : 11;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST_F(ShmAllReduceTest, RankZeroKilledDuringSetupLeavesNothing) {
  // Rank 1 waits until rank 0 has made the segment and published it, then kills rank 0 before
  // anyone has mapped it: the moment a named segment would have been left in /dev/shm.
  auto codes = RunRanks(2, [&](int rank) {
    if (rank == 0) {
      std::string why;
      ShmAllReduce::Create(0, 2, FileChannel(dir_), std::chrono::seconds(30), &why, 1 << 20);
      return 10;  // never: rank 1 never answers
    }
    const std::string v = FileChannel(dir_).get("convoy/shm/name");
    const size_t at = v.find("/proc/");
    if (v.rfind("ok ", 0) != 0 || at == std::string::npos) return 11;
    const pid_t rank0 = static_cast<pid_t>(std::atol(v.c_str() + at + 6));
    if (rank0 <= 0 || kill(rank0, SIGKILL) != 0) return 12;
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{128 + SIGKILL, 0}));
  EXPECT_EQ(Segments(), before_);
}

}  // namespace shm_allreduce_test
}  // namespace convoy::trainer
