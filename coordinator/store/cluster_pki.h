// The coordinator's certificates on disk, in <state-dir>/tls/ (README "Securing a cluster"):
//   ca.crt, ca.key          the cluster CA (ECDSA P-256, 10 years), made once
//   server.crt, server.key  the coordinator's serving certificate, signed by the CA and made
//                           again at every start, so that its names follow the flags
// Keys are mode 0600 and the directory 0700; files are written to a temporary name and
// renamed, so that a crash never leaves half a key. Operators with their own PKI pass
// --tls-cert/--tls-key/--tls-ca instead, and nothing here is written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/pki.h"
#include "common/status.h"

namespace convoy {

struct ClusterPki {
  KeyAndCert ca;  // ca.key_pem empty with the operator's own PKI
  KeyAndCert server;
  std::string ca_fingerprint;
  bool created_ca = false;  // this call made the CA
};

// The names the serving certificate must carry: the listen and advertise hosts (unless a
// wildcard address), each --tls-san, this host's name, localhost, 127.0.0.1 and ::1.
std::vector<std::string> ServerNames(const std::string& listen_host,
                                     const std::string& advertise_host,
                                     const std::vector<std::string>& extra);

// Loads the CA from `tls_dir` or makes it (and the directory), then issues a server
// certificate for `names` valid one year from `now_s`.
StatusOr<ClusterPki> EnsureClusterPki(const std::string& tls_dir,
                                      const std::vector<std::string>& names, int64_t now_s);

// The operator's own files: the key must match the certificate and the certificate verify
// against the CA at `now_s`. Errors name the flag.
StatusOr<ClusterPki> LoadOwnPki(const std::string& cert_path, const std::string& key_path,
                                const std::string& ca_path, int64_t now_s);

// Writes `data` to `path` with `mode` (temporary file, fsync, rename).
Status WriteFileAtomically(const std::string& path, const std::string& data, unsigned mode);
StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace convoy
