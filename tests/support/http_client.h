// A small blocking HTTP/1.1 client for the web UI's tests: plain text, or TLS verified
// against a CA (OpenSSL), one connection per request; and a reader for event streams.
// Header-only: only the tests that use it link OpenSSL's SSL library.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace convoy::testing {

struct HttpReply {
  int status = 0;                              // 0: no answer (connection refused or closed)
  std::map<std::string, std::string> headers;  // lower-case names; repeats joined by "\n"
  std::string body;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// One connection to 127.0.0.1:port; TLS when `ca_pem` is given (the server's certificate
// must be for 127.0.0.1 and signed by it).
class HttpConnection {
 public:
  HttpConnection(int port, const std::string& ca_pem) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd_);
      fd_ = -1;
      return;
    }
    if (ca_pem.empty()) return;
    ctx_ = SSL_CTX_new(TLS_client_method());
    BIO* bio = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
    X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx_), ca);
    X509_free(ca);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    ssl_ = SSL_new(ctx_);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), "127.0.0.1");
    SSL_set_fd(ssl_, fd_);
    if (SSL_connect(ssl_) != 1) {
      ERR_clear_error();
      Close();
    }
  }
  ~HttpConnection() { Close(); }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  bool ok() const { return fd_ >= 0; }
  bool Write(const std::string& data) {
    if (fd_ < 0) return false;
    if (ssl_ != nullptr) return SSL_write(ssl_, data.data(), static_cast<int>(data.size())) > 0;
    return send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }
  // Appends what arrives within `timeout_ms` to `out`; false once the connection is over.
  bool ReadSome(std::string* out, int timeout_ms) {
    if (fd_ < 0) return false;
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[16384];
    int n;
    if (ssl_ != nullptr) {
      n = SSL_read(ssl_, buf, sizeof(buf));
      if (n <= 0) {
        const int err = SSL_get_error(ssl_, n);
        ERR_clear_error();
        return err == SSL_ERROR_WANT_READ || (err == SSL_ERROR_SYSCALL && errno == EAGAIN);
      }
    } else {
      n = static_cast<int>(recv(fd_, buf, sizeof(buf), 0));
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
      if (n == 0) return false;
    }
    out->append(buf, static_cast<size_t>(n));
    return true;
  }
  // Reads until the connection closes or `timeout_ms` passes.
  std::string ReadAll(int timeout_ms = 10000) {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < end && ReadSome(&out, 100)) {
    }
    return out;
  }
  // Reads until `needle` is in what was read (true), the connection ends or time is up.
  bool ReadUntil(const std::string& needle, std::string* seen, int timeout_ms = 10000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (seen->find(needle) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= end || !ReadSome(seen, 100)) {
        return seen->find(needle) != std::string::npos;
      }
    }
    return true;
  }
  void Close() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ >= 0) close(fd_);
    ssl_ = nullptr;
    ctx_ = nullptr;
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

// "HTTP/1.1 200 OK\r\n...\r\n\r\nbody" -> its parts (the body as it came: no chunking).
inline HttpReply ParseHttpReply(const std::string& raw) {
  HttpReply r;
  const size_t head_end = raw.find("\r\n\r\n");
  if (raw.compare(0, 9, "HTTP/1.1 ") != 0 || head_end == std::string::npos) return r;
  r.status = std::atoi(raw.c_str() + 9);
  size_t pos = raw.find("\r\n") + 2;
  while (pos < head_end) {
    const size_t eol = raw.find("\r\n", pos);
    const std::string line = raw.substr(pos, eol - pos);
    pos = eol + 2;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    auto [it, added] = r.headers.emplace(name, value);
    if (!added) it->second += "\n" + value;
  }
  r.body = raw.substr(head_end + 4);
  return r;
}

// One request on a connection of its own ("Connection: close"); `headers` as "Name: value".
inline HttpReply HttpCall(int port, const std::string& ca_pem, const std::string& method,
                          const std::string& target, const std::vector<std::string>& headers = {},
                          const std::string& body = "") {
  HttpConnection c(port, ca_pem);
  if (!c.ok()) return HttpReply();
  std::string req = method + " " + target + " HTTP/1.1\r\nConnection: close\r\n";
  bool host = false;
  for (const std::string& h : headers) {
    req += h + "\r\n";
    host = host || h.rfind("Host:", 0) == 0;
  }
  if (!host) req += "Host: 127.0.0.1:" + std::to_string(port) + "\r\n";
  if (!body.empty() || method == "POST")
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  if (!c.Write(req)) return HttpReply();
  return ParseHttpReply(c.ReadAll());
}

}  // namespace convoy::testing
