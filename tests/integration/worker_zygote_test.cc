// The warm trainer's side of the zygote protocol (rank_process/zygote_protocol.h), served from a
// forked child of this test with a rank_main of the test's own: exits are reported without
// waiting for a timer, and a rank never finds an earlier rank's request in the heap it
// inherits from the zygote.
#include <gtest/gtest.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "rank_process/zygote_protocol.h"

namespace convoy {
namespace worker_zygote_test {

// Exits 3 when the string argv[1] (written reversed, so that only the needle built here on
// the stack holds it forwards) is anywhere in this process's heap, else 0.
int ScanHeapMain(int argc, char** argv) {
  if (argc < 2) return 2;
  char needle[64] = {};
  const size_t n = std::min(strlen(argv[1]), sizeof(needle) - 1);
  for (size_t i = 0; i < n; ++i) needle[i] = argv[1][n - 1 - i];
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("[heap]") == std::string::npos) continue;
    unsigned long start = 0, end = 0;
    if (sscanf(line.c_str(), "%lx-%lx", &start, &end) != 2) continue;
    const char* begin = reinterpret_cast<const char*>(start);
    const char* stop = reinterpret_cast<const char*>(end);
    if (std::search(begin, stop, needle, needle + n) != stop) return 3;
  }
  return 0;
}

// Started by the test as a warm server (zygote::Start, which pads argv and environment as for
// the real trainer) with CONVOY_TEST_SERVE_ZYGOTE in its environment, this binary serves
// instead of running the tests (and so never starts another of itself).
struct ServeWhenStartedAsZygote {
  ServeWhenStartedAsZygote() {
    if (getenv("CONVOY_TEST_SERVE_ZYGOTE") == nullptr) return;
    // The heap as convoy-trainer's main sets it up: freed memory stays in the heap.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    _exit(zygote::Serve(3, &ScanHeapMain));
  }
} serve_when_started_as_zygote;

class ZygoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ASSERT_GT(n, 0);
    self[n] = '\0';
    std::string error;
    ASSERT_TRUE(zygote::Start(std::string(self),
                              {"PATH=/usr/bin:/bin", "CONVOY_TEST_SERVE_ZYGOTE=1"}, &z_, &error))
        << error;
  }
  void TearDown() override {
    close(z_.sock);  // the zygote leaves when the worker's end closes
    int status = 0;
    waitpid(z_.pid, &status, 0);
  }

  // Starts one rank and waits (up to 30 s) for its exit; returns its wait status, -1 if
  // it never started or never ended. With `error`, a rank that cannot start is expected: its
  // error is stored there and 0 returned.
  int RunRank(const std::vector<std::string>& argv, const std::vector<std::string>& env,
              const std::string& working_dir = "", std::string* failure = nullptr) {
    zygote::SpawnRequest req;
    req.argv = argv;
    req.env = env;
    req.working_dir = working_dir;
    int out[2];
    if (pipe(out) != 0) return -1;
    pid_t pid = -1;
    std::string error;
    bool gone = false;
    const bool ok = zygote::Spawn(z_, req, out[1], out[1], 30000, &pid, &exits_, &error, &gone);
    close(out[1]);
    close(out[0]);
    if (!ok && failure != nullptr && !gone) {
      *failure = error;
      return 0;
    }
    if (!ok) {
      ADD_FAILURE() << error;
      return -1;
    }
    for (int i = 0; i < 3000; ++i) {
      for (const auto& [p, status] : exits_) {
        if (p == pid) return status;
      }
      pollfd p{z_.sock, POLLIN, 0};
      poll(&p, 1, 10);  // the 'X' reply wakes it; the bound only ends a hung test
      bool ready = false;
      if (!zygote::Drain(z_, &exits_, &ready)) return -1;
    }
    return -1;
  }

  zygote::Process z_;
  std::vector<std::pair<pid_t, int>> exits_;
};

TEST_F(ZygoteTest, ARankFindsNoEarlierRanksRequestInItsHeap) {
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
  // The scan reads glibc's [heap]; a sanitizer's allocator keeps its chunks elsewhere, where
  // the scan (which finds even the rank's own environment in glibc's heap) sees nothing.
  GTEST_SKIP() << "the heap scan needs glibc's allocator, not a sanitizer's";
#endif
#endif
  const std::string secret = "convoy-secret-" + std::to_string(getpid()) + "-x7q";
  std::string reversed(secret.rbegin(), secret.rend());
  // The first request carries the secret at the end of a long working directory (where
  // neither the next, shorter packet nor the next request's short strings overwrite it),
  // which does not exist: the rank fails to start, and the request has been decoded in the
  // zygote all the same.
  std::string failure;
  ASSERT_EQ(
      RunRank({"r", "x"}, {"A=1"}, "/nonexistent/" + std::string(3000, 'y') + secret, &failure), 0);
  EXPECT_NE(failure.find("chdir /nonexistent/"), std::string::npos) << failure;
  const int second = RunRank({"r", reversed}, {"B=2"});
  ASSERT_TRUE(WIFEXITED(second)) << second;
  EXPECT_EQ(WEXITSTATUS(second), 0) << "a later rank found an earlier rank's request";
  // (The scan does find what is there: its own environment, put in the heap by putenv.)
  const int self = RunRank({"r", reversed}, {"M=" + secret});
  ASSERT_TRUE(WIFEXITED(self)) << self;
  EXPECT_EQ(WEXITSTATUS(self), 3);
}

}  // namespace worker_zygote_test
}  // namespace convoy
