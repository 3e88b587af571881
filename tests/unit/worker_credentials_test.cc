// WorkerCredentials without a coordinator (worker/link/credentials.h): the renewal schedule on a
// fake clock, reuse and refusal of the certificate kept in <work-dir>/tls, a store cut short
// by a crash, the operator's own --tls-* files, and the credential flags. Certificates come
// from a CA of the test's own (common/pki.h). Joining and renewing against a real
// coordinator is tests/integration/coordinator_worker_join_test.cc.
#include "worker/link/credentials.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/pki.h"
#include "tests/support/temp_dir.h"
#include "worker/daemon/flags.h"

namespace convoy {
namespace worker_credentials_test {

constexpr int64_t kDay = 86400;
// Nothing listens on port 1: a renewal or a join that is attempted fails fast.
constexpr char kNobody[] = "127.0.0.1:1";

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

class WorkerCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = NewCertificateAuthority("test-ca", now_s(), 365 * kDay);
    ASSERT_TRUE(ca.ok()) << ca.status().message();
    ca_ = *ca;
    auto other = NewCertificateAuthority("other-ca", now_s(), 365 * kDay);
    ASSERT_TRUE(other.ok());
    other_ca_ = *other;
    ASSERT_EQ(mkdir(tls_dir().c_str(), 0700), 0);
  }

  int64_t now_s() const { return clock_.NowUnixMs() / 1000; }
  std::string tls_dir() const { return dir_ / "tls"; }

  // A key and a client certificate for `name` signed by `ca`, valid [from, to).
  static KeyAndCert Issue(const KeyAndCert& ca, const std::string& name, int64_t from, int64_t to) {
    KeyAndCert out;
    out.key_pem = *NewPrivateKey();
    CertTemplate t;
    t.common_name = name;
    t.client = true;
    t.not_before_s = from;
    t.not_after_s = to;
    auto cert = IssueCertificate(ca, out.key_pem, t);
    EXPECT_TRUE(cert.ok()) << cert.status().message();
    out.cert_pem = cert.ok() ? *cert : "";
    return out;
  }

  // Keeps `worker` and `ca_cert_pem` in <work-dir>/tls as a joined worker does.
  void Store(const KeyAndCert& worker, const std::string& ca_cert_pem) {
    WriteText(tls_dir() + "/worker.key", worker.key_pem);
    WriteText(tls_dir() + "/worker.crt", worker.cert_pem);
    WriteText(tls_dir() + "/ca.crt", ca_cert_pem);
  }

  CredentialOptions Options() const {
    CredentialOptions o;
    o.coordinator = kNobody;
    o.name = "w1";
    o.work_dir = dir_.str();
    return o;
  }

  FakeClock clock_;
  testing::TempDir dir_{"convoy-credentials"};
  KeyAndCert ca_, other_ca_;
};

TEST(RenewAtTest, TwoThirdsOfTheLifetime) {
  CertInfo day;
  day.not_before_s = 1000;
  day.not_after_s = 1000 + kDay;
  EXPECT_EQ(RenewAtS(day), 1000 + 57600);
  EXPECT_EQ(RenewAtS(0, 300), 200);
  EXPECT_LT(RenewAtS(day), day.not_after_s);
}

TEST_F(WorkerCredentialsTest, ReusesAValidStoredCertificateWithoutAToken) {
  const KeyAndCert w1 = Issue(ca_, "w1", now_s() - 60, now_s() + kDay);
  Store(w1, ca_.cert_pem);
  CredentialOptions o = Options();
  o.ca_fingerprint = *CertificateFingerprint(ca_.cert_pem);  // matching: still reused
  auto creds = WorkerCredentials::Create(o, clock_, 100);
  ASSERT_TRUE(creds.ok()) << creds.status().message();
  EXPECT_TRUE((*creds)->renewable());
  EXPECT_EQ((*creds)->not_after_s(), InspectCertificate(w1.cert_pem)->not_after_s);
  EXPECT_NE((*creds)->Current(), nullptr);
}

TEST_F(WorkerCredentialsTest, RenewsAfterTwoThirdsOfTheLifetimeNotBeforeAndBeforeExpiry) {
  const int64_t from = now_s() - 60;
  const int64_t to = from + kDay;
  Store(Issue(ca_, "w1", from, to), ca_.cert_pem);
  auto creds = WorkerCredentials::Create(Options(), clock_, 100);
  ASSERT_TRUE(creds.ok()) << creds.status().message();
  uint64_t gen0 = 0;
  (*creds)->Current(&gen0);

  // A second before 2/3: nothing is due, nothing is dialled (the coordinator is nowhere).
  clock_.AdvanceMs((RenewAtS(from, to) - 1 - now_s()) * 1000);
  EXPECT_TRUE((*creds)->MaybeRenew().ok());

  // At 2/3, eight hours before expiry: the renewal is attempted (and fails: nobody there);
  // the current certificate stays in use.
  clock_.AdvanceMs(1000);
  ASSERT_LT(now_s(), to - 7 * 3600);
  Status renewed = (*creds)->MaybeRenew();
  EXPECT_EQ(renewed.code(), StatusCode::kUnavailable) << renewed.message();
  EXPECT_NE(renewed.message().find("renewal"), std::string::npos) << renewed.message();
  uint64_t gen = 0;
  (*creds)->Current(&gen);
  EXPECT_EQ(gen, gen0);
  EXPECT_EQ((*creds)->not_after_s(), to);

  // Still due a minute later (the renewal thread retries every minute), and in the last hour.
  clock_.AdvanceMs(60'000);
  EXPECT_FALSE((*creds)->MaybeRenew().ok());
  clock_.AdvanceMs((to - 1800 - now_s()) * 1000);
  EXPECT_FALSE((*creds)->MaybeRenew().ok());
}

TEST_F(WorkerCredentialsTest, OwnTlsFilesAndInsecureAreNeverRenewed) {
  const KeyAndCert w1 = Issue(ca_, "w1", now_s() - 60, now_s() + kDay);
  WriteText(dir_ / "w1.key", w1.key_pem);
  WriteText(dir_ / "w1.crt", w1.cert_pem);
  WriteText(dir_ / "ca.crt", ca_.cert_pem);
  CredentialOptions o = Options();
  o.tls_cert = dir_ / "w1.crt";
  o.tls_key = dir_ / "w1.key";
  o.tls_ca = dir_ / "ca.crt";
  auto own = WorkerCredentials::Create(o, clock_, 100);
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_FALSE((*own)->renewable());
  clock_.AdvanceMs(kDay / 4 * 3 * 1000);
  EXPECT_TRUE((*own)->MaybeRenew().ok());

  CredentialOptions plain = Options();
  plain.insecure = true;
  auto insecure = WorkerCredentials::Create(plain, clock_, 100);
  ASSERT_TRUE(insecure.ok());
  EXPECT_FALSE((*insecure)->renewable());
  EXPECT_TRUE((*insecure)->MaybeRenew().ok());
}

// Without a token, a stored certificate that cannot be used leaves the worker without
// credentials: the error says what to pass, and why the stored one was not taken.
TEST_F(WorkerCredentialsTest, RefusesAStoredCertificateForAnotherName) {
  Store(Issue(ca_, "w2", now_s() - 60, now_s() + kDay), ca_.cert_pem);
  auto creds = WorkerCredentials::Create(Options(), clock_, 100);
  ASSERT_FALSE(creds.ok());
  EXPECT_EQ(creds.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(creds.status().message().find("is for 'w2'"), std::string::npos)
      << creds.status().message();
}

TEST_F(WorkerCredentialsTest, RefusesAnExpiredStoredCertificate) {
  Store(Issue(ca_, "w1", now_s() - 2 * kDay, now_s() - kDay), ca_.cert_pem);
  auto creds = WorkerCredentials::Create(Options(), clock_, 100);
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("--join-token"), std::string::npos);
  EXPECT_NE(creds.status().message().find("stored:"), std::string::npos)
      << creds.status().message();
}

TEST_F(WorkerCredentialsTest, RefusesAStoredCertificateOfAnotherCa) {
  // Signed by another CA than the stored one.
  Store(Issue(other_ca_, "w1", now_s() - 60, now_s() + kDay), ca_.cert_pem);
  auto creds = WorkerCredentials::Create(Options(), clock_, 100);
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("stored:"), std::string::npos)
      << creds.status().message();

  // A consistent set of another cluster than --ca-fingerprint's: not reused, the worker
  // joins anew (here: tries to, and finds nobody).
  Store(Issue(other_ca_, "w1", now_s() - 60, now_s() + kDay), other_ca_.cert_pem);
  CredentialOptions o = Options();
  o.join_token = "cvt_test";
  o.ca_fingerprint = *CertificateFingerprint(ca_.cert_pem);
  auto rejoin = WorkerCredentials::Create(o, clock_, 100);
  ASSERT_FALSE(rejoin.ok());
  EXPECT_EQ(rejoin.status().code(), StatusCode::kUnavailable) << rejoin.status().message();
  EXPECT_NE(rejoin.status().message().find("cannot join"), std::string::npos);
}

TEST_F(WorkerCredentialsTest, NoCredentialsAtAllSaysWhatToPass) {
  auto creds = WorkerCredentials::Create(Options(), clock_, 100);
  ASSERT_FALSE(creds.ok());
  EXPECT_EQ(creds.status().code(), StatusCode::kInvalidArgument);
  for (const char* flag : {"--join-token", "--ca-fingerprint", "--tls-cert", "--insecure"}) {
    EXPECT_NE(creds.status().message().find(flag), std::string::npos)
        << flag << ": " << creds.status().message();
  }
}

// A crash between Store's renames left the new key in place and the new certificate in
// worker.crt.tmp: the next start completes the store instead of losing the identity.
TEST_F(WorkerCredentialsTest, CompletesAStoreCutShortByACrash) {
  const KeyAndCert old_cert = Issue(ca_, "w1", now_s() - 60, now_s() + kDay);
  const KeyAndCert new_cert = Issue(ca_, "w1", now_s() - 30, now_s() + kDay + 30);
  Store(old_cert, ca_.cert_pem);
  WriteText(tls_dir() + "/worker.key", new_cert.key_pem);
  WriteText(tls_dir() + "/worker.crt.tmp", new_cert.cert_pem);
  auto creds = WorkerCredentials::Create(Options(), clock_, 100);
  ASSERT_TRUE(creds.ok()) << creds.status().message();
  EXPECT_EQ((*creds)->not_after_s(), now_s() + kDay + 30);
  EXPECT_EQ(ReadText(tls_dir() + "/worker.crt"), new_cert.cert_pem);
  EXPECT_FALSE(Exists(tls_dir() + "/worker.crt.tmp"));
}

// A crash while the temporaries were written: they are debris, the old set stands.
TEST_F(WorkerCredentialsTest, IgnoresTemporariesOfAnUnfinishedStore) {
  const KeyAndCert old_cert = Issue(ca_, "w1", now_s() - 60, now_s() + kDay);
  Store(old_cert, ca_.cert_pem);
  WriteText(tls_dir() + "/ca.crt.tmp", ca_.cert_pem);
  WriteText(tls_dir() + "/worker.key.tmp", *NewPrivateKey());
  auto creds = WorkerCredentials::Create(Options(), clock_, 100);
  ASSERT_TRUE(creds.ok()) << creds.status().message();
  EXPECT_EQ((*creds)->not_after_s(), now_s() + kDay);
  EXPECT_EQ(ReadText(tls_dir() + "/worker.key"), old_cert.key_pem);
  EXPECT_FALSE(Exists(tls_dir() + "/worker.key.tmp"));
  EXPECT_FALSE(Exists(tls_dir() + "/ca.crt.tmp"));
}

TEST_F(WorkerCredentialsTest, OwnTlsFilesAreCheckedNamingTheFlag) {
  const KeyAndCert w1 = Issue(ca_, "w1", now_s() - 60, now_s() + kDay);
  const KeyAndCert w2 = Issue(ca_, "w2", now_s() - 60, now_s() + kDay);
  WriteText(dir_ / "w1.key", w1.key_pem);
  WriteText(dir_ / "w1.crt", w1.cert_pem);
  WriteText(dir_ / "w2.key", w2.key_pem);
  WriteText(dir_ / "w2.crt", w2.cert_pem);
  WriteText(dir_ / "ca.crt", ca_.cert_pem);
  WriteText(dir_ / "other.crt", other_ca_.cert_pem);
  WriteText(dir_ / "junk", "not a certificate");
  struct Case {
    std::string cert, key, ca, expected;
  };
  const std::vector<Case> cases = {
      {"w1.crt", "w2.key", "ca.crt", "--tls-key"},
      {"w1.crt", "w1.key", "other.crt", "--tls-ca"},
      {"w2.crt", "w2.key", "ca.crt", "--name"},
      {"missing.crt", "w1.key", "ca.crt", "--tls-cert"},
      {"junk", "w1.key", "ca.crt", "--tls-cert"},
      {"w1.crt", "w1.key", "junk", "--tls-ca"},
  };
  for (const Case& c : cases) {
    CredentialOptions o = Options();
    o.tls_cert = dir_ / c.cert;
    o.tls_key = dir_ / c.key;
    o.tls_ca = dir_ / c.ca;
    auto creds = WorkerCredentials::Create(o, clock_, 100);
    ASSERT_FALSE(creds.ok()) << c.cert << " " << c.key << " " << c.ca;
    EXPECT_EQ(creds.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(creds.status().message().find(c.expected), std::string::npos)
        << c.expected << ": " << creds.status().message();
  }
}

TEST(CheckWorkerCertificateTest, SaysWhatIsWrong) {
  const int64_t now = 1'700'000'000;
  auto ca = NewCertificateAuthority("ca", now, kDay);
  auto other = NewCertificateAuthority("other", now, kDay);
  ASSERT_TRUE(ca.ok() && other.ok());
  const std::string key = *NewPrivateKey();
  CertTemplate t;
  t.common_name = "w1";
  t.client = true;
  t.not_before_s = now;
  t.not_after_s = now + 3600;
  const std::string cert = *IssueCertificate(*ca, key, t);
  const std::string fp = *CertificateFingerprint(ca->cert_pem);
  EXPECT_TRUE(CheckWorkerCertificate(key, cert, ca->cert_pem, "w1", fp, now + 10).ok());
  EXPECT_TRUE(CheckWorkerCertificate(key, cert, ca->cert_pem, "w1", "", now + 10).ok());
  EXPECT_FALSE(CheckWorkerCertificate(key, cert, ca->cert_pem, "w2", fp, now + 10).ok());
  EXPECT_FALSE(CheckWorkerCertificate(key, cert, ca->cert_pem, "w1", fp, now + 7200).ok());
  EXPECT_FALSE(CheckWorkerCertificate(*NewPrivateKey(), cert, ca->cert_pem, "w1", fp, now).ok());
  EXPECT_FALSE(CheckWorkerCertificate(key, cert, other->cert_pem, "w1", "", now + 10).ok());
  Status wrong_ca = CheckWorkerCertificate(key, cert, ca->cert_pem, "w1",
                                           *CertificateFingerprint(other->cert_pem), now + 10);
  EXPECT_NE(wrong_ca.message().find("--ca-fingerprint"), std::string::npos);
}

// ---- the credential flags (worker/daemon/flags.h)

Status Parse(std::vector<std::string> args, WorkerFlags* flags, int* exit_code) {
  args.insert(args.begin(), "convoy-worker");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseWorkerFlags(static_cast<int>(argv.size()), argv.data(), flags, exit_code);
}

// A well-formed fingerprint (SHA256: and 64 hex digits), of no CA in particular.
const std::string kFingerprint = "SHA256:" + std::string(64, 'a');

std::vector<std::string> Base(const std::string& coordinator) {
  return {"--coordinator", coordinator, "--name", "w1", "--work-dir", "/tmp/w1"};
}

TEST(WorkerFlagsTest, InsecureOnlyToALoopbackCoordinator) {
  for (const char* target : {"127.0.0.1:7000", "127.3.2.1:7000", "localhost:7000", "[::1]:7000"}) {
    WorkerFlags f;
    int code = -1;
    auto args = Base(target);
    args.push_back("--insecure");
    Status st = Parse(args, &f, &code);
    EXPECT_TRUE(st.ok()) << target << ": " << st.message();
    EXPECT_EQ(code, 0);
  }
  for (const char* target : {"10.0.0.1:7000", "coordinator.example:7000", "0.0.0.0:7000"}) {
    WorkerFlags f;
    int code = -1;
    auto args = Base(target);
    args.push_back("--insecure");
    Status st = Parse(args, &f, &code);
    ASSERT_FALSE(st.ok()) << target;
    EXPECT_EQ(code, 2);
    EXPECT_NE(st.message().find("--insecure"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("loopback"), std::string::npos) << st.message();
  }
}

TEST(WorkerFlagsTest, CredentialFlagsGoTogether) {
  struct Case {
    std::vector<std::string> extra;
    std::string expected;  // empty: accepted
  };
  const std::vector<Case> cases = {
      {{"--join-token", "t", "--ca-fingerprint", kFingerprint}, ""},
      {{"--join-token", "t"}, "--ca-fingerprint"},
      {{"--join-token", "t", "--ca-fingerprint", "SHA256:abcd"}, "64 hex digits"},
      {{"--tls-cert", "c", "--tls-key", "k", "--tls-ca", "a"}, ""},
      {{"--tls-cert", "c", "--tls-key", "k"}, "--tls-ca"},
      {{"--insecure", "--join-token", "t", "--ca-fingerprint", kFingerprint}, "--insecure"},
      // Nothing: accepted here (a joined worker restarts from its stored certificate);
      // WorkerCredentials::Create says what to pass when there is none.
      {{}, ""},
  };
  for (const Case& c : cases) {
    WorkerFlags f;
    int code = -1;
    auto args = Base("127.0.0.1:7000");
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    Status st = Parse(args, &f, &code);
    if (c.expected.empty()) {
      EXPECT_TRUE(st.ok()) << st.message();
    } else {
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(code, 2);
      EXPECT_NE(st.message().find(c.expected), std::string::npos)
          << c.expected << ": " << st.message();
    }
  }
}

TEST(WorkerFlagsTest, JoinTokenFromTheEnvironment) {
  setenv("CONVOY_JOIN_TOKEN", "cvt_from_env", 1);
  WorkerFlags f;
  int code = -1;
  auto args = Base("10.0.0.1:7000");
  args.insert(args.end(), {"--ca-fingerprint", kFingerprint});
  Status st = Parse(args, &f, &code);
  unsetenv("CONVOY_JOIN_TOKEN");
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(f.join_token, "cvt_from_env");
}

}  // namespace worker_credentials_test
}  // namespace convoy
