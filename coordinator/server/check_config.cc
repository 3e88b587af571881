#include "coordinator/server/check_config.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "common/config_file.h"
#include "common/pki.h"
#include "common/util.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/store/cluster_pki.h"
#include "coordinator/store/etcd_client.h"

namespace convoy {

namespace {

// Secure, on etcd: the CA this coordinator would serve with is the one whose fingerprint the
// cluster recorded in etcd (every coordinator holds a copy; CoordinatorServer checks it too).
void CheckClusterCaAgainstEtcd(const CoordinatorFlags& flags, EtcdClient& client,
                               std::vector<std::string>* notes, std::vector<std::string>* errors) {
  auto recorded = client.Get(flags.etcd_prefix + "ca-fingerprint");
  if (recorded.status().code() == StatusCode::kNotFound) {
    notes->push_back("no cluster CA recorded in etcd yet: the first coordinator records its own");
    return;
  }
  if (!recorded.ok()) {
    errors->push_back("--store: " + recorded.status().message());
    return;
  }
  const std::string ca_file = flags.tls_ca.empty() ? flags.state_dir + "/tls/ca.crt" : flags.tls_ca;
  auto pem = ReadWholeFile(ca_file);
  if (!pem.ok()) {
    errors->push_back("TLS: this cluster's CA (" + recorded->value() +
                      ", recorded in etcd) is not in " + ca_file +
                      ": copy ca.crt and ca.key there from a coordinator of this "
                      "cluster (deploy/README.md \"High availability on etcd\")");
    return;
  }
  auto fingerprint = CertificateFingerprint(*pem);
  if (!fingerprint.ok() || !FingerprintMatches(recorded->value(), *fingerprint)) {
    errors->push_back("TLS: " + ca_file + " (" +
                      (fingerprint.ok() ? *fingerprint : std::string("unreadable")) +
                      ") is not this cluster's CA (" + recorded->value() + ", recorded in etcd)");
    return;
  }
  notes->push_back("cluster CA " + *fingerprint + " (the one recorded in etcd)");
}

// --store etcd://: every member reached (each named when it is not), and the prefix either
// unused (a new cluster) or this kind of cluster's (it holds a Convoy cluster id).
void CheckEtcdStore(const CoordinatorFlags& flags, std::vector<std::string>* notes,
                    std::vector<std::string>* errors) {
  auto endpoints = ParseEtcdUrl("--store", flags.store);
  if (!endpoints.ok()) return;  // the parse said so
  int reached = 0;
  for (const std::string& endpoint : *endpoints) {
    auto from_flags = EtcdOptionsFromFlags(flags);
    if (!from_flags.ok()) return;  // the parse said so
    EtcdOptions options = *from_flags;
    options.endpoints = {endpoint};
    options.call_timeout_ms = 3000;
    auto client = EtcdClient::Create(options);
    if (!client.ok()) {
      errors->push_back(client.status().message());
      return;
    }
    auto status = (*client)->MemberStatus();
    if (!status.ok()) {
      errors->push_back("--store: etcd member " + endpoint +
                        " cannot be reached: " + status.status().message());
      continue;
    }
    ++reached;
    if (reached > 1) continue;
    auto id = (*client)->Get(flags.etcd_prefix + "cluster-id");
    if (id.ok() && !IsHexId(id->value())) {
      errors->push_back("--etcd-prefix " + flags.etcd_prefix + ": " + flags.etcd_prefix +
                        "cluster-id does not hold a Convoy cluster id: the prefix is another "
                        "program's");
    } else if (id.ok()) {
      notes->push_back("etcd prefix " + flags.etcd_prefix + " holds cluster " + id->value());
    } else if (id.status().code() == StatusCode::kNotFound) {
      notes->push_back("etcd prefix " + flags.etcd_prefix +
                       " is unused: the first coordinator makes a new cluster there");
    } else {
      errors->push_back("--store: " + id.status().message());
    }
    if (!flags.insecure) CheckClusterCaAgainstEtcd(flags, **client, notes, errors);
  }
  notes->push_back("etcd: " + std::to_string(reached) + " of " + std::to_string(endpoints->size()) +
                   " member(s) reached");
}

}  // namespace

void CheckCoordinatorConfig(const CoordinatorFlags& flags, std::vector<std::string>* notes,
                            std::vector<std::string>* errors) {
  auto fail = [errors](const Status& s) {
    if (!s.ok()) errors->push_back(s.message());
    return !s.ok();
  };
  // ParseCoordinatorFlags already checked the addresses, --insecure, the TTLs and ranges.
  notes->push_back("listen " + flags.listen + (flags.insecure ? " (plain text)" : " (TLS)"));
  if (!flags.metrics_listen.empty()) notes->push_back("metrics " + flags.metrics_listen);
  if (!flags.health_listen.empty()) notes->push_back("health " + flags.health_listen);
  if (!flags.ui_listen.empty()) {
    notes->push_back("web UI " + flags.ui_listen + (flags.insecure ? " (plain HTTP)" : " (HTTPS)"));
  }
  if (fail(CheckWritableDir("--state-dir", flags.state_dir))) return;  // the rest lives there
  notes->push_back("state dir " + flags.state_dir + " writable");
  std::error_code ec;
  for (const char* name : {"convoy.db", "tokens.db"}) {
    const std::string db = flags.state_dir + "/" + name;
    if (std::filesystem::exists(db, ec) && access(db.c_str(), R_OK | W_OK) != 0) {
      errors->push_back("--state-dir: " + db + " is not readable and writable");
    }
  }
  if (flags.store != "sqlite") CheckEtcdStore(flags, notes, errors);
  if (flags.insecure) return;
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  if (!flags.tls_cert.empty()) {
    if (flags.tls_key.empty() || flags.tls_ca.empty()) return;  // the parse said so
    auto pki = LoadOwnPki(flags.tls_cert, flags.tls_key, flags.tls_ca, now_s);
    if (fail(pki.status())) return;
    notes->push_back("TLS files load; CA " + pki->ca_fingerprint);
    return;
  }
  const std::string ca_cert = flags.state_dir + "/tls/ca.crt";
  const std::string ca_key = flags.state_dir + "/tls/ca.key";
  if (!std::filesystem::exists(ca_cert, ec)) {
    notes->push_back("no cluster CA yet: made at first start (or by convoy-coordinator init)");
    return;
  }
  auto cert = ReadWholeFile(ca_cert);
  auto key = ReadWholeFile(ca_key);
  const bool unread = fail(cert.status());
  if (fail(key.status()) || unread) return;
  if (Status s = KeyMatchesCertificate(*key, *cert); !s.ok()) {
    errors->push_back(ca_key + " does not belong to " + ca_cert + ": " + s.message());
    return;
  }
  auto fp = CertificateFingerprint(*cert);
  if (fail(fp.status())) return;
  notes->push_back("cluster CA " + *fp);
}

}  // namespace convoy
