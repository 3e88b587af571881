// The web UI's HTTP messages (coordinator/web/http_message.h): the request parser's limits
// and refusals, the codecs, and the response head every page and error gets.
#include "coordinator/web/http_message.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include "coordinator/web/ui_assets.h"
#include "coordinator/web/ui_server.h"

namespace convoy {
namespace web_http_test {

using Result = HttpRequestParser::Result;

struct Parsed {
  Result result;
  HttpRequest req;
  int status = 0;
  std::string error;
};

Parsed Parse(std::string& buffer, HttpLimits limits = {}) {
  Parsed p;
  p.result = HttpRequestParser(limits).Parse(buffer, &p.req, &p.status, &p.error);
  return p;
}

TEST(WebHttpTest, ParsesARequestAndLeavesThePipelinedNextOne) {
  std::string buf =
      "POST /api/jobs/j-000001/cancel?x=a%20b&y=1+2 HTTP/1.1\r\nHost: h:1\r\n"
      "Content-Type: application/json\r\nCookie: a=1; convoy_session=\"abc\"\r\n"
      "X-Twice: 1\r\nx-twice: 2\r\nContent-Length: 2\r\n\r\n{}GET / HTTP/1.1\r\n";
  Parsed p = Parse(buf);
  ASSERT_EQ(p.result, Result::kDone) << p.error;
  EXPECT_EQ(p.req.method, "POST");
  EXPECT_EQ(p.req.path, "/api/jobs/j-000001/cancel");
  EXPECT_EQ(p.req.Query("x"), "a b");
  EXPECT_EQ(p.req.Query("y"), "1 2");
  EXPECT_EQ(p.req.Header("content-type"), "application/json");
  EXPECT_EQ(p.req.Header("x-twice"), "1, 2");
  EXPECT_EQ(p.req.Cookie("convoy_session"), "abc");
  EXPECT_EQ(p.req.Cookie("a"), "1");
  EXPECT_EQ(p.req.Cookie("missing"), "");
  EXPECT_EQ(p.req.body, "{}");
  EXPECT_TRUE(p.req.keep_alive);
  EXPECT_EQ(buf, "GET / HTTP/1.1\r\n");  // the next request's bytes stay
  EXPECT_EQ(Parse(buf).result, Result::kNeedMore);
}

TEST(WebHttpTest, WaitsForTheWholeBody) {
  std::string buf = "POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nab";
  EXPECT_EQ(Parse(buf).result, Result::kNeedMore);
  buf += "cde";
  Parsed p = Parse(buf);
  ASSERT_EQ(p.result, Result::kDone);
  EXPECT_EQ(p.req.body, "abcde");
  EXPECT_TRUE(buf.empty());
}

TEST(WebHttpTest, KeepAliveFollowsTheVersionAndConnection) {
  std::string close = "GET / HTTP/1.1\r\nConnection: close\r\n\r\n";
  EXPECT_FALSE(Parse(close).req.keep_alive);
  std::string old = "GET / HTTP/1.0\r\n\r\n";
  EXPECT_FALSE(Parse(old).req.keep_alive);
  std::string old_kept = "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n";
  EXPECT_TRUE(Parse(old_kept).req.keep_alive);
}

TEST(WebHttpTest, RefusesWhatItDoesNotServeNamingThePart) {
  const struct {
    std::string request;
    int status;
    std::string says;
  } cases[] = {
      {"GET / HTTP/2.0\r\n\r\n", 505, "HTTP/1.0 and HTTP/1.1"},
      {"GET /\r\n\r\n", 400, "request line"},
      {"GET  / HTTP/1.1\r\n\r\n", 400, "request line"},
      {"G(T / HTTP/1.1\r\n\r\n", 400, "method"},
      {"GET http://x/ HTTP/1.1\r\n\r\n", 400, "request target"},
      {"GET /a%zz HTTP/1.1\r\n\r\n", 400, "percent-escape"},
      {"GET /a%00 HTTP/1.1\r\n\r\n", 400, "percent-escape"},
      {"GET /?q=%4 HTTP/1.1\r\n\r\n", 400, "query"},
      {"GET / HTTP/1.1\r\nNo colon\r\n\r\n", 400, "headers"},
      {"GET / HTTP/1.1\r\n folded\r\n\r\n", 400, "folded"},
      {"POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400, "content-length"},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400, "twice"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501, "transfer-encoding"},
      {"POST / HTTP/1.1\r\nContent-Length: 100000\r\n\r\n", 413, "body"},
  };
  for (const auto& c : cases) {
    std::string buf = c.request;
    Parsed p = Parse(buf);
    EXPECT_EQ(p.result, Result::kError) << c.request;
    EXPECT_EQ(p.status, c.status) << c.request << ": " << p.error;
    EXPECT_NE(p.error.find(c.says), std::string::npos) << c.request << ": " << p.error;
  }
}

TEST(WebHttpTest, AHeadOverTheLimitIsRefusedBeforeItEnds) {
  HttpLimits limits;
  limits.max_header_bytes = 64;
  std::string buf = "GET / HTTP/1.1\r\nX-Long: " + std::string(100, 'a');  // no end yet
  Parsed p = Parse(buf, limits);
  EXPECT_EQ(p.result, Result::kError);
  EXPECT_EQ(p.status, 431);
}

TEST(WebHttpTest, Codecs) {
  std::string out;
  EXPECT_TRUE(PercentDecode("a%2Fb+c", false, &out));
  EXPECT_EQ(out, "a/b+c");
  EXPECT_TRUE(PercentDecode("a+c", true, &out));
  EXPECT_EQ(out, "a c");
  EXPECT_FALSE(PercentDecode("%", false, &out));
  EXPECT_FALSE(PercentDecode("%4", false, &out));
  EXPECT_FALSE(PercentDecode("%g0", false, &out));
  std::map<std::string, std::string> q;
  EXPECT_TRUE(ParseQuery("a=1&&b&c=x%3Dy", &q));
  EXPECT_EQ(q["a"], "1");
  EXPECT_EQ(q.count("b"), 1u);
  EXPECT_EQ(q["c"], "x=y");
  EXPECT_EQ(CookieValue("a=1;b=2", "b"), "2");
  EXPECT_EQ(CookieValue("ab=1; b=2", "b"), "2");
  EXPECT_EQ(CookieValue("ab=1", "b"), "");
  // JSON text of anything, control characters and bytes that are not UTF-8 included.
  EXPECT_EQ(JsonQuote("a\"<b>\n"), "\"a\\\"<b>\\n\"");
  EXPECT_EQ(JsonQuote(std::string("x\xff", 2)), "\"x\xef\xbf\xbd\"");
}

TEST(WebHttpTest, TheHeadCarriesTheSecurityPolicyAndTheLength) {
  HttpResponse r = HttpResponse::Error(403, "no <b>");
  EXPECT_EQ(r.body, "{\"error\":\"no <b>\"}");
  const std::string head = HttpHead(r, UiSecurityHeaders(), true, false);
  EXPECT_EQ(head.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Length: " + std::to_string(r.body.size()) + "\r\n"),
            std::string::npos);
  EXPECT_NE(head.find("Connection: keep-alive\r\n"), std::string::npos);
  // No inline script or style, nothing from elsewhere, no framing.
  EXPECT_NE(head.find("Content-Security-Policy: default-src 'none'; script-src 'self'; "
                      "style-src 'self';"),
            std::string::npos)
      << head;
  EXPECT_EQ(head.find("unsafe-inline"), std::string::npos);
  EXPECT_EQ(head.find("unsafe-eval"), std::string::npos);
  EXPECT_NE(head.find("frame-ancestors 'none'"), std::string::npos);
  EXPECT_NE(head.find("X-Content-Type-Options: nosniff\r\n"), std::string::npos);
  EXPECT_NE(head.find("Referrer-Policy: no-referrer\r\n"), std::string::npos);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
  // A stream: no length, the connection closes at its end.
  const std::string stream = HttpHead(r, {}, true, true);
  EXPECT_EQ(stream.find("Content-Length"), std::string::npos);
  EXPECT_NE(stream.find("Connection: close\r\n"), std::string::npos);
}

TEST(WebHttpTest, GzipIsGzipAndOnlyWhenAsked) {
  const std::string text(20000, 'x');
  std::string gz;
  ASSERT_TRUE(Gzip(text, 1, &gz));
  EXPECT_LT(gz.size(), 200u);
  ASSERT_GT(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // the gzip magic
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  std::string back(text.size(), '\0');
  z_stream z{};
  ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(gz.data());
  z.avail_in = static_cast<uInt>(gz.size());
  z.next_out = reinterpret_cast<Bytef*>(back.data());
  z.avail_out = static_cast<uInt>(back.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  inflateEnd(&z);
  EXPECT_EQ(back, text);
  HttpRequest req;
  EXPECT_FALSE(AcceptsGzip(req));
  req.headers["accept-encoding"] = "gzip, deflate, br";
  EXPECT_TRUE(AcceptsGzip(req));
  HttpResponse r;
  UseGzip(&r, gz);
  const std::string head = HttpHead(r, {}, true, false);
  EXPECT_NE(head.find("Content-Encoding: gzip\r\n"), std::string::npos);
  EXPECT_NE(head.find("Content-Length: " + std::to_string(gz.size())), std::string::npos);
}

TEST(WebHttpTest, TheUisScriptsPutTextIntoThePageNeverHtml) {
  // Every user string reaches the page through textContent or text nodes; none of the ways
  // to parse a string as HTML appears in our scripts (uPlot, vendored, is not ours).
  for (const char* path : {"/static/app.js", "/static/charts.js"}) {
    const UiAsset* asset = FindUiAsset(path);
    ASSERT_NE(asset, nullptr) << path;
    const std::string js(reinterpret_cast<const char*>(asset->data), asset->size);
    for (const char* sink : {".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write",
                             "eval(", "new Function", "createContextualFragment"}) {
      EXPECT_EQ(js.find(sink), std::string::npos) << sink << " in " << path;
    }
  }
  // The page has no inline script or style (the policy would refuse them anyway).
  const UiAsset* page = FindUiAsset("/index.html");
  ASSERT_NE(page, nullptr);
  const std::string html(reinterpret_cast<const char*>(page->data), page->size);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_EQ(html.find("<style"), std::string::npos);
  EXPECT_EQ(html.find(" style="), std::string::npos);
  EXPECT_EQ(html.find(" on"), std::string::npos);  // no inline handler
  EXPECT_EQ(html.find("//cdn"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);  // nothing from elsewhere
}

}  // namespace web_http_test
}  // namespace convoy
