// `convoy ui`'s login URL (client/ui.h): the coordinator's answer, and the host the CLI
// reached it by when the UI listens on every interface.
#include "client/ui.h"

#include <gtest/gtest.h>

namespace convoy {
namespace client_ui_test {

v1::CreateUiLoginResponse Link(const std::string& host) {
  v1::CreateUiLoginResponse r;
  r.set_scheme("https");
  r.set_host(host);
  r.set_port(7443);
  r.set_path("/login#code=abc");
  return r;
}

TEST(ClientUiTest, TheUrlUsesTheCoordinatorsHostElseTheOneTheCliReached) {
  EXPECT_EQ(UiLoginUrl(Link("coord.example"), "10.0.0.5:7070", "ipv4:10.0.0.5:7070"),
            "https://coord.example:7443/login#code=abc");
  EXPECT_EQ(UiLoginUrl(Link(""), "coord-a.example:7070", "ipv4:10.0.0.5:7070"),
            "https://coord-a.example:7443/login#code=abc");
  // Several coordinators (an etcd group): the one that answered.
  EXPECT_EQ(UiLoginUrl(Link(""), "a.example:7070,b.example:7070", "ipv4:10.0.0.6:7070"),
            "https://10.0.0.6:7443/login#code=abc");
  EXPECT_EQ(UiLoginUrl(Link(""), "a:7070,b:7070", "ipv6:[fd00::1]:7070"),
            "https://[fd00::1]:7443/login#code=abc");
  EXPECT_EQ(UiLoginUrl(Link("::1"), "", ""), "https://[::1]:7443/login#code=abc");
}

TEST(ClientUiTest, AJobMakesTheLoginGoOnToItsPage) {
  EXPECT_EQ(UiLoginUrl(Link("h"), "h:1", "", "j-000007"),
            "https://h:7443/login?next=/jobs/j-000007#code=abc");
  // Nothing but a valid job id goes into the URL.
  EXPECT_EQ(UiLoginUrl(Link("h"), "h:1", "", "../x?y#z"), "https://h:7443/login#code=abc");
}

}  // namespace client_ui_test
}  // namespace convoy
