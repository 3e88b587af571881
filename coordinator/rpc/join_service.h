// JoinService (proto/convoy/v1/auth.proto) on gRPC's callback API: the cluster CA's
// certificate for anyone, a worker certificate for a join token, a renewed one for a
// worker's current certificate.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/pki.h"
#include "convoy/v1/auth.grpc.pb.h"
#include "coordinator/control/join_admission.h"
#include "coordinator/rpc/auth.h"
#include "coordinator/rpc/outbound.h"
#include "coordinator/store/token_store.h"

namespace convoy {

// The cluster's certificate authority as the coordinator holds it.
struct ClusterCa {
  // The CA's certificate and key; the key is empty when the operator brought their own PKI
  // (--tls-ca): then the coordinator issues nothing and Join answers FAILED_PRECONDITION.
  KeyAndCert ca;
  std::string fingerprint;
  // The cluster's id (coordinator/store/cluster_id.h), answered by GetClusterInfo.
  std::string cluster_id;
  // Lifetime of the client certificates it issues to workers (they renew at 2/3 of it).
  int64_t worker_cert_ttl_s = 24 * 3600;
};

// JoinService (proto/convoy/v1/auth.proto): the CA certificate for anyone, a worker
// certificate for a join token, a renewed one for a worker's current certificate.
class JoinServiceImpl final : public v1::JoinService::CallbackService {
 public:
  // `ca` null: --insecure, nothing to hand out. `connected(name)`: a worker of that name has
  // its stream open.
  JoinServiceImpl(Authorizer& auth, const ClusterCa* ca, TokenStore* tokens, const Clock& clock,
                  std::function<bool(const std::string&)> connected)
      : auth_(auth),
        ca_(ca),
        tokens_(tokens),
        clock_(clock),
        admission_(tokens != nullptr
                       ? std::make_unique<JoinAdmission>(*tokens, clock, std::move(connected))
                       : nullptr) {}

  grpc::ServerUnaryReactor* GetClusterInfo(grpc::CallbackServerContext* context,
                                           const v1::GetClusterInfoRequest* req,
                                           v1::ClusterInfo* resp) override;
  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context, const v1::JoinRequest* req,
                                 v1::JoinResponse* resp) override;
  grpc::ServerUnaryReactor* Renew(grpc::CallbackServerContext* context, const v1::RenewRequest* req,
                                  v1::JoinResponse* resp) override;

 private:
  Status Issue(const std::string& name, const std::string& csr_pem, v1::JoinResponse* resp);

  Authorizer& auth_;
  const ClusterCa* const ca_;
  TokenStore* const tokens_;
  const Clock& clock_;
  // Who may join as which name (null: --insecure).
  const std::unique_ptr<JoinAdmission> admission_;
};

}  // namespace convoy
