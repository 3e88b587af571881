// The sockets and TLS of the web UI's server (http_server.h): binding its listener, the
// OpenSSL context of its serving certificate, and naming a peer. Free functions; any thread.
#pragma once

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <string>

#include "common/status.h"

namespace convoy {

// The last OpenSSL error, after `what`, and the error queue cleared.
std::string OpenSslError(const std::string& what);

// "ADDRESS:PORT" of an IPv4 or IPv6 socket address.
std::string PeerName(const sockaddr_storage& addr);

// A TLS 1.2+ server context for the certificate chain `cert_pem` (the server's first, then
// its chain) and `key_pem`; the caller frees it (SSL_CTX_free). Writes may be partial and the
// buffer may move between retries (the server appends to a std::string).
StatusOr<SSL_CTX*> MakeTlsContext(const std::string& cert_pem, const std::string& key_pem);

// A non-blocking listening socket on `address` (HOST:PORT; port 0 picks one), and its port.
// Errors name --ui-listen.
StatusOr<int> BindListener(const std::string& address, int* port);

}  // namespace convoy
