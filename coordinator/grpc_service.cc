#include "coordinator/grpc_service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <future>
#include <thread>

#include "common/util.h"
#include "coordinator/job_state_machine.h"

namespace convoy {

grpc::Status ToGrpc(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kInvalidArgument:
      return {grpc::StatusCode::INVALID_ARGUMENT, status.message()};
    case StatusCode::kNotFound:
      return {grpc::StatusCode::NOT_FOUND, status.message()};
    case StatusCode::kAlreadyExists:
      return {grpc::StatusCode::ALREADY_EXISTS, status.message()};
    case StatusCode::kFailedPrecondition:
      return {grpc::StatusCode::FAILED_PRECONDITION, status.message()};
    case StatusCode::kUnavailable:
      return {grpc::StatusCode::UNAVAILABLE, status.message()};
    case StatusCode::kInternal:
      return {grpc::StatusCode::INTERNAL, status.message()};
  }
  return {grpc::StatusCode::UNKNOWN, status.message()};
}

// ---- WorkerStreams

bool WorkerStreams::Send(const std::string& name, const v1::CoordinatorMessage& msg) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(name);
  if (it == sessions_.end()) return false;
  Session& s = *it->second;
  std::lock_guard<std::mutex> slock(s.mu);
  if (s.closed) return false;
  s.queue.push_back(msg);
  s.cv.notify_one();
  return true;
}

void WorkerStreams::Attach(const std::string& name, std::shared_ptr<Session> session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(name);
  if (it != sessions_.end()) {
    spdlog::warn("worker {} connected again; closing its previous stream", name);
    Close(*it->second);
  }
  sessions_[name] = std::move(session);
}

bool WorkerStreams::Detach(const std::string& name, const std::shared_ptr<Session>& session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(name);
  if (it == sessions_.end() || it->second != session) return false;
  sessions_.erase(it);
  return true;
}

void WorkerStreams::CloseAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [name, s] : sessions_) Close(*s);
}

void WorkerStreams::Close(Session& s) {
  std::lock_guard<std::mutex> slock(s.mu);
  if (s.closed) return;
  s.closed = true;
  s.cv.notify_all();
  if (s.context != nullptr) s.context->TryCancel();
}

// ---- WorkerService

grpc::Status WorkerServiceImpl::Connect(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>* stream) {
  v1::WorkerMessage first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  if (!first.has_register_()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "the first message must be register"};
  }
  const v1::Register& reg = first.register_();
  if (!IsValidName(reg.name())) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "register.name: '" + reg.name() + "' is not a valid worker name"};
  }
  if (reg.slots() < 0 || reg.slots() > 4096 || reg.cores() < 0) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "register.slots: out of range"};
  }
  const std::string name = reg.name();
  auto session = std::make_shared<WorkerStreams::Session>();
  session->context = context;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    streams_.Attach(name, session);
    v1::RegisterAck ack = jobs_.OnRegister(reg);
    v1::CoordinatorMessage msg;
    *msg.mutable_register_ack() = ack;
    std::lock_guard<std::mutex> slock(session->mu);
    session->queue.push_front(msg);
  }

  std::thread writer([session, stream, context] {
    for (;;) {
      v1::CoordinatorMessage msg;
      {
        std::unique_lock<std::mutex> lock(session->mu);
        session->cv.wait(lock, [&] { return session->closed || !session->queue.empty(); });
        if (session->closed) return;
        msg = std::move(session->queue.front());
        session->queue.pop_front();
      }
      if (!stream->Write(msg)) {
        WorkerStreams::Close(*session);
        context->TryCancel();
        return;
      }
    }
  });

  v1::WorkerMessage msg;
  while (stream->Read(&msg)) {
    if (msg.has_register_()) {
      spdlog::warn("worker {}: register on an open stream; ignored", name);
      continue;
    }
    std::lock_guard<std::mutex> lock(state_mu_);
    jobs_.OnWorkerMessage(name, msg);
  }
  WorkerStreams::Close(*session);
  writer.join();
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (streams_.Detach(name, session)) {
      spdlog::warn("worker {}: stream closed", name);
      jobs_.OnDisconnect(name);
    }
  }
  return grpc::Status::OK;
}

// ---- JobService

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* req,
                                       v1::SubmitJobResponse* resp) {
  std::lock_guard<std::mutex> lock(state_mu_);
  auto id = jobs_.Submit(req->spec());
  if (!id.ok()) return ToGrpc(id.status());
  resp->set_job_id(*id);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext*, const v1::GetJobRequest* req,
                                    v1::Job* resp) {
  std::lock_guard<std::mutex> lock(state_mu_);
  auto job = jobs_.Get(req->job_id());
  if (!job.ok()) return ToGrpc(job.status());
  *resp = std::move(*job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                                      v1::ListJobsResponse* resp) {
  std::lock_guard<std::mutex> lock(state_mu_);
  for (v1::Job& job : jobs_.List()) *resp->add_jobs() = std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* req,
                                       v1::Job* resp) {
  std::lock_guard<std::mutex> lock(state_mu_);
  auto job = jobs_.Cancel(req->job_id(), req->reason());
  if (!job.ok()) return ToGrpc(job.status());
  *resp = std::move(*job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*,
                                         v1::ListWorkersResponse* resp) {
  std::lock_guard<std::mutex> lock(state_mu_);
  for (v1::WorkerInfo& w : jobs_.ListWorkers()) *resp->add_workers() = std::move(w);
  return grpc::Status::OK;
}

namespace {

// Updates handed from JobManager (under the state lock) to a streaming call's thread.
struct WatchQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<v1::WatchJobResponse> updates;
  bool done = false;
};

}  // namespace

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* req,
                                      grpc::ServerWriter<v1::WatchJobResponse>* writer) {
  auto q = std::make_shared<WatchQueue>();
  uint64_t watch_id = 0;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    auto id = jobs_.Watch(req->job_id(), [q](const v1::WatchJobResponse& update, bool done) {
      std::lock_guard<std::mutex> qlock(q->mu);
      if (!done) q->updates.push_back(update);
      q->done = q->done || done;
      q->cv.notify_one();
    });
    if (!id.ok()) return ToGrpc(id.status());
    watch_id = *id;
  }
  bool ok = true;
  while (ok && !context->IsCancelled()) {
    std::deque<v1::WatchJobResponse> batch;
    bool done = false;
    {
      std::unique_lock<std::mutex> lock(q->mu);
      q->cv.wait_for(lock, std::chrono::milliseconds(500),
                     [&] { return q->done || !q->updates.empty(); });
      batch.swap(q->updates);
      done = q->done;
    }
    for (const auto& update : batch) {
      if (!writer->Write(update)) {
        ok = false;
        break;
      }
    }
    if (done) {
      // The final snapshot goes last.
      std::lock_guard<std::mutex> lock(state_mu_);
      auto job = jobs_.Get(req->job_id());
      if (job.ok() && ok) {
        v1::WatchJobResponse last;
        *last.mutable_job() = *job;
        writer->Write(last);
      }
      break;
    }
  }
  std::lock_guard<std::mutex> lock(state_mu_);
  jobs_.Unwatch(watch_id);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetLogs(grpc::ServerContext* context, const v1::GetLogsRequest* req,
                                     grpc::ServerWriter<v1::LogChunk>* writer) {
  constexpr int kChunk = 256 * 1024;
  int64_t offset = req->tail_bytes() > 0 ? -req->tail_bytes() : 0;
  int attempt = req->has_attempt() ? req->attempt() : -1;
  bool first = true;
  while (!context->IsCancelled()) {
    auto promise = std::make_shared<std::promise<StatusOr<v1::LogData>>>();
    auto future = promise->get_future();
    bool terminal = false;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      auto asked = jobs_.RequestLogs(
          req->job_id(), req->rank(), attempt, offset, kChunk,
          [promise](const StatusOr<v1::LogData>& data) { promise->set_value(data); });
      if (!asked.ok()) return first ? ToGrpc(asked.status()) : grpc::Status::OK;
      attempt = *asked;
      auto job = jobs_.Get(req->job_id());
      terminal = job.ok() && IsTerminal(job->state());
    }
    if (future.wait_for(std::chrono::seconds(15)) != std::future_status::ready) {
      return {grpc::StatusCode::UNAVAILABLE, "the worker did not answer the log request"};
    }
    StatusOr<v1::LogData> data = future.get();
    if (!data.ok()) return ToGrpc(data.status());
    if (!data->error().empty()) {
      return {grpc::StatusCode::NOT_FOUND, data->error()};
    }
    first = false;
    if (!data->data().empty()) {
      v1::LogChunk chunk;
      chunk.set_rank(req->rank());
      chunk.set_attempt(attempt);
      chunk.set_data(data->data());
      if (!writer->Write(chunk)) return grpc::Status::OK;
    }
    offset = data->next_offset();
    if (static_cast<int>(data->data().size()) >= kChunk) continue;
    if (!req->follow() || data->eof()) break;
    if (terminal && data->data().empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  return grpc::Status::OK;
}

}  // namespace convoy
