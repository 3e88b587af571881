// The web UI's HTTP layer on a real secure coordinator (TestCluster, HTTPS on loopback): the
// security headers on every response, the one-time login link and the session cookie, CSRF
// on every change, the same rights and redaction as gRPC on every endpoint (streams
// included), and sessions that end at logout, on revocation and on the coordinator's clock.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>

#include "common/mutex.h"
#include "coordinator/web/ui_server.h"
#include "tests/support/http_client.h"
#include "tests/support/test_cluster.h"

namespace convoy {
namespace coordinator_ui_test {

using testing::HttpCall;
using testing::HttpConnection;
using testing::HttpReply;
using namespace std::chrono_literals;

const char* kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'";

struct Session {
  std::string cookie;  // "convoy_session=..."
  std::string csrf;
};

class CoordinatorUiTest : public ::testing::Test {
 protected:
  static testing::TestCluster::Options Options(const Clock* clock = nullptr) {
    auto o = testing::TestCluster::DefaultOptions();
    o.secure = true;
    o.flags.ui_listen = "127.0.0.1:0";
    o.flags.max_streams_per_token = 2;
    o.clock = clock;
    return o;
  }
  void Start(const Clock* clock = nullptr) {
    cluster_ = std::make_unique<testing::TestCluster>(Options(clock));
    ASSERT_NE(cluster_->server().ui(), nullptr);
    port_ = cluster_->server().ui()->port();
    ca_ = cluster_->pki().ca.cert_pem;
  }
  std::string Origin() const { return "Origin: https://127.0.0.1:" + std::to_string(port_); }

  HttpReply Call(const std::string& method, const std::string& target,
                 std::vector<std::string> headers = {}, const std::string& body = "") {
    return HttpCall(port_, ca_, method, target, headers, body);
  }
  HttpReply Get(const Session& s, const std::string& target) {
    return Call("GET", target, {"Cookie: " + s.cookie});
  }
  HttpReply Post(const Session& s, const std::string& target, const std::string& body = "{}") {
    return Call("POST", target,
                {"Cookie: " + s.cookie, "X-CSRF-Token: " + s.csrf, "Content-Type: application/json",
                 Origin(), "Sec-Fetch-Site: same-origin"},
                body);
  }

  // JobService.CreateUiLogin with `token`, as `convoy ui` asks.
  v1::CreateUiLoginResponse LoginLink(const std::string& token) {
    auto stub = v1::JobService::NewStub(cluster_->SecureChannel(token));
    grpc::ClientContext ctx;
    v1::CreateUiLoginResponse resp;
    grpc::Status st = stub->CreateUiLogin(&ctx, v1::CreateUiLoginRequest(), &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }
  static std::string CodeOf(const v1::CreateUiLoginResponse& link) {
    const std::string prefix = "/login#code=";
    return link.path().rfind(prefix, 0) == 0 ? link.path().substr(prefix.size()) : "";
  }
  HttpReply Redeem(const std::string& json_body, const std::string& origin = "") {
    return Call("POST", "/api/login",
                {"Content-Type: application/json", origin.empty() ? Origin() : origin}, json_body);
  }
  // A session for `token` through its login link.
  Session LogIn(const std::string& token) {
    Session s;
    HttpReply r = Redeem("{\"code\":\"" + CodeOf(LoginLink(token)) + "\"}");
    EXPECT_EQ(r.status, 200) << r.body;
    const std::string set = r.Header("set-cookie");
    s.cookie = set.substr(0, set.find(';'));
    HttpReply me = Get(s, "/api/session");
    EXPECT_EQ(me.status, 200) << me.body;
    s.csrf = nlohmann::json::parse(me.body, nullptr, false).value("csrf", "");
    return s;
  }
  // An event stream opened with `s`; `seen` gets what arrived.
  std::unique_ptr<HttpConnection> OpenStream(const Session& s, const std::string& target,
                                             std::string* seen) {
    auto c = std::make_unique<HttpConnection>(port_, ca_);
    EXPECT_TRUE(c->Write("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: " + s.cookie +
                         "\r\n\r\n"));
    EXPECT_TRUE(c->ReadUntil("retry: 3000", seen)) << *seen;
    return c;
  }
  std::string SubmitAs(const std::string& token, const v1::JobSpec& spec) {
    auto stub = v1::JobService::NewStub(cluster_->SecureChannel(token));
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    v1::SubmitJobResponse resp;
    grpc::Status st = stub->SubmitJob(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.job_id();
  }

  // A coordinator's clock for the tests that move it: declared before the cluster, so that it
  // outlives the coordinator's threads that read it.
  FakeClock fake_clock_{std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count()};
  std::unique_ptr<testing::TestCluster> cluster_;
  int port_ = 0;
  std::string ca_;
};

TEST_F(CoordinatorUiTest, EveryResponseCarriesTheSecurityHeaders) {
  Start();
  for (const char* path : {"/", "/jobs", "/jobs/j-000001", "/queue", "/workers", "/login",
                           "/static/app.js", "/static/charts.js", "/static/style.css",
                           "/static/uPlot.iife.min.js", "/static/uPlot.min.css", "/favicon.svg",
                           "/nope", "/api/session", "/api/jobs", "/api/nope"}) {
    HttpReply r = Call("GET", path);
    ASSERT_NE(r.status, 0) << path;
    EXPECT_EQ(r.Header("content-security-policy"), kCsp) << path;
    EXPECT_EQ(r.Header("x-content-type-options"), "nosniff") << path;
    EXPECT_EQ(r.Header("x-frame-options"), "DENY") << path;
    EXPECT_EQ(r.Header("referrer-policy"), "no-referrer") << path;
  }
  EXPECT_EQ(Call("GET", "/").status, 302);
  EXPECT_EQ(Call("GET", "/").Header("location"), "/jobs");
  HttpReply page = Call("GET", "/jobs/j-000007");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<script src=\"/static/app.js\" defer></script>"), std::string::npos);
  EXPECT_EQ(page.body.find("<script>"), std::string::npos);  // no inline script
  EXPECT_EQ(Call("GET", "/static/app.js").Header("content-type"), "text/javascript; charset=utf-8");
  // Compressed for a browser that takes gzip, with a tag of its own; never the API's secrets.
  HttpReply plain = Call("GET", "/static/uPlot.iife.min.js");
  HttpReply gz = Call("GET", "/static/uPlot.iife.min.js", {"Accept-Encoding: gzip"});
  EXPECT_EQ(plain.Header("content-encoding"), "");
  EXPECT_EQ(gz.Header("content-encoding"), "gzip");
  EXPECT_LT(gz.body.size(), plain.body.size() / 2);
  EXPECT_NE(gz.Header("etag"), plain.Header("etag"));
  EXPECT_EQ(Call("GET", "/static/app.js", {"If-None-Match: " + plain.Header("etag")}).status, 200);
  EXPECT_EQ(
      Call("GET", "/static/uPlot.iife.min.js", {"If-None-Match: " + plain.Header("etag")}).status,
      304);
  EXPECT_EQ(Call("GET", "/api/session", {"Accept-Encoding: gzip"}).Header("content-encoding"), "");
  // Not logged in: the API says so, and nothing else.
  HttpReply api = Call("GET", "/api/jobs");
  EXPECT_EQ(api.status, 401);
  EXPECT_EQ(api.body.find("\"jobs\""), std::string::npos);
  // The server's own refusal of a malformed request carries them too.
  HttpConnection raw(port_, ca_);
  ASSERT_TRUE(raw.Write("GET /\x01 HTTP/9.9\r\n\r\n"));
  HttpReply bad = testing::ParseHttpReply(raw.ReadAll());
  EXPECT_EQ(bad.status, 505);
  EXPECT_EQ(bad.Header("content-security-policy"), kCsp);
}

TEST_F(CoordinatorUiTest, ALoginLinkWorksOnceForAMinuteAndGivesAStrictCookie) {
  Start();
  const std::string viewer = cluster_->MakeToken("vic", Role::kViewer);
  const v1::CreateUiLoginResponse link = LoginLink(viewer);
  EXPECT_EQ(link.scheme(), "https");
  EXPECT_EQ(link.host(), "127.0.0.1");
  EXPECT_EQ(link.port(), port_);
  EXPECT_EQ(CodeOf(link).size(), 64u) << link.path();
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  EXPECT_NEAR(static_cast<double>(link.expires_unix_ms()), static_cast<double>(now_ms + 60'000),
              5'000);
  // Only from the UI's own page: another origin, another site, or a form's content type.
  const std::string body = "{\"code\":\"" + CodeOf(link) + "\"}";
  EXPECT_EQ(Redeem(body, "Origin: https://evil.example").status, 403);
  EXPECT_EQ(Call("POST", "/api/login", {"Content-Type: text/plain", Origin()}, body).status, 403);
  EXPECT_EQ(Call("POST", "/api/login",
                 {"Content-Type: application/json", "Sec-Fetch-Site: cross-site"}, body)
                .status,
            403);
  HttpReply r = Redeem(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string cookie = r.Header("set-cookie");
  EXPECT_EQ(cookie.rfind("convoy_session=", 0), 0u) << cookie;
  for (const char* attr : {"; HttpOnly", "; Secure", "; SameSite=Strict", "; Path=/"}) {
    EXPECT_NE(cookie.find(attr), std::string::npos) << attr << " in " << cookie;
  }
  EXPECT_EQ(cookie.find(viewer), std::string::npos);  // never the token itself
  EXPECT_EQ(Redeem(body).status, 401);                // once
  Session s{cookie.substr(0, cookie.find(';')), ""};
  HttpReply me = Get(s, "/api/session");
  ASSERT_EQ(me.status, 200);
  auto j = nlohmann::json::parse(me.body);
  EXPECT_EQ(j["user"], "vic");
  EXPECT_EQ(j["role"], "viewer");
  EXPECT_EQ(j["may"]["cancel"], false);
  EXPECT_EQ(j["csrf"].get<std::string>().size(), 64u);
  // A pasted token opens a session too; a wrong one does not.
  EXPECT_EQ(Redeem("{\"token\":\"" + viewer + "\"}").status, 200);
  EXPECT_EQ(Redeem("{\"token\":\"cvy_nope.nope\"}").status, 401);
  EXPECT_EQ(Redeem("{\"code\":\"" + std::string(64, 'a') + "\"}").status, 401);
}

TEST_F(CoordinatorUiTest, EveryChangeNeedsTheSessionsCsrfTokenFromTheUisOwnPage) {
  Start();
  Session admin = LogIn(cluster_->MakeToken("root", Role::kAdmin));
  const std::vector<std::string> base = {"Cookie: " + admin.cookie,
                                         "Content-Type: application/json", Origin()};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> h = base;
    h.insert(h.end(), extra.begin(), extra.end());
    return Call("POST", "/api/workers/w9/drain", h, "{}");
  };
  EXPECT_EQ(with({}).status, 403);  // no token
  EXPECT_EQ(with({"X-CSRF-Token: " + std::string(64, '0')}).status, 403);
  EXPECT_EQ(Call("POST", "/api/workers/w9/drain",
                 {"Cookie: " + admin.cookie, "Content-Type: application/json",
                  "Origin: https://evil.example", "X-CSRF-Token: " + admin.csrf},
                 "{}")
                .status,
            403);
  EXPECT_EQ(with({"X-CSRF-Token: " + admin.csrf, "Sec-Fetch-Site: cross-site"}).status, 403);
  EXPECT_EQ(Call("POST", "/api/workers/w9/drain",
                 {"Cookie: " + admin.cookie, "Content-Type: text/plain", Origin(),
                  "X-CSRF-Token: " + admin.csrf},
                 "{}")
                .status,
            415);
  // Past the checks: the coordinator's own answer (no such worker).
  EXPECT_EQ(with({"X-CSRF-Token: " + admin.csrf}).status, 404);
  // Another session's token is no good.
  Session other = LogIn(cluster_->MakeToken("root2", Role::kAdmin));
  EXPECT_EQ(with({"X-CSRF-Token: " + other.csrf}).status, 403);
  // Logout ends the session.
  EXPECT_EQ(Post(admin, "/api/logout").status, 200);
  EXPECT_EQ(Get(admin, "/api/session").status, 401);
  EXPECT_EQ(Get(other, "/api/session").status, 200);
}

TEST_F(CoordinatorUiTest, EveryEndpointHasTheRightsAndRedactionOfGrpc) {
  Start();
  cluster_->StartWorker("w1");
  const std::string alice_token = cluster_->MakeToken("alice", Role::kUser);
  const std::string secret = "hunter2-secret-value";
  // What the rank writes to stderr; its command, which everyone sees, does not hold it.
  const std::string stderr_line = "leaked-42-line";
  v1::JobSpec failing;
  failing.set_name("fails");
  failing.set_nodes(1);
  failing.set_procs_per_node(1);
  (*failing.mutable_env())["SECRET"] = secret;
  for (const char* a : {"sh", "-c", "echo leaked-$((40 + 2))-line >&2; exit 3"}) {
    failing.add_command(a);
  }
  const std::string failed = SubmitAs(alice_token, failing);
  ASSERT_TRUE(cluster_->WaitForState(failed, v1::FAILED));
  v1::JobSpec waiting = failing;
  waiting.set_name("waits");
  waiting.set_nodes(3);  // one worker: it waits
  const std::string pending = SubmitAs(alice_token, waiting);
  ASSERT_TRUE(
      cluster_->WaitFor([&] { return cluster_->GetJob(pending).queue_position() == 1; }, 10s));

  Session bob = LogIn(cluster_->MakeToken("bob", Role::kViewer));
  Session alice = LogIn(alice_token);
  Session admin = LogIn(cluster_->MakeToken("root", Role::kAdmin));
  auto hidden = [&](const HttpReply& r, const std::string& what) {
    EXPECT_EQ(r.status, 200) << what << ": " << r.body;
    EXPECT_EQ(r.body.find(secret), std::string::npos) << what;
    EXPECT_EQ(r.body.find(stderr_line), std::string::npos) << what;
  };
  // The viewer reads every job, without env values or stderr.
  HttpReply list = Get(bob, "/api/jobs");
  hidden(list, "/api/jobs");
  EXPECT_NE(list.body.find(failed), std::string::npos);
  EXPECT_NE(list.body.find("(redacted)"), std::string::npos);
  // Newest first.
  EXPECT_LT(list.body.find(pending), list.body.find(failed));
  HttpReply job = Get(bob, "/api/jobs/" + failed);
  hidden(job, "/api/jobs/ID");
  EXPECT_NE(job.body.find("code 3"), std::string::npos) << job.body;  // the root cause stays
  hidden(Get(bob, "/api/jobs?state=FAILED,PENDING&owner=alice"), "/api/jobs?state&owner");
  hidden(Get(bob, "/api/queue"), "/api/queue");
  EXPECT_NE(Get(bob, "/api/queue").body.find(pending), std::string::npos);
  hidden(Get(bob, "/api/jobs/" + failed + "/metrics"), "metrics");
  hidden(Get(bob, "/api/jobs/" + failed + "/series"), "series");
  hidden(Get(bob, "/api/workers"), "/api/workers");
  // The job's stream: it ended, so its snapshot and the end.
  std::string seen;
  auto events = OpenStream(bob, "/api/jobs/" + failed + "/events", &seen);
  EXPECT_TRUE(events->ReadUntil("event: end", &seen)) << seen;
  EXPECT_NE(seen.find("event: job"), std::string::npos);
  EXPECT_EQ(seen.find(secret), std::string::npos);
  EXPECT_EQ(seen.find(stderr_line), std::string::npos);
  // Logs, cancel, delete: owners and admins; drain: admins.
  HttpReply logs = Get(bob, "/api/jobs/" + failed + "/logs?rank=0");
  EXPECT_EQ(logs.status, 403);
  EXPECT_NE(logs.body.find("logs.read"), std::string::npos);
  EXPECT_EQ(Get(alice, "/api/jobs/" + failed + "/logs?rank=bad").status, 400);
  for (const std::string action : {"/cancel", "/delete"}) {
    HttpReply r = Post(bob, "/api/jobs/" + pending + action);
    EXPECT_EQ(r.status, 403) << action;
    EXPECT_NE(r.body.find("lacks the right"), std::string::npos) << r.body;
  }
  Session carol = LogIn(cluster_->MakeToken("carol", Role::kUser));
  HttpReply not_hers = Post(carol, "/api/jobs/" + pending + "/cancel");
  EXPECT_EQ(not_hers.status, 403);
  EXPECT_NE(not_hers.body.find("needs its owner or an admin"), std::string::npos);
  EXPECT_EQ(Post(carol, "/api/workers/w1/drain").status, 403);
  EXPECT_EQ(Post(bob, "/api/workers/w1/drain").status, 403);
  EXPECT_EQ(cluster_->GetJob(pending).state(), v1::PENDING);  // nothing happened

  // The owner sees it whole, reads its log, cancels it; the admin drains.
  HttpReply own = Get(alice, "/api/jobs/" + failed);
  EXPECT_NE(own.body.find(secret), std::string::npos);
  EXPECT_NE(own.body.find(stderr_line), std::string::npos);
  EXPECT_NE(Get(admin, "/api/jobs").body.find(secret), std::string::npos);
  std::string log;
  auto follow = OpenStream(alice, "/api/jobs/" + failed + "/logs?rank=0", &log);
  EXPECT_TRUE(follow->ReadUntil("event: end", &log)) << log;
  EXPECT_NE(log.find(stderr_line), std::string::npos) << log;
  HttpReply cancelled = Post(alice, "/api/jobs/" + pending + "/cancel");
  EXPECT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_NE(cancelled.body.find("\"state\":\"CANCELLED\""), std::string::npos);
  HttpReply drained = Post(admin, "/api/workers/w1/drain");
  EXPECT_EQ(drained.status, 200) << drained.body;
  EXPECT_NE(drained.body.find("\"drained\":true"), std::string::npos);
  EXPECT_EQ(Post(admin, "/api/workers/w1/undrain").status, 200);
}

TEST_F(CoordinatorUiTest, RevokingTheTokenEndsTheSessionAndItsStreams) {
  Start();
  const std::string token = cluster_->MakeToken("alice", Role::kUser);
  Session s = LogIn(token);
  std::string seen;
  auto stream = OpenStream(s, "/api/events", &seen);
  EXPECT_TRUE(stream->ReadUntil("event: changed", &seen));
  ASSERT_TRUE(cluster_->tokens().Revoke("alice").ok());
  EXPECT_TRUE(stream->ReadUntil("event: stop", &seen)) << seen;
  EXPECT_NE(seen.find("revoked"), std::string::npos);
  EXPECT_EQ(Get(s, "/api/session").status, 401);
}

TEST_F(CoordinatorUiTest, LogoutEndsTheSessionsStreams) {
  Start();
  Session s = LogIn(cluster_->MakeToken("alice", Role::kUser));
  std::string seen;
  auto stream = OpenStream(s, "/api/events", &seen);
  EXPECT_EQ(Post(s, "/api/logout").status, 200);
  EXPECT_TRUE(stream->ReadUntil("event: stop", &seen)) << seen;
}

TEST_F(CoordinatorUiTest, StreamsCountAgainstTheTokensLimit) {
  Start();
  const std::string token = cluster_->MakeToken("alice", Role::kUser);
  Session a = LogIn(token);
  Session b = LogIn(token);  // another browser, the same token
  std::string s1, s2;
  auto one = OpenStream(a, "/api/events", &s1);
  auto two = OpenStream(b, "/api/events", &s2);
  HttpReply third = Get(a, "/api/events");
  EXPECT_EQ(third.status, 429) << third.body;
  one->Close();
  ASSERT_TRUE(testing::TestCluster::WaitFor(
      [&] {
        std::string s3;
        HttpConnection c(port_, ca_);
        c.Write("GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: " + a.cookie + "\r\n\r\n");
        return c.ReadUntil("retry: 3000", &s3, 1000);
      },
      10s));
}

TEST_F(CoordinatorUiTest, SessionsAndLinksExpireOnTheCoordinatorsClock) {
  FakeClock& clock = fake_clock_;
  Start(&clock);
  const std::string token = cluster_->MakeToken("alice", Role::kUser);
  Session s = LogIn(token);
  const std::string late = CodeOf(LoginLink(token));
  clock.AdvanceMs(60'000);
  EXPECT_EQ(Redeem("{\"code\":\"" + late + "\"}").status, 401);
  ASSERT_EQ(Get(s, "/api/session").status, 200);
  clock.AdvanceMs(8 * 3600'000);
  EXPECT_EQ(Get(s, "/api/session").status, 401);
}

TEST(CoordinatorUiInsecureTest, PlainHttpAnswersLoopbackNamesOnly) {
  auto o = testing::TestCluster::DefaultOptions();
  o.flags.ui_listen = "127.0.0.1:0";
  testing::TestCluster cluster(o);
  const int port = cluster.server().ui()->port();
  HttpReply me = HttpCall(port, "", "GET", "/api/session");
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_NE(me.body.find("\"role\":\"admin\""), std::string::npos);
  // A page of another site whose name resolves to 127.0.0.1 (DNS rebinding) gets nothing.
  EXPECT_EQ(
      HttpCall(port, "", "GET", "/api/session", {"Host: evil.example:" + std::to_string(port)})
          .status,
      403);
  // Changes still need the page's CSRF token.
  EXPECT_EQ(HttpCall(port, "", "POST", "/api/workers/w1/drain", {"Content-Type: application/json"})
                .status,
            403);
  // Plain HTTP is for loopback only.
  UiServer::Options bad;
  bad.listen = "0.0.0.0:0";
  bad.insecure = true;
  SystemClock clock;
  auto refused = UiServer::Start(bad, clock);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--ui-listen"), std::string::npos);
}

TEST(CoordinatorUiFollowerTest, AFollowerRedirectsToTheLeadersUiUntilItLeads) {
  SystemClock clock;
  Mutex mu;
  std::string leader;  // guarded by mu
  UiServer::Options o;
  o.listen = "127.0.0.1:0";
  o.insecure = true;
  auto ui = UiServer::Start(o, clock, [&] {
    MutexLock lock(mu);
    return leader;
  });
  ASSERT_TRUE(ui.ok()) << ui.status().message();
  const int port = (*ui)->port();
  // Nobody leads yet (or etcd cannot say): 503, and when to ask again.
  HttpReply starting = HttpCall(port, "", "GET", "/jobs");
  EXPECT_EQ(starting.status, 503);
  EXPECT_EQ(starting.Header("retry-after"), "2");
  EXPECT_EQ(starting.Header("content-security-policy"), kCsp);
  {
    MutexLock lock(mu);
    leader = "127.0.0.9:7070";  // the leader's gRPC address, as its election key holds it
  }
  // The same page on the leader's host, at this UI's port (the group is configured alike).
  const std::string want = "http://127.0.0.9:" + std::to_string(port) + "/jobs/j-000003?x=1";
  ASSERT_TRUE(testing::TestCluster::WaitFor(
      [&] { return HttpCall(port, "", "GET", "/jobs/j-000003?x=1").Header("location") == want; },
      10s));
  EXPECT_EQ(HttpCall(port, "", "GET", "/jobs/j-000003?x=1").status, 307);
  {
    MutexLock lock(mu);
    leader = "0.0.0.0:7070";  // a wildcard names no host to go to
  }
  ASSERT_TRUE(testing::TestCluster::WaitFor(
      [&] { return HttpCall(port, "", "GET", "/jobs").status == 503; }, 10s));
  EXPECT_NE(HttpCall(port, "", "GET", "/jobs").body.find("follows 0.0.0.0:7070"),
            std::string::npos);
  // No login link from a follower.
  Principal local;
  local.kind = Principal::Kind::kLocal;
  EXPECT_EQ((*ui)->Login(local).status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace coordinator_ui_test
}  // namespace convoy
