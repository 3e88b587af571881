// How the CLI reaches the coordinator: its channel and credentials, why a connection failed,
// and `convoy login`.
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <grpcpp/grpcpp.h>

#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "client/command_support.h"
#include "client/commands.h"
#include "client/format.h"
#include "common/coordinator_list.h"
#include "common/pki.h"
#include "common/util.h"
#include "convoy/v1/auth.grpc.pb.h"

namespace convoy {

CoordinatorClient ConnectToCoordinator(const ClientConfig& config, bool insecure_flag) {
  const std::string& target = config.coordinator;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 * 1024 * 1024);  // a Job with a long history
  args.SetMaxSendMessageSize(16 * 1024 * 1024);     // the coordinator's own bound
  // Notice a restarted coordinator quickly (gRPC's default backoff grows to 2 minutes), but
  // give a loaded coordinator time to accept: in gRPC 1.51 the min reconnect backoff is also
  // the connect timeout, and at 200 ms `convoy list` failed half the time against a
  // coordinator with 3,000 workers. A coordinator that is down refuses at once either way.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  CoordinatorClient c;
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (config.insecure) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = config.ca_pem;
    creds = grpc::SslCredentials(ssl);
    if (!config.token.empty()) {
      creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(config.token));
    }
  }
  // Several coordinators (one leads; followers do not listen): the first, from the last one
  // that answered, that accepts a connection, each dialled by its own name (CoordinatorList).
  auto coordinators = std::make_shared<CoordinatorList>(target);
  c.redial = [coordinators, creds, args] {
    return coordinators->Connect(
        [&](const std::string& one) {
          grpc::ChannelArguments own = args;
          if (coordinators->size() > 1) own.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
          return grpc::CreateCustomChannel(one, creds, own);
        },
        5000);
  };
  c.channel = c.redial();
  c.stub = v1::JobService::NewStub(c.channel);
  c.target = target;
  c.plaintext = config.insecure;
  c.plaintext_by_default = config.insecure && !insecure_flag;
  c.has_ca = !config.ca_pem.empty();
  c.has_token = !config.token.empty();
  return c;
}

namespace {

// A JoinService stub over TLS that verifies nothing: for what anyone may ask before trusting
// the coordinator (its CA, to be checked against a fingerprint; whether it speaks TLS).
std::unique_ptr<v1::JoinService::Stub> UnverifiedTlsJoinStub(const std::string& target) {
  grpc::experimental::TlsChannelCredentialsOptions opts;
  opts.set_verify_server_certs(false);
  opts.set_check_call_host(false);
  opts.set_certificate_verifier(std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
  return v1::JoinService::NewStub(
      grpc::CreateChannel(target, grpc::experimental::TlsCredentials(opts)));
}

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

std::optional<std::pair<int, std::string>> ExplainConnectFailure(const CoordinatorClient& c,
                                                                 const grpc::Status& st) {
  if (st.error_code() != grpc::StatusCode::UNAVAILABLE) return std::nullopt;
  const std::string& m = st.error_message();
  const std::string no_token =
      c.has_token ? "" : "no token (convoy login, --token or CONVOY_TOKEN), and ";
  if (!c.plaintext &&
      (Contains(m, "certificate verify failed") || Contains(m, "CERTIFICATE_VERIFY_FAILED"))) {
    return std::make_pair(
        static_cast<int>(kExitUnauthenticated),
        "not authenticated: " + no_token + "the coordinator's certificate is not trusted: " +
            (c.has_ca ? "it is not signed by the CA given (--ca, CONVOY_CA or the config "
                        "file); is " +
                            c.target + " the right cluster?"
                      : "pass the cluster's CA with --ca FILE (or CONVOY_CA), or log in with "
                        "`convoy login --ca-fingerprint SHA256:...`"));
  }
  if (!c.plaintext &&
      (Contains(m, "wrong version number") || Contains(m, "WRONG_VERSION_NUMBER"))) {
    return std::make_pair(static_cast<int>(kExitUsage),
                          "the coordinator at " + c.target +
                              " speaks plain text, not TLS (convoy-coordinator --insecure): "
                              "pass --insecure, without a token or CA");
  }
  if (!c.plaintext && Contains(m, "handshake")) {
    return std::make_pair(
        static_cast<int>(kExitUnauthenticated),
        "not authenticated: " + no_token + "the TLS handshake with the coordinator failed: " + m);
  }
  if (c.plaintext) {
    // Plain text to a coordinator that answers over TLS: what is missing is the credentials
    // (or, with --insecure, the flag is wrong), not the coordinator.
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    v1::ClusterInfo info;
    const bool tls = UnverifiedTlsJoinStub(CoordinatorList(c.target).current())
                         ->GetClusterInfo(&ctx, v1::GetClusterInfoRequest(), &info)
                         .ok();
    if (tls && c.plaintext_by_default) {
      return std::make_pair(static_cast<int>(kExitUnauthenticated),
                            "not authenticated: no token (convoy login, --token or "
                            "CONVOY_TOKEN): the coordinator at " +
                                c.target + " speaks TLS and needs a token and its CA (--ca)");
    }
    if (tls) {
      return std::make_pair(static_cast<int>(kExitUsage),
                            "--insecure: the coordinator at " + c.target +
                                " speaks TLS; give its CA and a token instead (--ca and --token, "
                                "or `convoy login`)");
    }
  }
  return std::nullopt;
}

StatusOr<std::string> FetchPinnedCa(const std::string& target, const std::string& fingerprint) {
  // Several coordinators: the first that answers (followers do not listen).
  CoordinatorList coordinators(target);
  v1::ClusterInfo info;
  grpc::Status st;
  for (size_t i = 0; i < coordinators.size(); ++i) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    st = UnverifiedTlsJoinStub(coordinators.current())
             ->GetClusterInfo(&ctx, v1::GetClusterInfoRequest(), &info);
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    coordinators.Next();
  }
  if (!st.ok()) return Status::Unavailable("cannot fetch the cluster CA: " + st.error_message());
  auto actual = CertificateFingerprint(info.ca_pem());
  if (!actual.ok()) return Status::Unavailable("the coordinator sent no usable CA certificate");
  if (!FingerprintMatches(fingerprint, *actual)) {
    return Status::InvalidArgument("the coordinator's CA " + *actual +
                                   " does not match --ca-fingerprint " + fingerprint +
                                   ": wrong cluster, or someone in the middle");
  }
  return info.ca_pem();
}

int LoginCommand(const ClientConfig& config, const std::string& path) {
  if (config.token.empty()) {
    std::cerr << "convoy login: --token is required (ask your admin: convoy-coordinator token "
                 "create --user YOU --role user)\n";
    return kExitUsage;
  }
  if (config.insecure || config.ca_pem.empty()) {
    std::cerr << "convoy login: --ca FILE or --ca-fingerprint SHA256:... is required\n";
    return kExitUsage;
  }
  CoordinatorClient c = ConnectToCoordinator(config);
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  v1::ListJobsRequest one;
  one.set_limit(1);
  v1::ListJobsResponse resp;
  grpc::Status st = c.stub->ListJobs(&ctx, one, &resp);
  if (!st.ok()) return RpcFailed(c, st, "login");
  Status saved = SaveClientConfig(path, config);
  if (!saved.ok()) {
    std::cerr << "convoy login: " << saved.message() << "\n";
    return kExitUsage;
  }
  std::cerr << "logged in to " << config.coordinator << "; wrote " << path << " (mode 0600)\n";
  return kExitOk;
}

}  // namespace convoy
