#include "coordinator/web/http_message.h"

#include <zlib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

namespace convoy {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

// RFC 9110 token characters (header names, methods).
bool IsToken(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (std::isalnum(c) != 0) continue;
    if (std::string("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string::npos) {
      return false;
    }
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string HttpRequest::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

std::string HttpRequest::Cookie(const std::string& name) const {
  return CookieValue(Header("cookie"), name);
}

std::string HttpRequest::Query(const std::string& name, const std::string& fallback) const {
  auto it = query.find(name);
  return it == query.end() ? fallback : it->second;
}

HttpResponse HttpResponse::Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse HttpResponse::Error(int status, const std::string& message) {
  return Json(status, "{\"error\":" + JsonQuote(message) + "}");
}

const char* HttpStatusText(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

std::string HttpHead(const HttpResponse& response,
                     const std::vector<std::pair<std::string, std::string>>& extra, bool keep_alive,
                     bool stream) {
  std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " +
                     HttpStatusText(response.status) + "\r\n";
  auto add = [&head](const std::string& name, const std::string& value) {
    head += name;
    head += ": ";
    head += value;
    head += "\r\n";
  };
  if (!response.content_type.empty()) add("Content-Type", response.content_type);
  for (const auto& [name, value] : response.headers) add(name, value);
  for (const auto& [name, value] : extra) add(name, value);
  if (!stream) add("Content-Length", std::to_string(response.body.size()));
  add("Connection", keep_alive && !stream ? "keep-alive" : "close");
  head += "\r\n";
  return head;
}

bool PercentDecode(const std::string& in, bool plus_is_space, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = HexValue(in[i + 1]);
      const int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      c = static_cast<char>(hi * 16 + lo);
      if (c == '\0') return false;
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    } else if (c == '\0') {
      return false;
    }
    out->push_back(c);
  }
  return true;
}

bool ParseQuery(const std::string& query, std::map<std::string, std::string>* out) {
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    const std::string part = query.substr(start, end - start);
    if (!part.empty()) {
      const size_t eq = part.find('=');
      std::string key, value;
      if (!PercentDecode(part.substr(0, eq), true, &key)) return false;
      if (eq != std::string::npos && !PercentDecode(part.substr(eq + 1), true, &value)) {
        return false;
      }
      (*out)[key] = value;
    }
    start = end + 1;
  }
  return true;
}

std::string CookieValue(const std::string& header, const std::string& name) {
  size_t start = 0;
  while (start < header.size()) {
    size_t end = header.find(';', start);
    if (end == std::string::npos) end = header.size();
    const std::string part = Trim(header.substr(start, end - start));
    const size_t eq = part.find('=');
    if (eq != std::string::npos && part.compare(0, eq, name) == 0 && eq == name.size()) {
      std::string value = part.substr(eq + 1);
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
        value = value.substr(1, value.size() - 2);
      }
      return value;
    }
    start = end + 1;
  }
  return "";
}

bool AcceptsGzip(const HttpRequest& req) {
  const std::string accept = Lower(req.Header("accept-encoding"));
  return accept.find("gzip") != std::string::npos;
}

bool Gzip(const std::string& in, int level, std::string* out) {
  z_stream z{};
  // 15 window bits, +16: a gzip header and trailer rather than zlib's.
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  out->resize(deflateBound(&z, in.size()) + 32);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = static_cast<uInt>(out->size());
  const int rc = deflate(&z, Z_FINISH);
  out->resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END;
}

void UseGzip(HttpResponse* response, std::string gzip) {
  response->body = std::move(gzip);
  response->headers.emplace_back("Content-Encoding", "gzip");
  response->headers.emplace_back("Vary", "Accept-Encoding");
}

std::string JsonQuote(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpRequestParser::Result HttpRequestParser::Parse(std::string& buffer, HttpRequest* out,
                                                   int* error_status, std::string* error) const {
  auto fail = [&](int status, std::string why) {
    *error_status = status;
    *error = std::move(why);
    return Result::kError;
  };
  const size_t head_end = buffer.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    if (buffer.size() > limits_.max_header_bytes) {
      return fail(431, "the request line and headers exceed " +
                           std::to_string(limits_.max_header_bytes) + " bytes");
    }
    return Result::kNeedMore;
  }
  if (head_end + 4 > limits_.max_header_bytes) {
    return fail(431, "the request line and headers exceed " +
                         std::to_string(limits_.max_header_bytes) + " bytes");
  }
  HttpRequest req;
  const size_t line_end = buffer.find("\r\n");
  const std::string line = buffer.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos ||
      line.find(' ', sp2 + 1) != std::string::npos) {
    return fail(400, "request line: expected 'METHOD TARGET HTTP/1.1'");
  }
  req.method = line.substr(0, sp1);
  req.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string version = line.substr(sp2 + 1);
  if (!IsToken(req.method)) return fail(400, "request line: the method is not a token");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return fail(505, "request line: HTTP/1.0 and HTTP/1.1 only, not '" + version + "'");
  }
  if (req.target.empty() || req.target[0] != '/') {
    return fail(400, "request target: must be a path starting with '/'");
  }
  const size_t qmark = req.target.find('?');
  if (!PercentDecode(req.target.substr(0, qmark), false, &req.path)) {
    return fail(400, "request target: a malformed percent-escape in the path");
  }
  if (qmark != std::string::npos && !ParseQuery(req.target.substr(qmark + 1), &req.query)) {
    return fail(400, "request target: a malformed percent-escape in the query");
  }

  size_t pos = line_end + 2;
  while (pos < head_end) {
    size_t eol = buffer.find("\r\n", pos);
    const std::string h = buffer.substr(pos, eol - pos);
    pos = eol + 2;
    if (h.empty() || h[0] == ' ' || h[0] == '\t') {
      return fail(400, "headers: a folded or empty header line");
    }
    const size_t colon = h.find(':');
    if (colon == std::string::npos || !IsToken(h.substr(0, colon))) {
      return fail(400, "headers: '" + h.substr(0, 40) + "' is not NAME: VALUE");
    }
    const std::string name = Lower(h.substr(0, colon));
    const std::string value = Trim(h.substr(colon + 1));
    auto [it, added] = req.headers.emplace(name, value);
    if (!added) {
      if (name == "content-length" || name == "host") {
        return fail(400, "headers: " + name + " is given twice");
      }
      it->second += ", " + value;
    }
  }
  if (req.headers.count("transfer-encoding") != 0) {
    return fail(501, "transfer-encoding: request bodies must have a Content-Length");
  }
  size_t length = 0;
  if (auto it = req.headers.find("content-length"); it != req.headers.end()) {
    const std::string& v = it->second;
    if (v.empty() || v.size() > 12 ||
        !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
      return fail(400, "content-length: not a number");
    }
    length = static_cast<size_t>(std::stoull(v));
    if (length > limits_.max_body_bytes) {
      return fail(413, "the body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes");
    }
  }
  if (buffer.size() < head_end + 4 + length) return Result::kNeedMore;
  req.body = buffer.substr(head_end + 4, length);
  const std::string connection = Lower(req.Header("connection"));
  if (version == "HTTP/1.0") {
    req.keep_alive = connection.find("keep-alive") != std::string::npos;
  } else {
    req.keep_alive = connection.find("close") == std::string::npos;
  }
  buffer.erase(0, head_end + 4 + length);
  *out = std::move(req);
  return Result::kDone;
}

}  // namespace convoy
