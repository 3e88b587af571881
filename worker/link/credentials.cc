#include "worker/link/credentials.h"
#include "common/util.h"

#include <fcntl.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "convoy/v1/auth.grpc.pb.h"

namespace convoy {
namespace {

StatusOr<std::string> ReadFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(flag + " " + path + ": " + std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes `path` + ".tmp" (created with `mode`, flushed to disk); the caller renames it.
Status WriteTemp(const std::string& path, const std::string& data, mode_t mode) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return Status::Unavailable(tmp + ": " + std::strerror(errno));
  bool ok = fchmod(fd, mode) == 0;
  size_t done = 0;
  while (ok && done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  if (!ok) return Status::Unavailable(tmp + ": " + std::strerror(saved));
  return Status::Ok();
}

void SyncDir(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  fsync(fd);
  close(fd);
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

// The stored set, in the order Store renames it into place.
constexpr const char* kStored[] = {"ca.crt", "worker.key", "worker.crt"};

std::shared_ptr<grpc::ChannelCredentials> Mutual(const std::string& key, const std::string& cert,
                                                 const std::string& ca) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ca;
  ssl.pem_private_key = key;
  ssl.pem_cert_chain = cert;
  return grpc::SslCredentials(ssl);
}

std::chrono::system_clock::time_point Deadline(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

// Worth another try: the coordinator is down, restarting or busy.
bool Retryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED || code == grpc::StatusCode::ABORTED;
}

// When a certificate expires, for a log line: "2026-11-26T23:19:00Z (in 23h59m)".
std::string Expiry(int64_t not_after_s, int64_t now_s) {
  const std::string when = UtcIso8601(not_after_s);
  const int64_t left = not_after_s - now_s;
  if (left <= 0) return when + " (expired)";
  const int64_t d = left / 86400, h = left % 86400 / 3600, m = left % 3600 / 60;
  std::string in = d > 0   ? std::to_string(d) + "d" + std::to_string(h) + "h"
                   : h > 0 ? std::to_string(h) + "h" + std::to_string(m) + "m"
                           : std::to_string(std::max<int64_t>(m, 1)) + "m";
  return when + " (in " + in + ")";
}

}  // namespace

int64_t RenewAtS(int64_t not_before_s, int64_t not_after_s) {
  return not_before_s + (not_after_s - not_before_s) * 2 / 3;
}

int64_t RenewAtS(const CertInfo& cert) { return RenewAtS(cert.not_before_s, cert.not_after_s); }

Status CheckWorkerCertificate(const std::string& key_pem, const std::string& cert_pem,
                              const std::string& ca_pem, const std::string& name,
                              const std::string& ca_fingerprint, int64_t now_s) {
  auto info = InspectCertificate(cert_pem);
  if (!info.ok()) return Status::InvalidArgument("certificate: " + info.status().message());
  if (info->common_name != name) {
    return Status::InvalidArgument("the certificate is for '" + info->common_name + "', not '" +
                                   name + "'");
  }
  if (!ca_fingerprint.empty()) {
    auto fp = CertificateFingerprint(ca_pem);
    if (!fp.ok() || !FingerprintMatches(ca_fingerprint, *fp)) {
      return Status::InvalidArgument("the CA " + (fp.ok() ? *fp : std::string("(unreadable)")) +
                                     " is not the CA of --ca-fingerprint " + ca_fingerprint);
    }
  }
  Status verified = VerifyCertificate(cert_pem, ca_pem, now_s);
  if (!verified.ok()) return Status::InvalidArgument("certificate: " + verified.message());
  Status match = KeyMatchesCertificate(key_pem, cert_pem);
  if (!match.ok()) return Status::InvalidArgument("key: " + match.message());
  return Status::Ok();
}

StatusOr<std::unique_ptr<WorkerCredentials>> WorkerCredentials::Create(const CredentialOptions& o,
                                                                       const Clock& clock,
                                                                       int64_t join_deadline_ms) {
  std::unique_ptr<WorkerCredentials> c(new WorkerCredentials(o, clock));
  if (o.insecure) {
    MutexLock lock(c->mu_);
    c->creds_ = grpc::InsecureChannelCredentials();
    return c;
  }
  const int64_t now_s = clock.NowUnixMs() / 1000;
  if (!o.tls_cert.empty()) {
    auto cert = ReadFile(o.tls_cert, "--tls-cert");
    if (!cert.ok()) return cert.status();
    auto key = ReadFile(o.tls_key, "--tls-key");
    if (!key.ok()) return key.status();
    auto ca = ReadFile(o.tls_ca, "--tls-ca");
    if (!ca.ok()) return ca.status();
    auto info = InspectCertificate(*cert);
    if (!info.ok()) {
      return Status::InvalidArgument("--tls-cert " + o.tls_cert + ": " + info.status().message());
    }
    auto ca_info = InspectCertificate(*ca);
    if (!ca_info.ok()) {
      return Status::InvalidArgument("--tls-ca " + o.tls_ca + ": " + ca_info.status().message());
    }
    Status match = KeyMatchesCertificate(*key, *cert);
    if (!match.ok()) {
      return Status::InvalidArgument("--tls-key is not the key of --tls-cert: " + match.message());
    }
    Status verified = VerifyCertificate(*cert, *ca, now_s);
    if (!verified.ok()) {
      return Status::InvalidArgument("--tls-cert does not verify against --tls-ca: " +
                                     verified.message());
    }
    if (info->common_name != o.name) {
      return Status::InvalidArgument("--tls-cert is for '" + info->common_name +
                                     "' but --name is '" + o.name +
                                     "': the coordinator knows a worker by its certificate");
    }
    c->Use(*key, *cert, *ca);
    return c;
  }
  c->renewable_ = true;
  Status stored = c->LoadStored();
  if (stored.ok()) {
    spdlog::info("TLS: using the certificate stored in {}/tls, valid until {}", o.work_dir,
                 Expiry(c->not_after_s(), now_s));
    return c;
  }
  if (o.join_token.empty() || o.ca_fingerprint.empty()) {
    return Status::InvalidArgument(
        "no credentials: join the cluster with --join-token and --ca-fingerprint (from "
        "`convoy-coordinator token create --role worker` and `convoy-coordinator init`), or "
        "pass --tls-cert, --tls-key and --tls-ca, or --insecure for a coordinator on loopback" +
        (stored.message().empty() ? std::string() : " (stored: " + stored.message() + ")"));
  }
  Status joined = c->Join(join_deadline_ms);
  if (!joined.ok()) return joined;
  return c;
}

WorkerCredentials::~WorkerCredentials() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  stop_cv_.SignalAll();
  if (renewal_.joinable()) renewal_.join();
}

void WorkerCredentials::Use(const std::string& key, const std::string& cert,
                            const std::string& ca) {
  auto info = InspectCertificate(cert);
  MutexLock lock(mu_);
  key_pem_ = key;
  cert_pem_ = cert;
  ca_pem_ = ca;
  if (info.ok()) info_ = *info;
  creds_ = Mutual(key, cert, ca);
  ++generation_;
}

std::shared_ptr<grpc::ChannelCredentials> WorkerCredentials::Current(uint64_t* generation) {
  MutexLock lock(mu_);
  if (generation != nullptr) *generation = generation_;
  return creds_;
}

int64_t WorkerCredentials::not_after_s() {
  MutexLock lock(mu_);
  return info_.not_after_s;
}

Status WorkerCredentials::LoadStored() {
  const std::string dir = options_.work_dir + "/tls";
  const int64_t now_s = clock_.NowUnixMs() / 1000;
  // A Store cut short (a crash between its renames) left the rest of the new set in *.tmp:
  // complete it when the mix is a whole, valid set; otherwise the tmps are debris.
  bool pending = false;
  for (const char* f : kStored) pending = pending || Exists(dir + "/" + f + ".tmp");
  if (pending) {
    std::string pem[3];
    bool read = true;
    for (int i = 0; i < 3; ++i) {
      const std::string path = dir + "/" + kStored[i];
      auto text = ReadFile(Exists(path + ".tmp") ? path + ".tmp" : path, "stored");
      read = read && text.ok();
      if (text.ok()) pem[i] = *text;
    }
    const bool whole = read && CheckWorkerCertificate(pem[1], pem[2], pem[0], options_.name,
                                                      options_.ca_fingerprint, now_s)
                                   .ok();
    for (const char* f : kStored) {
      const std::string path = dir + "/" + f;
      if (!Exists(path + ".tmp")) continue;
      if (whole) {
        rename((path + ".tmp").c_str(), path.c_str());
      } else {
        unlink((path + ".tmp").c_str());
      }
    }
    SyncDir(dir);
    if (whole) spdlog::warn("TLS: completed the interrupted store of a certificate in {}", dir);
  }
  auto ca = ReadFile(dir + "/ca.crt", "stored CA");
  auto key = ReadFile(dir + "/worker.key", "stored key");
  auto cert = ReadFile(dir + "/worker.crt", "stored certificate");
  if (!key.ok() || !cert.ok() || !ca.ok()) return Status::NotFound("");
  Status valid =
      CheckWorkerCertificate(*key, *cert, *ca, options_.name, options_.ca_fingerprint, now_s);
  if (!valid.ok()) return Status::InvalidArgument(dir + ": " + valid.message());
  Use(*key, *cert, *ca);
  return Status::Ok();
}

Status WorkerCredentials::Store(const std::string& key, const std::string& cert,
                                const std::string& ca) {
  const std::string dir = options_.work_dir + "/tls";
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Unavailable(dir + ": " + std::strerror(errno));
  }
  chmod(dir.c_str(), 0700);
  // Key and certificate must change together: all three are written first, then renamed
  // (LoadStored completes a set whose renames a crash cut short).
  const std::string* pem[] = {&ca, &key, &cert};
  const mode_t mode[] = {0644, 0600, 0644};
  for (int i = 0; i < 3; ++i) {
    CONVOY_RETURN_IF_ERROR(WriteTemp(dir + "/" + kStored[i], *pem[i], mode[i]));
  }
  for (const char* f : kStored) {
    const std::string path = dir + "/" + f;
    if (rename((path + ".tmp").c_str(), path.c_str()) != 0) {
      return Status::Unavailable(path + ": " + std::strerror(errno));
    }
  }
  SyncDir(dir);
  return Status::Ok();
}

Status WorkerCredentials::Join(int64_t deadline_ms) {
  // Real time: the waits between tries are real sleeps.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  int backoff_ms = 500;
  for (;;) {
    const std::string target = coordinators_.current();
    // 1. The CA, trusted by its fingerprint alone.
    grpc::experimental::TlsChannelCredentialsOptions unverified;
    unverified.set_verify_server_certs(false);
    unverified.set_check_call_host(false);
    unverified.set_certificate_verifier(
        std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
    auto probe = v1::JoinService::NewStub(
        grpc::CreateChannel(target, grpc::experimental::TlsCredentials(unverified)));
    grpc::ClientContext info_ctx;
    info_ctx.set_deadline(Deadline(10));
    v1::ClusterInfo info;
    grpc::Status st = probe->GetClusterInfo(&info_ctx, v1::GetClusterInfoRequest(), &info);
    if (st.ok()) {
      auto actual = CertificateFingerprint(info.ca_pem());
      if (!actual.ok()) return Status::Unavailable("the coordinator sent no usable CA");
      if (!FingerprintMatches(options_.ca_fingerprint, *actual)) {
        return Status::InvalidArgument(
            "the coordinator's CA " + *actual + " does not match --ca-fingerprint " +
            options_.ca_fingerprint + ": wrong cluster, or someone in the middle");
      }
      // 2. The certificate, on a channel that verifies the coordinator with that CA.
      auto key = NewPrivateKey();
      if (!key.ok()) return key.status();
      auto csr = NewCertificateRequest(*key, options_.name);
      if (!csr.ok()) return csr.status();
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = info.ca_pem();
      auto creds = grpc::CompositeChannelCredentials(
          grpc::SslCredentials(ssl), grpc::AccessTokenCredentials(options_.join_token));
      auto stub = v1::JoinService::NewStub(grpc::CreateChannel(target, creds));
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline(10));
      v1::JoinRequest req;
      req.set_name(options_.name);
      req.set_csr_pem(*csr);
      v1::JoinResponse resp;
      st = stub->Join(&ctx, req, &resp);
      if (st.ok()) {
        Status verified =
            CheckWorkerCertificate(*key, resp.cert_pem(), info.ca_pem(), options_.name,
                                   options_.ca_fingerprint, clock_.NowUnixMs() / 1000);
        if (!verified.ok()) {
          return Status::Unavailable("the coordinator issued an unusable certificate: " +
                                     verified.message());
        }
        CONVOY_RETURN_IF_ERROR(Store(*key, resp.cert_pem(), info.ca_pem()));
        Use(*key, resp.cert_pem(), info.ca_pem());
        coordinators_.MarkGood();
        spdlog::info("joined the cluster (CA {}): certificate for '{}' valid until {}", *actual,
                     options_.name, Expiry(resp.not_after_unix_s(), clock_.NowUnixMs() / 1000));
        return Status::Ok();
      }
      if (st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
          st.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
        return Status::InvalidArgument("join token refused: " + st.error_message());
      }
      if (!Retryable(st.error_code())) {
        return Status::InvalidArgument("the coordinator refused to join this worker: " +
                                       st.error_message());
      }
    } else if (!Retryable(st.error_code())) {
      return Status::InvalidArgument("the coordinator gave no cluster CA: " + st.error_message());
    }
    if (std::chrono::steady_clock::now() >= give_up) {
      return Status::Unavailable("cannot join: " + st.error_message());
    }
    // Several coordinators: the next one at once until every one has failed in a row.
    if (coordinators_.size() > 1 && !coordinators_.Next()) continue;
    spdlog::warn("cannot reach the coordinator to join ({}); retrying", st.error_message());
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(backoff_ms * 2, 10000);
  }
}

Status WorkerCredentials::MaybeRenew() {
  if (!renewable_) return Status::Ok();
  std::string key, cert, ca;
  CertInfo info;
  {
    MutexLock lock(mu_);
    key = key_pem_;
    cert = cert_pem_;
    ca = ca_pem_;
    info = info_;
  }
  const int64_t now_s = clock_.NowUnixMs() / 1000;
  if (now_s < RenewAtS(info.not_before_s, info.not_after_s)) return Status::Ok();
  auto new_key = NewPrivateKey();
  if (!new_key.ok()) return new_key.status();
  auto csr = NewCertificateRequest(*new_key, options_.name);
  if (!csr.ok()) return csr.status();
  v1::RenewRequest req;
  req.set_csr_pem(*csr);
  v1::JoinResponse resp;
  grpc::Status st;
  // Every coordinator in turn while none answers (a follower does not listen).
  for (size_t i = 0; i < coordinators_.size(); ++i) {
    auto stub = v1::JoinService::NewStub(
        grpc::CreateChannel(coordinators_.current(), Mutual(key, cert, ca)));
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(10));
    st = stub->Renew(&ctx, req, &resp);
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    coordinators_.Next();
  }
  if (!st.ok()) {
    const int64_t left = info.not_after_s - now_s;
    if (left < 3600) {
      spdlog::error("TLS: cannot renew the worker certificate ({}); it expires in {} s",
                    st.error_message(), left);
    }
    return Status::Unavailable("renewal: " + st.error_message());
  }
  Status verified = CheckWorkerCertificate(*new_key, resp.cert_pem(), ca, options_.name, "", now_s);
  if (!verified.ok()) return Status::Unavailable("renewed certificate: " + verified.message());
  CONVOY_RETURN_IF_ERROR(Store(*new_key, resp.cert_pem(), ca));
  Use(*new_key, resp.cert_pem(), ca);
  spdlog::info("TLS: renewed the worker certificate, valid until {}",
               Expiry(resp.not_after_unix_s(), now_s));
  return Status::Ok();
}

void WorkerCredentials::StartRenewal(int period_ms) {
  if (!renewable_) return;
  renewal_ = std::thread([this, period_ms] {
    for (;;) {
      {
        MutexLock lock(mu_);
        if (!stopping_) stop_cv_.WaitFor(mu_, std::chrono::milliseconds(period_ms));
        if (stopping_) return;
      }
      Status st = MaybeRenew();
      if (!st.ok()) spdlog::warn("TLS: {}; retrying", st.message());
    }
  });
}

}  // namespace convoy
