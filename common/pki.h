// The cluster's small PKI, on OpenSSL: an ECDSA P-256 certificate authority, the
// coordinator's server certificate, workers' short-lived client certificates signed from a
// certificate signing request, fingerprints for pinning, and the random secrets of tokens.
// Everything is PEM text in and out; times are Unix seconds so that tests can pass their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace convoy {

struct KeyAndCert {
  std::string key_pem;
  std::string cert_pem;
};

// What a certificate says about itself.
struct CertInfo {
  std::string common_name;
  int64_t not_before_s = 0;
  int64_t not_after_s = 0;
  bool is_ca = false;
  // "SHA256:" and the lower-case hex SHA-256 of the DER encoding (as `openssl x509
  // -fingerprint -sha256` prints it, without the colons).
  std::string fingerprint;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
};

// What to put in a certificate that the CA signs.
struct CertTemplate {
  std::string common_name;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  bool server = false;  // extendedKeyUsage serverAuth
  bool client = false;  // extendedKeyUsage clientAuth
  int64_t not_before_s = 0;
  int64_t not_after_s = 0;
};

// A new ECDSA P-256 private key (PKCS#8 PEM).
StatusOr<std::string> NewPrivateKey();

// A self-signed CA valid from `now_s` - 1 h (clock skew between hosts) for `ttl_s`.
StatusOr<KeyAndCert> NewCertificateAuthority(const std::string& common_name, int64_t now_s,
                                             int64_t ttl_s);

// A certificate for `key_pem`'s public key, signed by `ca`.
StatusOr<std::string> IssueCertificate(const KeyAndCert& ca, const std::string& key_pem,
                                       const CertTemplate& t);

// A PKCS#10 request for `key_pem` with subject CN=`common_name`, signed by that key.
StatusOr<std::string> NewCertificateRequest(const std::string& key_pem,
                                            const std::string& common_name);

// Signs the request's public key (its signature checked first). Only the template decides
// what the certificate says: nothing from the request but the key is copied.
StatusOr<std::string> SignCertificateRequest(const KeyAndCert& ca, const std::string& csr_pem,
                                             const CertTemplate& t);

StatusOr<CertInfo> InspectCertificate(const std::string& cert_pem);

// "SHA256:<hex>" of the first certificate in `cert_pem`.
StatusOr<std::string> CertificateFingerprint(const std::string& cert_pem);

// Fingerprints compare without case and with or without colons; "SHA256:" is required.
bool FingerprintMatches(const std::string& expected, const std::string& actual);

// OK when `cert_pem` is signed by `ca_pem` and valid at `now_s`.
Status VerifyCertificate(const std::string& cert_pem, const std::string& ca_pem, int64_t now_s);

// OK when `key_pem` is the private key of `cert_pem`.
Status KeyMatchesCertificate(const std::string& key_pem, const std::string& cert_pem);

// `bytes` bytes from the operating system's random source, hex-encoded (2 * bytes chars).
std::string RandomHex(size_t bytes);

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(const std::string& data);

// Constant-time comparison of two strings of equal length (false when the lengths differ).
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace convoy
