// `convoy ui [--open]`: a one-time login link to the coordinator's web UI.
#include "client/ui.h"

#include <spawn.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "client/command_support.h"
#include "client/format.h"
#include "common/util.h"

extern char** environ;

namespace convoy {
namespace {

// The host of a gRPC peer ("ipv4:10.0.0.5:7070", "ipv6:[::1]:7070"), or "".
std::string PeerHost(const std::string& peer) {
  const size_t colon = peer.find(':');
  if (colon == std::string::npos) return "";
  auto hp = ParseHostPort(peer.substr(colon + 1), "peer");
  return hp.ok() ? hp->first : "";
}

// Starts `argv` without a shell and without waiting for it (a browser may run for hours).
// False when it could not be started (glibc's posix_spawnp reports a failed exec).
bool Launch(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  return posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) == 0;
}

}  // namespace

std::string UiLoginUrl(const v1::CreateUiLoginResponse& link, const std::string& coordinators,
                       const std::string& peer, const std::string& job) {
  std::string host = link.host();
  if (host.empty()) {
    // The host this CLI reached the coordinator by: the one given, or of several (an etcd
    // group), the one that answered.
    auto parts = ParseHostPortList(coordinators, "--coordinator");
    if (parts.ok() && parts->size() == 1) host = (*parts)[0].first;
    if (host.empty()) host = PeerHost(peer);
    if (host.empty()) host = "127.0.0.1";
  }
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  std::string path = link.path();
  // A job id is [A-Za-z0-9._-]: nothing in it needs escaping in a query.
  if (!job.empty() && IsValidName(job)) {
    const size_t hash = path.find('#');
    path.insert(hash == std::string::npos ? path.size() : hash, "?next=/jobs/" + job);
  }
  return link.scheme() + "://" + host + ":" + std::to_string(link.port()) + path;
}

int UiCommand(CoordinatorClient& c, const std::string& coordinators, const std::string& job,
              bool open) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(15));
  v1::CreateUiLoginRequest req;
  v1::CreateUiLoginResponse resp;
  grpc::Status st = c.stub->CreateUiLogin(&ctx, req, &resp);
  if (!st.ok()) return RpcFailed(c, st, "ui");
  const std::string url = UiLoginUrl(resp, coordinators, ctx.peer(), job);
  std::cout << url << "\n" << std::flush;
  std::cerr << "convoy: a one-time login link, valid for a minute; the browser keeps a session "
               "(it ends when you log out or your token is revoked)\n";
  if (!open) return kExitOk;
  const char* browser = std::getenv("BROWSER");
  if (browser != nullptr && *browser != '\0' && Launch({browser, url})) return kExitOk;
  if (Launch({"xdg-open", url})) return kExitOk;
  std::cerr << "convoy: could not open a browser (no $BROWSER, no xdg-open): open the link "
               "above yourself\n";
  return kExitOk;
}

}  // namespace convoy
