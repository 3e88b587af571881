#include "coordinator/rpc/grpc_service.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <utility>

#include "common/code_archive.h"
#include "coordinator/control/code_access.h"

namespace convoy {

// Every handler begins with auth_.Check naming its own method (coordinator/rpc/auth.h).

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                    const v1::SubmitJobRequest* req,
                                                    v1::SubmitJobResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/SubmitJob");
  if (!who.ok()) return FinishNow(context, who.status());
  Status ceiling = auth_.CheckPriority(*who, req->spec().priority());
  if (!ceiling.ok()) return FinishNow(context, ceiling);
  Status quota = auth_.TakeSubmit(*who);
  if (!quota.ok()) return FinishNow(context, quota);
  // Code its owner uploaded (admins: any). Knowing a hash is not having the code.
  Status code =
      CheckJobCode(code_, req->spec().code_sha256(), who->name, who->admin(), who->Describe());
  if (!code.ok()) return FinishNow(context, code);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const bool user = who->kind == Principal::Kind::kUser;
  const std::string owner = user ? who->name : "";
  const std::string role = user ? RoleName(who->role) : "";
  coordinator_.Submit(req->spec(), owner, role, req->request_id(),
                      [reactor, resp](const StatusOr<std::string>& id) {
                        if (!id.ok()) {
                          reactor->Finish(ToGrpc(id.status()));
                          return;
                        }
                        resp->set_job_id(*id);
                        reactor->Finish(grpc::Status::OK);
                      });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                 const v1::GetJobRequest* req, v1::Job* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/GetJob");
  if (!who.ok()) return FinishNow(context, who.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Only what is durable: a restart never takes back what this answer showed.
  coordinator_.GetCommitted(req->job_id(), [reactor, resp, who = *who](StatusOr<v1::Job> job) {
    if (job.ok()) {
      Authorizer::Redact(who, &*job);
      *resp = std::move(*job);
    }
    reactor->Finish(ToGrpc(job.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJobMetrics(grpc::CallbackServerContext* context,
                                                        const v1::GetJobMetricsRequest* req,
                                                        v1::JobMetrics* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/GetJobMetrics");
  if (!who.ok()) return FinishNow(context, who.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto metrics = coordinator_.GetMetrics(req->job_id());
  if (metrics.ok()) *resp = std::move(*metrics);
  reactor->Finish(ToGrpc(metrics.status()));
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* req,
                                                   v1::ListJobsResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/ListJobs");
  if (!who.ok()) return FinishNow(context, who.status());
  auto query = ParseJobQuery(*req);
  if (!query.ok()) return FinishNow(context, query.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  coordinator_.ListPageCommitted(*query, [reactor, resp, who = *who](JobManager::JobPage page) {
    for (v1::Job& job : page.jobs) {
      Authorizer::Redact(who, &job);
      *resp->add_jobs() = std::move(job);
    }
    resp->set_next_page_token(std::move(page.next_page_token));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* req,
                                                    v1::Job* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/CancelJob");
  if (!who.ok()) return FinishNow(context, who.status());
  if (!who->admin()) {
    auto job = coordinator_.Get(req->job_id());
    if (!job.ok()) return FinishNow(context, job.status());
    Status mine = Authorizer::CheckOwner(*who, *job, Right::kJobsCancel);
    if (!mine.ok()) return FinishNow(context, mine);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string by = who->kind == Principal::Kind::kUser ? who->name : "";
  coordinator_.Cancel(
      req->job_id(), req->reason(), by,
      [reactor, resp](const StatusOr<v1::Job>& job) {
        if (job.ok()) *resp = *job;
        reactor->Finish(ToGrpc(job.status()));
      },
      req->cascade());
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::DeleteJob(grpc::CallbackServerContext* context,
                                                    const v1::DeleteJobRequest* req,
                                                    v1::DeleteJobResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/DeleteJob");
  if (!who.ok()) return FinishNow(context, who.status());
  if (!who->admin()) {
    auto job = coordinator_.Get(req->job_id());
    if (!job.ok()) return FinishNow(context, job.status());
    Status mine = Authorizer::CheckOwner(*who, *job, Right::kJobsDelete);
    if (!mine.ok()) return FinishNow(context, mine);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string by = who->kind == Principal::Kind::kUser ? who->name : "";
  coordinator_.Delete(
      req->job_id(), by,
      [reactor, resp, id = req->job_id()](const StatusOr<std::vector<std::string>>& workers) {
        if (workers.ok()) {
          resp->set_job_id(id);
          for (const std::string& w : *workers) resp->add_workers(w);
        }
        reactor->Finish(ToGrpc(workers.status()));
      });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                      const v1::ListWorkersRequest* req,
                                                      v1::ListWorkersResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/ListWorkers");
  if (!who.ok()) return FinishNow(context, who.status());
  auto query = ParseWorkerQuery(*req);
  if (!query.ok()) return FinishNow(context, query.status());
  JobManager::WorkerPage page = coordinator_.ListWorkersPage(*query);
  for (v1::WorkerInfo& w : page.workers) *resp->add_workers() = std::move(w);
  resp->set_next_page_token(std::move(page.next_page_token));
  return FinishNow(context, Status::Ok());
}

grpc::ServerUnaryReactor* JobServiceImpl::DrainWorker(grpc::CallbackServerContext* context,
                                                      const v1::DrainWorkerRequest* req,
                                                      v1::WorkerInfo* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/DrainWorker");
  if (!who.ok()) return FinishNow(context, who.status());
  if (req->now() && !req->drain()) {
    return FinishNow(context, Status::InvalidArgument("now: only a drain can be --now"));
  }
  // Taken once the request is known to go ahead: a call's default reactor is taken once
  // (gRPC asserts on a second DefaultReactor() in builds with assertions, TSAN's included).
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string by = who->kind == Principal::Kind::kUser ? who->name : "";
  coordinator_.SetDrained(req->name(), req->drain(), by, req->now(),
                          [reactor, resp](const StatusOr<v1::WorkerInfo>& info) {
                            if (info.ok()) *resp = *info;
                            reactor->Finish(ToGrpc(info.status()));
                          });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::CordonWorker(grpc::CallbackServerContext* context,
                                                       const v1::CordonWorkerRequest* req,
                                                       v1::WorkerInfo* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/CordonWorker");
  if (!who.ok()) return FinishNow(context, who.status());
  if (req->name().empty()) {
    return FinishNow(context, Status::InvalidArgument("name: the worker is required"));
  }
  if (!req->cordon() && !req->reason().empty()) {
    return FinishNow(context, Status::InvalidArgument("reason: only a cordon has a reason"));
  }
  if (req->reason().size() > 1024) {
    return FinishNow(context, Status::InvalidArgument("reason: at most 1024 bytes"));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string by = who->kind == Principal::Kind::kUser ? who->name : "";
  coordinator_.SetCordoned(req->name(), req->cordon(), req->reason(), by,
                           [reactor, resp](const StatusOr<v1::WorkerInfo>& info) {
                             if (info.ok()) *resp = *info;
                             reactor->Finish(ToGrpc(info.status()));
                           });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::ForgetWorker(grpc::CallbackServerContext* context,
                                                       const v1::ForgetWorkerRequest* req,
                                                       v1::ForgetWorkerResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/ForgetWorker");
  if (!who.ok()) return FinishNow(context, who.status());
  if (req->name().empty()) {
    return FinishNow(context, Status::InvalidArgument("name: the worker to forget is required"));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string by = who->kind == Principal::Kind::kUser ? who->name : "";
  forgetter_->Forget(req->name(), by, [reactor, resp](const WorkerForgetter::Outcome& outcome) {
    if (outcome.forgotten) {
      *resp->mutable_worker() = outcome.forgotten->worker;
      for (const std::string& id : outcome.forgotten->abandoned_file_deletions) {
        resp->add_abandoned_file_deletions(id);
      }
    }
    reactor->Finish(ToGrpc(outcome.status));
  });
  return reactor;
}

// ---- Code archives (common/code_archive.h)

grpc::ServerUnaryReactor* JobServiceImpl::UploadCode(grpc::CallbackServerContext* context,
                                                     const v1::UploadCodeRequest* req,
                                                     v1::UploadCodeResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/UploadCode");
  if (!who.ok()) return FinishNow(context, who.status());
  if (code_ == nullptr) {
    return FinishNow(context, Status::FailedPrecondition("this coordinator keeps no code"));
  }
  if (static_cast<int64_t>(req->data().size()) > kCodeChunkBytes) {
    return FinishNow(context, Status::InvalidArgument("data: a chunk is at most 4 MiB"));
  }
  // A new archive's first chunk: within the archives its uploader may keep.
  if (req->offset() == 0 && auth_.ArchiveLimitFor(*who) > 0 &&
      !code_->OwnedBy(req->sha256(), who->name)) {
    Status kept = auth_.CheckArchivesKept(*who, code_->CountOwnedBy(who->name));
    if (!kept.ok()) return FinishNow(context, kept);
  }
  Status quota = auth_.TakeUpload(*who, static_cast<int64_t>(req->data().size()));
  if (!quota.ok()) return FinishNow(context, quota);
  // File I/O on a callback thread: bounded by the chunk size; never under the state lock. The
  // last chunk is hashed and replicated on the code store's thread, which answers.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const bool last = req->offset() + static_cast<int64_t>(req->data().size()) == req->total_size();
  code_->Append(req->sha256(), req->total_size(), req->offset(), req->data(), who->name,
                [reactor, resp, last, sha = req->sha256(), total = req->total_size(),
                 uploader = who->Describe()](StatusOr<CodeStore::Progress> progress) {
                  if (progress.ok()) {
                    resp->set_received(progress->received);
                    resp->set_complete(progress->complete);
                    if (progress->complete && last) {
                      spdlog::info("code archive {} ({} bytes) stored for {}", sha, total,
                                   uploader);
                    }
                  }
                  reactor->Finish(ToGrpc(progress.status()));
                });
  return reactor;
}

// ---- The web UI's login link (coordinator/web/ui_sessions.h)

grpc::ServerUnaryReactor* JobServiceImpl::CreateUiLogin(grpc::CallbackServerContext* context,
                                                        const v1::CreateUiLoginRequest*,
                                                        v1::CreateUiLoginResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JobService/CreateUiLogin");
  if (!who.ok()) return FinishNow(context, who.status());
  if (!ui_login_) {
    return FinishNow(context, Status::FailedPrecondition(
                                  "this coordinator serves no web UI: start it with --ui-listen "
                                  "HOST:PORT"));
  }
  auto link = ui_login_(*who);
  if (link.ok()) *resp = std::move(*link);
  return FinishNow(context, link.status());
}

}  // namespace convoy
