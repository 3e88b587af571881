// Master ports reserved for attempts: held bound until the attempt is over, one port per
// attempt whatever the number of requests, released when it ended or never came.
#include "worker/exec/port_reservations.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <limits>

namespace convoy {
namespace worker_port_reservations_test {

// Whether a plain bind (no SO_REUSEADDR, as another program's bind(0) or connect would get)
// to `port` on loopback succeeds.
bool Bindable(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

TEST(PortReservationsTest, AnAttemptKeepsOnePortHeldUntilReleased) {
  FakeClock clock;
  PortReservations ports("127.0.0.1", clock);
  const AttemptKey a{"j-000001", 0, "uid-a"};
  auto first = ports.Reserve(a);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_GT(*first, 0);
  auto again = ports.Reserve(a);  // a repeated request
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  // Another job of the same id (another cluster's) is another attempt: another port.
  auto other = ports.Reserve({"j-000001", 0, "uid-b"});
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, *first);
  EXPECT_FALSE(Bindable(*first)) << "the reserved port is not held";
  ports.Release(a);
  EXPECT_TRUE(Bindable(*first));
}

TEST(PortReservationsTest, EndedAttemptsReleaseAtOnceAndAbsentOnesAfterTheHold) {
  FakeClock clock;
  PortReservations ports("127.0.0.1", clock);
  const AttemptKey running{"j-000001", 0, "u1"}, ended{"j-000002", 0, "u2"},
      absent{"j-000003", 0, "u3"};
  const int p_running = *ports.Reserve(running);
  const int p_ended = *ports.Reserve(ended);
  const int p_absent = *ports.Reserve(absent);
  auto use = [&](const AttemptKey& k) {
    if (k == running) return PortReservations::Use::kRunning;
    if (k == ended) return PortReservations::Use::kEnded;
    return PortReservations::Use::kNotHere;
  };
  EXPECT_EQ(ports.NextExpiryMs(use), clock.NowMonotonicMs() + PortReservations::kHoldMs + 1);
  ports.ReleaseUnused(use);
  EXPECT_TRUE(Bindable(p_ended));
  EXPECT_FALSE(Bindable(p_absent)) << "released before its launch could come";
  clock.AdvanceMs(PortReservations::kHoldMs + 1);
  ports.ReleaseUnused(use);
  EXPECT_TRUE(Bindable(p_absent));
  EXPECT_FALSE(Bindable(p_running));
  EXPECT_EQ(ports.NextExpiryMs(use), std::numeric_limits<int64_t>::max());
  ports.ReleaseAll();
  EXPECT_TRUE(Bindable(p_running));
}

TEST(PortReservationsTest, AnAddressOfAnotherMachineFallsBackToAnyAddress) {
  FakeClock clock;
  PortReservations ports("worker.example", clock);  // a name, not an address of this host
  auto port = ports.Reserve({"j-000001", 0, "u"});
  ASSERT_TRUE(port.ok()) << port.status().message();
  EXPECT_FALSE(Bindable(*port));
}

}  // namespace worker_port_reservations_test
}  // namespace convoy
