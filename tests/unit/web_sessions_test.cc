// The web UI's logins and sessions (coordinator/web/ui_sessions.h) on a fake clock: a login
// code works once and for a minute; a session ends when idle, when too old, at logout, and
// when its token may no longer be used; CSRF tokens are the session's own.
#include "coordinator/web/ui_sessions.h"

#include <gtest/gtest.h>

#include <set>

namespace convoy {
namespace web_sessions_test {

Principal Alice() {
  Principal p;
  p.kind = Principal::Kind::kUser;
  p.name = "alice";
  p.role = Role::kUser;
  p.token_id = "tok-alice";
  return p;
}

class WebSessionsTest : public ::testing::Test {
 protected:
  UiSessions::Options Options() {
    UiSessions::Options o;
    o.login_code_ttl_ms = 60'000;
    o.idle_ms = 3'600'000;
    o.max_age_ms = 4 * 3'600'000;
    return o;
  }
  FakeClock clock_;
  std::set<std::string> revoked_;
  UiSessions sessions_{clock_, Options(),
                       [this](const std::string& id) { return revoked_.count(id) == 0; }};
};

TEST_F(WebSessionsTest, ACodeOpensOneSessionBoundToItsToken) {
  const UiLoginCode code = sessions_.IssueCode(Alice());
  EXPECT_EQ(code.code.size(), 64u);
  EXPECT_EQ(code.expires_unix_ms, clock_.NowUnixMs() + 60'000);
  auto s = sessions_.Redeem(code.code);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->who.name, "alice");
  EXPECT_EQ(s->who.role, Role::kUser);
  EXPECT_EQ(s->who.token_id, "tok-alice");
  EXPECT_EQ(s->id.size(), 64u);
  EXPECT_EQ(s->csrf.size(), 64u);
  EXPECT_NE(s->id, s->csrf);
  auto found = sessions_.Find(s->id);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->who.name, "alice");
  EXPECT_EQ(found->csrf, s->csrf);
  // Once only.
  auto again = sessions_.Redeem(code.code);
  EXPECT_EQ(again.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(again.status().message().find("used already"), std::string::npos);
  EXPECT_EQ(sessions_.Redeem("").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(sessions_.Find("not-a-session").status().code(), StatusCode::kUnauthenticated);
}

TEST_F(WebSessionsTest, ACodeExpiresAfterAMinute) {
  const UiLoginCode late = sessions_.IssueCode(Alice());
  const UiLoginCode in_time = sessions_.IssueCode(Alice());
  clock_.AdvanceMs(59'999);
  EXPECT_TRUE(sessions_.Redeem(in_time.code).ok());
  clock_.AdvanceMs(1);
  auto s = sessions_.Redeem(late.code);
  EXPECT_EQ(s.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(s.status().message().find("expired"), std::string::npos);
}

TEST_F(WebSessionsTest, ASessionEndsWhenIdleTooLong) {
  auto s = sessions_.Redeem(sessions_.IssueCode(Alice()).code);
  ASSERT_TRUE(s.ok());
  clock_.AdvanceMs(3'599'000);
  ASSERT_TRUE(sessions_.Find(s->id).ok());  // a request: idle time starts again
  clock_.AdvanceMs(3'599'000);
  ASSERT_TRUE(sessions_.Find(s->id).ok());
  clock_.AdvanceMs(3'600'000);
  auto gone = sessions_.Find(s->id);
  EXPECT_EQ(gone.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(gone.status().message().find("expired"), std::string::npos);
  EXPECT_EQ(sessions_.size(), 0u);
}

TEST_F(WebSessionsTest, ASessionEndsAtItsMaximumAgeHoweverBusy) {
  auto s = sessions_.Redeem(sessions_.IssueCode(Alice()).code);
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 7; ++i) {
    clock_.AdvanceMs(30 * 60'000);
    ASSERT_TRUE(sessions_.Find(s->id).ok()) << i;
  }
  clock_.AdvanceMs(30 * 60'000);  // 4 h after it opened
  EXPECT_EQ(sessions_.Find(s->id).status().code(), StatusCode::kUnauthenticated);
}

TEST_F(WebSessionsTest, RevokingTheTokenEndsItsSessionsAndItsUnusedCodes) {
  auto s = sessions_.Redeem(sessions_.IssueCode(Alice()).code);
  ASSERT_TRUE(s.ok());
  const UiLoginCode pending = sessions_.IssueCode(Alice());
  Principal bob = Alice();
  bob.name = "bob";
  bob.token_id = "tok-bob";
  UiSession other = sessions_.Open(bob);
  revoked_.insert("tok-alice");
  // Sweep (the UI server's second) ends it, saying which, so that its streams end too.
  const std::vector<std::string> ended = sessions_.Sweep();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0], UiSessions::Key(s->id));
  EXPECT_EQ(sessions_.Find(s->id).status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(sessions_.Redeem(pending.code).status().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(sessions_.Find(other.id).ok());
}

TEST_F(WebSessionsTest, FindChecksTheTokenOnEveryRequest) {
  UiSession s = sessions_.Open(Alice());
  ASSERT_TRUE(sessions_.Find(s.id).ok());
  revoked_.insert("tok-alice");
  auto gone = sessions_.Find(s.id);
  EXPECT_EQ(gone.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(gone.status().message().find("revoked"), std::string::npos);
}

TEST_F(WebSessionsTest, LogoutEndsOnlyThatSession) {
  UiSession a = sessions_.Open(Alice());
  UiSession b = sessions_.Open(Alice());
  sessions_.End(a.id);
  EXPECT_FALSE(sessions_.Find(a.id).ok());
  EXPECT_TRUE(sessions_.Find(b.id).ok());
}

TEST_F(WebSessionsTest, CsrfTokensAreTheSessionsOwn) {
  UiSession a = sessions_.Open(Alice());
  UiSession b = sessions_.Open(Alice());
  EXPECT_TRUE(UiSessions::CsrfMatches(a, a.csrf));
  EXPECT_FALSE(UiSessions::CsrfMatches(a, b.csrf));
  EXPECT_FALSE(UiSessions::CsrfMatches(a, ""));
  EXPECT_FALSE(UiSessions::CsrfMatches(a, a.csrf.substr(1)));
  UiSession none;
  EXPECT_FALSE(UiSessions::CsrfMatches(none, ""));
}

TEST(WebSessionsBoundsTest, TheOldestSessionGivesWayPastTheBound) {
  FakeClock clock;
  UiSessions::Options o;
  o.max_sessions = 2;
  UiSessions sessions(clock, o, nullptr);
  UiSession first = sessions.Open(Alice());
  clock.AdvanceMs(1);
  UiSession second = sessions.Open(Alice());
  clock.AdvanceMs(1);
  UiSession third = sessions.Open(Alice());
  EXPECT_FALSE(sessions.Find(first.id).ok());
  EXPECT_TRUE(sessions.Find(second.id).ok());
  EXPECT_TRUE(sessions.Find(third.id).ok());
  EXPECT_EQ(sessions.size(), 2u);
}

}  // namespace web_sessions_test
}  // namespace convoy
