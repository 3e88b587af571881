// The coordinator's own accept loop. gRPC 1.51's listener stops accepting for good the
// first time accept4 fails with EMFILE (FACTS.md), so the coordinator binds and accepts
// itself and hands each connection to the gRPC server through an ExternalConnectionAcceptor
// (which takes any server credentials, TLS included).
//
// Out of descriptors: it logs it once per episode, sheds the waiting connections (a spare
// descriptor kept for the purpose is released, the connection accepted and closed at once,
// the spare taken again) so that clients back off instead of hanging in the backlog, keeps
// serving the connections it has, and logs when it accepts again.
//
// Threading: one thread of its own (the accept loop); Start/Stop from the owner's thread.
#pragma once

#include <grpcpp/server_builder.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace convoy {

class Listener {
 public:
  // Binds `address` (HOST:PORT, [V6]:PORT; port 0 picks a free one) and listens. The
  // connections go to `acceptor` once Start is called.
  static StatusOr<std::unique_ptr<Listener>> Bind(const std::string& address);
  ~Listener();

  // The port bound (the chosen one when the address said 0).
  int port() const { return port_; }

  // Starts the accept loop; the gRPC server that owns `acceptor` must be started.
  void Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor);
  // Stops accepting and closes the listening socket. Idempotent.
  void Stop();

  // Connections shed because descriptors ran out (for tests and logs).
  uint64_t shed() const { return shed_.load(); }

 private:
  Listener(int fd, int port, int wake_fd) : fd_(fd), port_(port), wake_fd_(wake_fd) {}
  void Loop();

  const int fd_;
  const int port_;
  const int wake_fd_;  // eventfd: wakes the loop to stop
  int spare_fd_ = -1;  // released to shed a connection when descriptors run out
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::thread thread_;
  std::atomic<uint64_t> shed_{0};
  bool stopped_ = false;
};

}  // namespace convoy
