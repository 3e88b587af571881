#include "coordinator/rpc/join_service.h"

#include <spdlog/spdlog.h>

#include "common/util.h"

namespace convoy {

grpc::ServerUnaryReactor* JoinServiceImpl::GetClusterInfo(grpc::CallbackServerContext* context,
                                                          const v1::GetClusterInfoRequest*,
                                                          v1::ClusterInfo* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JoinService/GetClusterInfo");
  if (!who.ok()) return FinishNow(context, who.status());
  if (ca_ == nullptr) {
    return FinishNow(context, Status::FailedPrecondition(
                                  "this coordinator runs --insecure: it has no cluster CA"));
  }
  resp->set_ca_pem(ca_->ca.cert_pem);
  resp->set_ca_fingerprint(ca_->fingerprint);
  resp->set_cluster_id(ca_->cluster_id);
  return FinishNow(context, Status::Ok());
}

Status JoinServiceImpl::Issue(const std::string& name, const std::string& csr_pem,
                              v1::JoinResponse* resp) {
  if (ca_ == nullptr) {
    return Status::FailedPrecondition(
        "this coordinator runs --insecure: it issues no certificates");
  }
  if (ca_->ca.key_pem.empty()) {
    return Status::FailedPrecondition(
        "this coordinator uses the operator's own PKI (--tls-ca): give the worker --tls-cert, "
        "--tls-key and --tls-ca instead of a join token");
  }
  const int64_t now = clock_.NowUnixMs() / 1000;
  CertTemplate t;
  t.common_name = name;
  t.client = true;
  t.not_before_s = now - 300;  // clock skew between hosts
  t.not_after_s = now + ca_->worker_cert_ttl_s;
  auto cert = SignCertificateRequest(ca_->ca, csr_pem, t);
  if (!cert.ok()) return Status::InvalidArgument("csr_pem: " + cert.status().message());
  resp->set_cert_pem(*cert);
  resp->set_ca_pem(ca_->ca.cert_pem);
  resp->set_not_after_unix_s(t.not_after_s);
  return Status::Ok();
}

grpc::ServerUnaryReactor* JoinServiceImpl::Join(grpc::CallbackServerContext* context,
                                                const v1::JoinRequest* req,
                                                v1::JoinResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JoinService/Join");
  if (!who.ok()) return FinishNow(context, who.status());
  if (!IsValidName(req->name())) {
    return FinishNow(context,
                     Status::InvalidArgument("name: '" + req->name() +
                                             "' is not valid: use 1-63 of [A-Za-z0-9._-]"));
  }
  if (admission_ == nullptr) return FinishNow(context, Issue(req->name(), req->csr_pem(), resp));
  bool malformed = false;
  const std::string token = Authorizer::BearerToken(*context, &malformed);
  auto joined = admission_->Join(token, req->name(), [&]() -> StatusOr<int64_t> {
    CONVOY_RETURN_IF_ERROR(Issue(req->name(), req->csr_pem(), resp));
    return resp->not_after_unix_s();
  });
  if (joined.ok()) {
    spdlog::info("worker {} joined from {} with join token {}{}", req->name(), context->peer(),
                 who->token_id, joined->name.empty() ? "" : " (bound to the name)");
  }
  return FinishNow(context, joined.status());
}

grpc::ServerUnaryReactor* JoinServiceImpl::Renew(grpc::CallbackServerContext* context,
                                                 const v1::RenewRequest* req,
                                                 v1::JoinResponse* resp) {
  auto who = auth_.Check(*context, "/convoy.v1.JoinService/Renew");
  if (!who.ok()) return FinishNow(context, who.status());
  if (who->kind != Principal::Kind::kWorker) {
    return FinishNow(context, Status::FailedPrecondition(
                                  "renewal needs the worker's current client certificate"));
  }
  Status issued = Issue(who->name, req->csr_pem(), resp);
  if (issued.ok() && tokens_ != nullptr) {
    issued = tokens_->RecordCertificate(who->name, resp->not_after_unix_s());
  }
  if (issued.ok()) spdlog::info("worker {} renewed its certificate", who->name);
  return FinishNow(context, issued);
}

}  // namespace convoy
