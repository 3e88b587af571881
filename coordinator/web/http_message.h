// HTTP/1.1 messages as the web UI's server reads and writes them (RFC 9112), without sockets:
// an incremental request parser with hard limits, the response's head, and the small codecs
// the UI needs (percent-decoding, query strings, cookies). Everything here is a pure function
// or a value type, unit-tested on its own (tests/unit/web_http_test.cc).
//
// What is refused, and with which status (each with a message naming the part):
//  - a request line or header section over `max_header_bytes`: 431;
//  - a body over `max_body_bytes`: 413; a Transfer-Encoding (chunked request bodies): 501;
//  - anything malformed (request line, header syntax, Content-Length, a path that does not
//    start with '/', a percent-escape that is not two hex digits or decodes to NUL): 400;
//  - an HTTP version other than 1.0 and 1.1: 505.
//
// Threading: none; values and free functions.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace convoy {

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent
  std::string target;  // the request target as sent ("/api/jobs?state=RUNNING")
  std::string path;    // its path, percent-decoded ("/api/jobs")
  std::map<std::string, std::string> query;    // decoded; a repeated key keeps the last
  std::map<std::string, std::string> headers;  // lower-case names; repeats joined by ", "
  std::string body;
  bool keep_alive = true;  // HTTP/1.1 unless "Connection: close"; 1.0 only when asked
  std::string peer;        // "ADDRESS:PORT" of the client, set by the server

  // The header's value, or "" when absent. `name` in lower case.
  std::string Header(const std::string& name) const;
  // The cookie's value from the Cookie header, or "" when absent.
  std::string Cookie(const std::string& name) const;
  // The query parameter, or `fallback`.
  std::string Query(const std::string& name, const std::string& fallback = "") const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json; charset=utf-8";
  // More headers, in order (Set-Cookie may repeat). Content-Length and Connection are the
  // server's.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // `body` as JSON with `status`.
  static HttpResponse Json(int status, std::string body);
  // {"error": message} with `status` (the message JSON-escaped).
  static HttpResponse Error(int status, const std::string& message);
};

// The reason phrase of a status code ("Not Found"); "Unknown" for one not used here.
const char* HttpStatusText(int status);

// The status line and headers of `response` (ending with the blank line). `extra` are
// added after the response's own; `keep_alive` says Connection: keep-alive or close.
// With `stream`, no Content-Length: the body is whatever follows until the connection
// closes (server-sent events).
std::string HttpHead(const HttpResponse& response,
                     const std::vector<std::pair<std::string, std::string>>& extra, bool keep_alive,
                     bool stream);

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 64 * 1024;
};

// Reads one request from the front of a buffer that grows as bytes arrive.
class HttpRequestParser {
 public:
  enum class Result { kNeedMore, kDone, kError };
  explicit HttpRequestParser(HttpLimits limits = {}) : limits_(limits) {}

  // kDone: `*out` is the request and its bytes are erased from `buffer` (what follows is the
  // next request's). kNeedMore: nothing consumed yet. kError: `*error_status` and `*error`
  // say why (the connection is answered and closed).
  Result Parse(std::string& buffer, HttpRequest* out, int* error_status, std::string* error) const;

 private:
  HttpLimits limits_;
};

// %XX-decoding; with `plus_is_space` (query strings) '+' is a space. False for a malformed
// escape, or one that decodes to NUL.
bool PercentDecode(const std::string& in, bool plus_is_space, std::string* out);

// "a=1&b=x%20y" -> {a: 1, b: "x y"}; false when a part does not decode.
bool ParseQuery(const std::string& query, std::map<std::string, std::string>* out);

// The value of cookie `name` in a Cookie header ("a=1; b=2"), or "".
std::string CookieValue(const std::string& header, const std::string& name);

// `text` as a JSON string literal, quotes included (control characters escaped).
std::string JsonQuote(const std::string& text);

// Whether the request's Accept-Encoding takes gzip.
bool AcceptsGzip(const HttpRequest& req);
// `in` compressed as gzip (RFC 1952) at zlib `level` (1 fast .. 9 small); false on a zlib error.
bool Gzip(const std::string& in, int level, std::string* out);
// `response`'s body compressed with `gzip` (from Gzip), labelled so (Content-Encoding, Vary).
// Only for bodies without a secret next to text another user wrote (BREACH): the UI's own
// files and metric series, never a job or the session.
void UseGzip(HttpResponse* response, std::string gzip);

}  // namespace convoy
