// Master ports reserved for attempts (ReservePort): each socket stays bound, not listening,
// until its attempt's ranks have ended. While it is, the kernel gives the port to no other
// bind(0) or outgoing connection, so two jobs starting together never get the same one, and
// rank 0's store can still listen on it, since it sets SO_REUSEADDR as torch's TCPStore does
// (a bound socket that is not listening does not conflict with one that is).
//
// Threading: not thread-safe; the supervisor thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "worker/host/attempt_key.h"

namespace convoy {

class PortReservations {
 public:
  // A port reserved for an attempt that never launches here (its placement was undone) is
  // released after this long, or at once by Release. The coordinator sends the Launch right
  // after the reservation comes back.
  static constexpr int64_t kHoldMs = 600 * 1000;

  // Where the attempt stands here, for ReleaseUnused and NextExpiryMs.
  enum class Use { kRunning, kEnded, kNotHere };
  using UseOf = std::function<Use(const AttemptKey&)>;

  // `address`: the worker's advertised address (ports are bound there first).
  PortReservations(std::string address, const Clock& clock);
  // Closes every socket.
  ~PortReservations();
  PortReservations(const PortReservations&) = delete;
  PortReservations& operator=(const PortReservations&) = delete;

  // The port held for `key`: the one reserved before (a repeated request gets the same port),
  // else a new one bound on the advertised address, or on any address when that is not an
  // IPv4 address of this machine (a name, NAT). UNAVAILABLE naming the bind that failed.
  StatusOr<int> Reserve(const AttemptKey& key);
  // Releases `key`'s, if any (a Kill of an attempt never launched here).
  void Release(const AttemptKey& key);
  // Releases those whose attempt has ended here, or that were held longer than kHoldMs for
  // an attempt that is not here (`use`).
  void ReleaseUnused(const UseOf& use);
  void ReleaseAll();
  // When the first reservation of an attempt that is not here expires (monotonic ms);
  // INT64_MAX when none will.
  int64_t NextExpiryMs(const UseOf& use) const;

 private:
  struct Held {
    int fd = -1;
    int port = 0;
    int64_t reserved_ms = 0;  // monotonic
  };
  const std::string address_;
  const Clock& clock_;
  std::map<AttemptKey, Held> held_;
};

}  // namespace convoy
