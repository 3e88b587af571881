#include "common/pki.h"

#include <gtest/gtest.h>

namespace convoy {
namespace common_pki_test {

constexpr int64_t kNow = 1'800'000'000;  // 2027-01-15
constexpr int64_t kDay = 86400;

KeyAndCert Ca(const std::string& name = "convoy test CA") {
  auto ca = NewCertificateAuthority(name, kNow, 365 * kDay);
  EXPECT_TRUE(ca.ok()) << ca.status().message();
  return *ca;
}

TEST(PkiTest, CertificateAuthorityIsACaWithAFingerprint) {
  const KeyAndCert ca = Ca();
  auto info = InspectCertificate(ca.cert_pem);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_TRUE(info->is_ca);
  EXPECT_EQ(info->common_name, "convoy test CA");
  EXPECT_LE(info->not_before_s, kNow - 3600);
  EXPECT_EQ(info->not_after_s, kNow + 365 * kDay);
  ASSERT_EQ(info->fingerprint.size(), 7u + 64u);
  EXPECT_EQ(info->fingerprint.substr(0, 7), "SHA256:");
  EXPECT_EQ(*CertificateFingerprint(ca.cert_pem), info->fingerprint);
  EXPECT_TRUE(KeyMatchesCertificate(ca.key_pem, ca.cert_pem).ok());
  EXPECT_TRUE(VerifyCertificate(ca.cert_pem, ca.cert_pem, kNow).ok());
}

TEST(PkiTest, ServerCertificateCarriesItsNames) {
  const KeyAndCert ca = Ca();
  auto key = NewPrivateKey();
  ASSERT_TRUE(key.ok());
  CertTemplate t;
  t.common_name = "convoy coordinator";
  t.dns_names = {"localhost", "coord.example"};
  t.ip_addresses = {"127.0.0.1", "::1", "10.0.0.5"};
  t.server = true;
  t.not_before_s = kNow;
  t.not_after_s = kNow + kDay;
  auto cert = IssueCertificate(ca, *key, t);
  ASSERT_TRUE(cert.ok()) << cert.status().message();
  auto info = InspectCertificate(*cert);
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->is_ca);
  EXPECT_EQ(info->dns_names, t.dns_names);
  EXPECT_EQ(info->ip_addresses, t.ip_addresses);
  EXPECT_TRUE(KeyMatchesCertificate(*key, *cert).ok());
  EXPECT_FALSE(KeyMatchesCertificate(ca.key_pem, *cert).ok());
  EXPECT_TRUE(VerifyCertificate(*cert, ca.cert_pem, kNow + 10).ok());
}

TEST(PkiTest, SigningARequestCopiesOnlyTheKey) {
  const KeyAndCert ca = Ca();
  auto key = NewPrivateKey();
  ASSERT_TRUE(key.ok());
  auto csr = NewCertificateRequest(*key, "w2");  // asks for w2 ...
  ASSERT_TRUE(csr.ok()) << csr.status().message();
  CertTemplate t;
  t.common_name = "w1";  // ... the template says w1
  t.client = true;
  t.not_before_s = kNow;
  t.not_after_s = kNow + kDay;
  auto cert = SignCertificateRequest(ca, *csr, t);
  ASSERT_TRUE(cert.ok()) << cert.status().message();
  EXPECT_EQ(InspectCertificate(*cert)->common_name, "w1");
  EXPECT_TRUE(KeyMatchesCertificate(*key, *cert).ok());
  EXPECT_FALSE(SignCertificateRequest(ca, "not a request", t).ok());
}

TEST(PkiTest, VerifyRefusesOtherCasAndExpiredCertificates) {
  const KeyAndCert ca = Ca();
  const KeyAndCert other = Ca("other CA");
  auto key = NewPrivateKey();
  CertTemplate t;
  t.common_name = "w1";
  t.client = true;
  t.not_before_s = kNow;
  t.not_after_s = kNow + kDay;
  auto cert = IssueCertificate(ca, *key, t);
  ASSERT_TRUE(cert.ok());
  EXPECT_TRUE(VerifyCertificate(*cert, ca.cert_pem, kNow + 60).ok());
  EXPECT_FALSE(VerifyCertificate(*cert, other.cert_pem, kNow + 60).ok());
  Status expired = VerifyCertificate(*cert, ca.cert_pem, kNow + 2 * kDay);
  EXPECT_FALSE(expired.ok());
  EXPECT_FALSE(expired.message().empty());
  EXPECT_FALSE(VerifyCertificate(*cert, ca.cert_pem, kNow - 2 * kDay).ok());
}

TEST(PkiTest, FingerprintsCompareWithoutCaseOrColons) {
  const std::string fp = "SHA256:" + std::string(62, 'a') + "0f";
  EXPECT_TRUE(FingerprintMatches(fp, fp));
  std::string colons = "sha256:";
  for (size_t i = 7; i < fp.size(); i += 2) {
    if (i > 7) colons += ':';
    colons += static_cast<char>(std::toupper(fp[i]));
    colons += static_cast<char>(std::toupper(fp[i + 1]));
  }
  EXPECT_TRUE(FingerprintMatches(colons, fp));
  EXPECT_FALSE(FingerprintMatches(std::string(62, 'a') + "0f", fp));  // no "SHA256:"
  EXPECT_FALSE(FingerprintMatches("SHA256:" + std::string(62, 'a') + "0e", fp));
  EXPECT_FALSE(FingerprintMatches("SHA256:", "SHA256:"));
}

TEST(PkiTest, RandomHexAndHashes) {
  const std::string a = RandomHex(32), b = RandomHex(32);
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
}

}  // namespace common_pki_test
}  // namespace convoy
