#include "coordinator/check_config.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "common/config_file.h"
#include "common/pki.h"
#include "common/util.h"
#include "coordinator/cluster_pki.h"

namespace convoy {

Status CheckCoordinatorConfig(const CoordinatorFlags& flags, std::vector<std::string>* notes) {
  // ParseCoordinatorFlags already checked the addresses, --insecure, the TTLs and ranges.
  notes->push_back("listen " + flags.listen + (flags.insecure ? " (plain text)" : " (TLS)"));
  if (!flags.metrics_listen.empty()) notes->push_back("metrics " + flags.metrics_listen);
  if (!flags.health_listen.empty()) notes->push_back("health " + flags.health_listen);
  if (Status s = CheckWritableDir("--state-dir", flags.state_dir); !s.ok()) return s;
  notes->push_back("state dir " + flags.state_dir + " writable");
  std::error_code ec;
  const std::string db = flags.state_dir + "/convoy.db";
  if (std::filesystem::exists(db, ec) && access(db.c_str(), R_OK | W_OK) != 0) {
    return Status::InvalidArgument("--state-dir: " + db + " is not readable and writable");
  }
  if (flags.insecure) return Status::Ok();
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  if (!flags.tls_cert.empty()) {
    auto pki = LoadOwnPki(flags.tls_cert, flags.tls_key, flags.tls_ca, now_s);
    if (!pki.ok()) return pki.status();
    notes->push_back("TLS files load; CA " + pki->ca_fingerprint);
    return Status::Ok();
  }
  const std::string ca_cert = flags.state_dir + "/tls/ca.crt";
  const std::string ca_key = flags.state_dir + "/tls/ca.key";
  if (!std::filesystem::exists(ca_cert, ec)) {
    notes->push_back("no cluster CA yet: made at first start (or by convoy-coordinator init)");
    return Status::Ok();
  }
  auto cert = ReadWholeFile(ca_cert);
  if (!cert.ok()) return cert.status();
  auto key = ReadWholeFile(ca_key);
  if (!key.ok()) return key.status();
  if (Status s = KeyMatchesCertificate(*key, *cert); !s.ok()) {
    return Status::InvalidArgument(ca_key + " does not belong to " + ca_cert + ": " + s.message());
  }
  auto fp = CertificateFingerprint(*cert);
  if (!fp.ok()) return fp.status();
  notes->push_back("cluster CA " + *fp);
  return Status::Ok();
}

}  // namespace convoy
