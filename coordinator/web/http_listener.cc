#include "coordinator/web/http_listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/util.h"

namespace convoy {

std::string OpenSslError(const std::string& what) {
  char buf[256] = {0};
  const unsigned long e = ERR_get_error();
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return what + (e != 0 ? std::string(": ") + buf : "");
}

std::string PeerName(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = {0};
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

// The server's TLS context from PEM text: the first certificate is the server's, any more
// are its chain.
StatusOr<SSL_CTX*> MakeTlsContext(const std::string& cert_pem, const std::string& key_pem) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Status::Internal(OpenSslError("TLS context"));
  auto fail = [ctx](const std::string& what) -> Status {
    SSL_CTX_free(ctx);
    return Status::Internal(OpenSslError(what));
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // The output buffer grows while a write waits (a std::string appended to).
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  BIO* bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  X509* leaf = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  if (leaf == nullptr || SSL_CTX_use_certificate(ctx, leaf) != 1) {
    X509_free(leaf);
    BIO_free(bio);
    return fail("TLS: the serving certificate");
  }
  X509_free(leaf);
  while (X509* more = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add_extra_chain_cert(ctx, more) != 1) {  // owns `more` on success
      X509_free(more);
      BIO_free(bio);
      return fail("TLS: the certificate chain");
    }
  }
  ERR_clear_error();  // the end of the PEM text
  BIO_free(bio);
  bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (key == nullptr || SSL_CTX_use_PrivateKey(ctx, key) != 1) {
    EVP_PKEY_free(key);
    return fail("TLS: the serving key");
  }
  EVP_PKEY_free(key);
  if (SSL_CTX_check_private_key(ctx) != 1) return fail("TLS: the key does not match");
  return ctx;
}

StatusOr<int> BindListener(const std::string& address, int* port) {
  auto hp = ParseHostPort(address, "--ui-listen");
  if (!hp.ok()) return hp.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(hp->second);
  const int rc =
      getaddrinfo(hp->first.empty() ? nullptr : hp->first.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) return Status::InvalidArgument("--ui-listen " + address + ": " + gai_strerror(rc));
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      why = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return Status::Unavailable("--ui-listen " + address + ": " + why);
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return fd;
}

}  // namespace convoy
