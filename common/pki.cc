#include "common/pki.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

#include <cctype>
#include <memory>

namespace convoy {
namespace {

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Req = std::unique_ptr<X509_REQ, Deleter<X509_REQ, X509_REQ_free>>;
using Store = std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>>;
using StoreCtx = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;

// The reason OpenSSL gives for the last failure, and clears its queue.
std::string OpensslError(const std::string& what) {
  unsigned long e = ERR_get_error();
  std::string reason = what;
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    reason += ": ";
    reason += buf;
  }
  ERR_clear_error();
  return reason;
}

Bio MemBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::string BioString(BIO* bio) {
  BUF_MEM* mem = nullptr;
  BIO_get_mem_ptr(bio, &mem);
  return mem ? std::string(mem->data, mem->length) : std::string();
}

StatusOr<Key> ReadKey(const std::string& pem) {
  Bio bio = MemBio(pem);
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return Status::InvalidArgument(OpensslError("not a PEM private key"));
  return key;
}

StatusOr<Cert> ReadCert(const std::string& pem) {
  Bio bio = MemBio(pem);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return Status::InvalidArgument(OpensslError("not a PEM certificate"));
  return cert;
}

StatusOr<std::string> WriteCert(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_X509(bio.get(), cert)) {
    return Status::Internal(OpensslError("cannot encode a certificate"));
  }
  return BioString(bio.get());
}

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return Status::InvalidArgument(OpensslError("extension " + value));
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (!ok) return Status::Internal(OpensslError("cannot add extension " + value));
  return Status::Ok();
}

// A certificate for `key` with the template's subject, validity and extensions; signed by
// `ca_key` as `issuer` (itself when self-signed, then `issuer` is null).
StatusOr<std::string> Build(EVP_PKEY* key, const CertTemplate& t, bool ca, X509* issuer,
                            EVP_PKEY* ca_key) {
  Cert cert(X509_new());
  if (!cert) return Status::Internal(OpensslError("X509_new"));
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return Status::Internal(OpensslError("RAND_bytes"));
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  ASN1_TIME_set(X509_getm_notBefore(cert.get()), static_cast<time_t>(t.not_before_s));
  ASN1_TIME_set(X509_getm_notAfter(cert.get()), static_cast<time_t>(t.not_after_s));
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("convoy"), -1, -1, 0);
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(t.common_name.c_str()), -1,
                                 -1, 0) != 1) {
    return Status::InvalidArgument(OpensslError("common name '" + t.common_name + "'"));
  }
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  X509_set_pubkey(cert.get(), key);
  if (ca) {
    CONVOY_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
    CONVOY_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign"));
  } else {
    CONVOY_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE"));
    CONVOY_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_key_usage, "critical,digitalSignature"));
    std::string eku;
    if (t.server) eku = "serverAuth";
    if (t.client) eku += std::string(eku.empty() ? "" : ",") + "clientAuth";
    if (!eku.empty()) {
      CONVOY_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_ext_key_usage, eku));
    }
  }
  std::string san;
  for (const auto& d : t.dns_names) san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& ip : t.ip_addresses) san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  if (!san.empty()) {
    CONVOY_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_subject_alt_name, san));
  }
  CONVOY_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash"));
  if (issuer) {
    CONVOY_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_authority_key_identifier, "keyid:always"));
  }
  if (X509_sign(cert.get(), ca_key, EVP_sha256()) == 0) {
    return Status::Internal(OpensslError("cannot sign the certificate"));
  }
  return WriteCert(cert.get());
}

std::string Hex(const unsigned char* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 15];
  }
  return out;
}

int64_t AsnTimeToUnix(const ASN1_TIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

}  // namespace

StatusOr<std::string> NewPrivateKey() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return Status::Internal(OpensslError("cannot generate an ECDSA P-256 key"));
  Bio bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr)) {
    return Status::Internal(OpensslError("cannot encode the key"));
  }
  return BioString(bio.get());
}

StatusOr<KeyAndCert> NewCertificateAuthority(const std::string& common_name, int64_t now_s,
                                             int64_t ttl_s) {
  auto key_pem = NewPrivateKey();
  if (!key_pem.ok()) return key_pem.status();
  auto key = ReadKey(*key_pem);
  if (!key.ok()) return key.status();
  CertTemplate t;
  t.common_name = common_name;
  t.not_before_s = now_s - 3600;
  t.not_after_s = now_s + ttl_s;
  auto cert = Build(key->get(), t, /*ca=*/true, nullptr, key->get());
  if (!cert.ok()) return cert.status();
  return KeyAndCert{*key_pem, *cert};
}

StatusOr<std::string> IssueCertificate(const KeyAndCert& ca, const std::string& key_pem,
                                       const CertTemplate& t) {
  auto ca_key = ReadKey(ca.key_pem);
  if (!ca_key.ok()) return ca_key.status();
  auto ca_cert = ReadCert(ca.cert_pem);
  if (!ca_cert.ok()) return ca_cert.status();
  auto key = ReadKey(key_pem);
  if (!key.ok()) return key.status();
  return Build(key->get(), t, /*ca=*/false, ca_cert->get(), ca_key->get());
}

StatusOr<std::string> NewCertificateRequest(const std::string& key_pem,
                                            const std::string& common_name) {
  auto key = ReadKey(key_pem);
  if (!key.ok()) return key.status();
  Req req(X509_REQ_new());
  X509_REQ_set_version(req.get(), 0);
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_REQ_set_pubkey(req.get(), key->get());
  if (X509_REQ_sign(req.get(), key->get(), EVP_sha256()) == 0) {
    return Status::Internal(OpensslError("cannot sign the certificate request"));
  }
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509_REQ(bio.get(), req.get());
  return BioString(bio.get());
}

StatusOr<std::string> SignCertificateRequest(const KeyAndCert& ca, const std::string& csr_pem,
                                             const CertTemplate& t) {
  Bio bio = MemBio(csr_pem);
  Req req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  if (!req) return Status::InvalidArgument(OpensslError("csr: not a PEM certificate request"));
  EVP_PKEY* pub = X509_REQ_get0_pubkey(req.get());
  if (pub == nullptr || X509_REQ_verify(req.get(), pub) != 1) {
    return Status::InvalidArgument(OpensslError("csr: its signature does not verify"));
  }
  if (EVP_PKEY_get_base_id(pub) != EVP_PKEY_EC && EVP_PKEY_get_base_id(pub) != EVP_PKEY_RSA) {
    return Status::InvalidArgument("csr: the key must be ECDSA or RSA");
  }
  auto ca_key = ReadKey(ca.key_pem);
  if (!ca_key.ok()) return ca_key.status();
  auto ca_cert = ReadCert(ca.cert_pem);
  if (!ca_cert.ok()) return ca_cert.status();
  return Build(pub, t, /*ca=*/false, ca_cert->get(), ca_key->get());
}

StatusOr<CertInfo> InspectCertificate(const std::string& cert_pem) {
  auto cert = ReadCert(cert_pem);
  if (!cert.ok()) return cert.status();
  CertInfo info;
  char cn[256] = {0};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert->get()), NID_commonName, cn,
                                sizeof(cn)) > 0) {
    info.common_name = cn;
  }
  info.not_before_s = AsnTimeToUnix(X509_get0_notBefore(cert->get()));
  info.not_after_s = AsnTimeToUnix(X509_get0_notAfter(cert->get()));
  info.is_ca = X509_check_ca(cert->get()) > 0;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  X509_digest(cert->get(), EVP_sha256(), md, &n);
  info.fingerprint = "SHA256:" + Hex(md, n);
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert->get(), NID_subject_alt_name, nullptr, nullptr));
  if (names != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
      const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
      if (g->type == GEN_DNS) {
        info.dns_names.emplace_back(
            reinterpret_cast<const char*>(ASN1_STRING_get0_data(g->d.dNSName)),
            ASN1_STRING_length(g->d.dNSName));
      } else if (g->type == GEN_IPADD) {
        const ASN1_OCTET_STRING* os = g->d.iPAddress;
        char text[INET6_ADDRSTRLEN] = {0};
        if (os->length == 4) inet_ntop(AF_INET, os->data, text, sizeof(text));
        if (os->length == 16) inet_ntop(AF_INET6, os->data, text, sizeof(text));
        const std::string ip = text;
        info.ip_addresses.push_back(ip);
      }
    }
    GENERAL_NAMES_free(names);
  }
  return info;
}

StatusOr<std::string> CertificateFingerprint(const std::string& cert_pem) {
  auto info = InspectCertificate(cert_pem);
  if (!info.ok()) return info.status();
  return info->fingerprint;
}

bool FingerprintMatches(const std::string& expected, const std::string& actual) {
  auto norm = [](const std::string& s, bool* ok) {
    std::string out;
    *ok = s.size() > 7 && (s.compare(0, 7, "SHA256:") == 0 || s.compare(0, 7, "sha256:") == 0);
    for (size_t i = 7; i < s.size(); ++i) {
      if (s[i] == ':') continue;
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
    }
    return out;
  };
  bool ok_e = false, ok_a = false;
  const std::string e = norm(expected, &ok_e), a = norm(actual, &ok_a);
  return ok_e && ok_a && e.size() == 64 && ConstantTimeEquals(e, a);
}

Status VerifyCertificate(const std::string& cert_pem, const std::string& ca_pem, int64_t now_s) {
  auto cert = ReadCert(cert_pem);
  if (!cert.ok()) return cert.status();
  auto ca = ReadCert(ca_pem);
  if (!ca.ok()) return ca.status();
  Store store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), ca->get());
  StoreCtx ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), cert->get(), nullptr);
  X509_STORE_CTX_set_time(ctx.get(), 0, static_cast<time_t>(now_s));
  if (X509_verify_cert(ctx.get()) != 1) {
    return Status::FailedPrecondition(
        std::string("certificate does not verify: ") +
        X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())));
  }
  return Status::Ok();
}

Status KeyMatchesCertificate(const std::string& key_pem, const std::string& cert_pem) {
  auto key = ReadKey(key_pem);
  if (!key.ok()) return key.status();
  auto cert = ReadCert(cert_pem);
  if (!cert.ok()) return cert.status();
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    ERR_clear_error();
    return Status::FailedPrecondition("the private key does not belong to the certificate");
  }
  return Status::Ok();
}

std::string RandomHex(size_t bytes) {
  std::string buf(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(buf.data()), static_cast<int>(bytes)) != 1) {
    abort();  // no randomness: nothing secret can be made
  }
  return Hex(reinterpret_cast<const unsigned char*>(buf.data()), bytes);
}

std::string Sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  return Hex(md, n);
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace convoy
