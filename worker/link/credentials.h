// The worker's identity towards the coordinator (README "Securing a cluster").
//
//  - Join: `--join-token T --ca-fingerprint SHA256:...`. The cluster CA is fetched over TLS
//    without verification (JoinService.GetClusterInfo) and trusted only when its fingerprint
//    matches; then, on a channel that verifies the coordinator with that CA, the token and a
//    certificate request buy a client certificate for the worker's name (JoinService.Join).
//    The private key is made here and never leaves. Key, certificate and CA are kept in
//    <work-dir>/tls/ (0700; the key 0600), so that a restarted worker needs no new token.
//  - Own PKI: `--tls-cert --tls-key --tls-ca`, used as they are.
//  - --insecure: plain text, to a coordinator on loopback only.
//
// A joined worker renews its certificate (JoinService.Renew over mutual TLS, a new key)
// once 2/3 of its lifetime has passed, retrying every minute; the next connection uses the
// new one (an established TLS connection is not affected by the old one's expiry).
//
// Thread-safe: Current() from the connection thread, the renewal from its own thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/coordinator_list.h"
#include "common/mutex.h"
#include "common/pki.h"
#include "common/status.h"

namespace convoy {

struct CredentialOptions {
  std::string coordinator;  // HOST:PORT, or several (CoordinatorList)
  std::string name;         // the worker's name: the certificate's common name
  std::string work_dir;
  bool insecure = false;
  std::string join_token;
  std::string ca_fingerprint;
  std::string tls_cert, tls_key, tls_ca;
};

// When a certificate valid from `not_before_s` to `not_after_s` is renewed: at 2/3 of its
// lifetime.
int64_t RenewAtS(int64_t not_before_s, int64_t not_after_s);
int64_t RenewAtS(const CertInfo& cert);

// OK when `cert_pem` names `name`, is signed by `ca_pem` (whose fingerprint is
// `ca_fingerprint`, unless that is empty), is valid at `now_s`, and `key_pem` is its key.
// The error says which of these fails.
Status CheckWorkerCertificate(const std::string& key_pem, const std::string& cert_pem,
                              const std::string& ca_pem, const std::string& name,
                              const std::string& ca_fingerprint, int64_t now_s);

class WorkerCredentials {
 public:
  // Loads or obtains the worker's credentials (joining the cluster when needed). Errors say
  // which flag to fix (InvalidArgument: a refused token, a CA that does not match
  // --ca-fingerprint, unusable --tls-* files, no credentials at all); an unreachable
  // coordinator is retried with backoff until `join_deadline_ms` (real time) has passed
  // (then Unavailable). A valid certificate for this name kept in <work-dir>/tls is reused
  // without joining; the set there is replaced as a whole (a crash mid-store is completed
  // or rolled back at the next start).
  static StatusOr<std::unique_ptr<WorkerCredentials>> Create(const CredentialOptions& options,
                                                             const Clock& clock,
                                                             int64_t join_deadline_ms = 600000);
  ~WorkerCredentials();

  // The credentials for the next connection, and a number that changes when they do.
  std::shared_ptr<grpc::ChannelCredentials> Current(uint64_t* generation = nullptr);

  // Renews when due (RenewAtS at the clock's time): a new key, JoinService.Renew over
  // mutual TLS with the current certificate, stored, then Current() changes. OK when
  // nothing was due (no connection is made) or the renewal worked; otherwise the error
  // (logged as an error once the certificate expires within the hour).
  Status MaybeRenew();
  // Runs MaybeRenew every `period_ms` on a thread of its own until destroyed.
  void StartRenewal(int period_ms = 60000);

  bool insecure() const { return options_.insecure; }
  // The current certificate's validity (0 with --insecure).
  int64_t not_after_s();
  bool renewable() const { return renewable_; }

 private:
  WorkerCredentials(const CredentialOptions& options, const Clock& clock)
      : options_(options), coordinators_(options.coordinator), clock_(clock) {}
  Status LoadStored();
  Status Join(int64_t deadline_ms);
  Status Store(const std::string& key, const std::string& cert, const std::string& ca);
  void Use(const std::string& key, const std::string& cert, const std::string& ca);

  const CredentialOptions options_;
  // Join and Renew try each coordinator in turn (a group on etcd: one leads).
  CoordinatorList coordinators_;
  const Clock& clock_;
  bool renewable_ = false;  // joined (not --tls-cert, not --insecure)
  Mutex mu_;
  std::string key_pem_ GUARDED_BY(mu_), cert_pem_ GUARDED_BY(mu_), ca_pem_ GUARDED_BY(mu_);
  CertInfo info_ GUARDED_BY(mu_);
  std::shared_ptr<grpc::ChannelCredentials> creds_ GUARDED_BY(mu_);
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  CondVar stop_cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread renewal_;
};

}  // namespace convoy
