// A fake coordinator at the network edge for worker tests: an in-process WorkerService on a
// free loopback port that acknowledges Register (with the heartbeat interval the test asks),
// records what the worker sends with the time it arrived, and sends what the test asks.
//
// Threading: gRPC's threads run Connect; the test's thread calls the rest.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "convoy/v1/worker.grpc.pb.h"

namespace convoy::testing {

class FakeWorkerService : public v1::WorkerService::Service {
 public:
  using Stream = grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>;

  explicit FakeWorkerService(int heartbeat_interval_ms = 100)
      : heartbeat_interval_ms_(heartbeat_interval_ms) {}

  grpc::Status Connect(grpc::ServerContext* context, Stream* stream) override {
    (void)context;
    v1::WorkerMessage msg;
    if (!stream->Read(&msg)) return grpc::Status::OK;
    if (!msg.has_register_()) {
      Record(msg);
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "register first");
    }
    v1::CoordinatorMessage ack;
    ack.mutable_register_ack()->set_heartbeat_interval_ms(heartbeat_interval_ms_);
    {
      // The stream is usable (Send) before the test sees the Register, not after.
      std::lock_guard<std::mutex> write_lock(write_mu_);
      stream->Write(ack);
      std::lock_guard<std::mutex> lock(mu_);
      stream_ = stream;
    }
    Record(msg);
    while (stream->Read(&msg)) Record(msg);
    std::lock_guard<std::mutex> write_lock(write_mu_);  // no Write is in flight on it
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = nullptr;
    return grpc::Status::OK;
  }

  // Sends `msg` on the current stream; false when there is none.
  bool Send(const v1::CoordinatorMessage& msg) {
    std::lock_guard<std::mutex> write_lock(write_mu_);
    Stream* stream;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stream = stream_;
    }
    return stream != nullptr && stream->Write(msg);
  }

  // The first message of kind `c` (it and every message before it are consumed).
  std::optional<v1::WorkerMessage> Next(
      v1::WorkerMessage::MsgCase c, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<v1::WorkerMessage> found;
    cv_.wait_for(lock, limit, [&] {
      while (!received_.empty()) {
        v1::WorkerMessage m = std::move(received_.front());
        received_.pop_front();
        if (m.msg_case() == c) {
          found = std::move(m);
          return true;
        }
      }
      return false;
    });
    return found;
  }

  // Every metric record of every MetricBatch received so far (Next does not consume them).
  std::vector<v1::MetricRecord> metric_records() {
    std::lock_guard<std::mutex> lock(mu_);
    return records_;
  }

  // When each heartbeat arrived (steady clock), oldest first.
  std::vector<std::chrono::steady_clock::time_point> heartbeat_times() {
    std::lock_guard<std::mutex> lock(mu_);
    return heartbeats_;
  }

 private:
  void Record(const v1::WorkerMessage& msg) {
    std::lock_guard<std::mutex> lock(mu_);
    if (msg.has_heartbeat()) heartbeats_.push_back(std::chrono::steady_clock::now());
    if (msg.has_metrics()) {
      records_.insert(records_.end(), msg.metrics().records().begin(),
                      msg.metrics().records().end());
    }
    received_.push_back(msg);
    cv_.notify_all();
  }

  const int heartbeat_interval_ms_;
  std::mutex write_mu_;  // serializes writes; taken before mu_
  std::mutex mu_;
  std::condition_variable cv_;
  Stream* stream_ = nullptr;  // guarded by mu_ (and write_mu_ to clear it)
  std::deque<v1::WorkerMessage> received_;
  std::vector<std::chrono::steady_clock::time_point> heartbeats_;
  std::vector<v1::MetricRecord> records_;
};

// The service above on a free loopback port, shut down when it goes.
class FakeCoordinatorServer {
 public:
  explicit FakeCoordinatorServer(int heartbeat_interval_ms = 100, int port = 0)
      : service_(std::make_unique<FakeWorkerService>(heartbeat_interval_ms)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
  }
  ~FakeCoordinatorServer() {
    if (server_)
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }
  bool ok() const { return server_ != nullptr && port_ > 0; }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  FakeWorkerService& service() { return *service_; }

 private:
  std::unique_ptr<FakeWorkerService> service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace convoy::testing
