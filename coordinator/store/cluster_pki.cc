#include "coordinator/store/cluster_pki.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace convoy {
namespace {

constexpr int64_t kDay = 86400;

bool IsIpAddress(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

Status WriteFileAtomically(const std::string& path, const std::string& data, unsigned mode) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::Unavailable(tmp + ": " + std::strerror(errno));
  fchmod(fd, mode);  // whatever the umask
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      close(fd);
      return Status::Unavailable(tmp + ": " + why);
    }
    off += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0)
    return Status::Unavailable(tmp + ": " + std::strerror(errno));
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::Unavailable(path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": " + std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> ServerNames(const std::string& listen_host,
                                     const std::string& advertise_host,
                                     const std::vector<std::string>& extra) {
  std::vector<std::string> names;
  auto add = [&](const std::string& n) {
    if (n.empty() || n == "0.0.0.0" || n == "::") return;
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  };
  add(listen_host);
  add(advertise_host);
  for (const std::string& n : extra) add(n);
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) add(host);
  add("localhost");
  add("127.0.0.1");
  add("::1");
  return names;
}

StatusOr<ClusterPki> EnsureClusterPki(const std::string& tls_dir,
                                      const std::vector<std::string>& names, int64_t now_s) {
  if (mkdir(tls_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Unavailable(tls_dir + ": " + std::strerror(errno));
  }
  chmod(tls_dir.c_str(), 0700);
  ClusterPki pki;
  const std::string ca_crt = tls_dir + "/ca.crt", ca_key = tls_dir + "/ca.key";
  if (Exists(ca_crt) || Exists(ca_key)) {
    auto cert = ReadWholeFile(ca_crt);
    if (!cert.ok()) return cert.status();
    auto key = ReadWholeFile(ca_key);
    if (!key.ok()) return key.status();
    pki.ca = {*key, *cert};
    Status match = KeyMatchesCertificate(pki.ca.key_pem, pki.ca.cert_pem);
    if (!match.ok()) return Status::InvalidArgument(ca_key + ": " + match.message());
  } else {
    auto ca = NewCertificateAuthority("convoy cluster CA", now_s, 3650 * kDay);
    if (!ca.ok()) return ca.status();
    pki.ca = *ca;
    // The key first: a certificate without its key would be a CA that cannot sign.
    CONVOY_RETURN_IF_ERROR(WriteFileAtomically(ca_key, pki.ca.key_pem, 0600));
    CONVOY_RETURN_IF_ERROR(WriteFileAtomically(ca_crt, pki.ca.cert_pem, 0644));
    pki.created_ca = true;
  }
  auto fp = CertificateFingerprint(pki.ca.cert_pem);
  if (!fp.ok()) return Status::InvalidArgument(ca_crt + ": " + fp.status().message());
  pki.ca_fingerprint = *fp;

  auto key = NewPrivateKey();
  if (!key.ok()) return key.status();
  CertTemplate t;
  t.common_name = "convoy coordinator";
  for (const std::string& n : names) (IsIpAddress(n) ? t.ip_addresses : t.dns_names).push_back(n);
  t.server = true;
  t.not_before_s = now_s - 3600;
  t.not_after_s = now_s + 365 * kDay;
  auto cert = IssueCertificate(pki.ca, *key, t);
  if (!cert.ok()) return cert.status();
  pki.server = {*key, *cert + pki.ca.cert_pem};
  CONVOY_RETURN_IF_ERROR(WriteFileAtomically(tls_dir + "/server.key", *key, 0600));
  CONVOY_RETURN_IF_ERROR(WriteFileAtomically(tls_dir + "/server.crt", pki.server.cert_pem, 0644));
  return pki;
}

StatusOr<ClusterPki> LoadOwnPki(const std::string& cert_path, const std::string& key_path,
                                const std::string& ca_path, int64_t now_s) {
  ClusterPki pki;
  auto cert = ReadWholeFile(cert_path);
  if (!cert.ok()) return Status::InvalidArgument("--tls-cert " + cert.status().message());
  auto key = ReadWholeFile(key_path);
  if (!key.ok()) return Status::InvalidArgument("--tls-key " + key.status().message());
  auto ca = ReadWholeFile(ca_path);
  if (!ca.ok()) return Status::InvalidArgument("--tls-ca " + ca.status().message());
  Status match = KeyMatchesCertificate(*key, *cert);
  if (!match.ok()) {
    return Status::InvalidArgument("--tls-key " + key_path + " is not the key of --tls-cert " +
                                   cert_path + ": " + match.message());
  }
  Status verified = VerifyCertificate(*cert, *ca, now_s);
  if (!verified.ok()) {
    return Status::InvalidArgument("--tls-cert " + cert_path +
                                   " does not verify against --tls-ca " + ca_path + ": " +
                                   verified.message());
  }
  auto fp = CertificateFingerprint(*ca);
  if (!fp.ok())
    return Status::InvalidArgument("--tls-ca " + ca_path + ": " + fp.status().message());
  pki.ca.cert_pem = *ca;
  pki.server = {*key, *cert};
  pki.ca_fingerprint = *fp;
  return pki;
}

}  // namespace convoy
