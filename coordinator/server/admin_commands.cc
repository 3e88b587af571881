#include "coordinator/server/admin_commands.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>

#include "common/util.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/store/cluster_id.h"
#include "coordinator/store/cluster_pki.h"
#include "coordinator/store/etcd_job_store.h"
#include "coordinator/store/etcd_token_backend.h"
#include "coordinator/store/token_store.h"

namespace convoy {
namespace {

int64_t NowS() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string When(int64_t ms) {
  if (ms == 0) return "-";
  const time_t t = static_cast<time_t>(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%MZ", &tm);
  return buf;
}

// `s` as one shell word: as it is when it needs no quoting, else in single quotes.
std::string ShellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789/._-+:=@%,") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool MakeStateDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "convoy-coordinator: --state-dir %s: %s\n", dir.c_str(),
                 ec.message().c_str());
    return false;
  }
  chmod(dir.c_str(), 0700);
  return true;
}

int Init(const CoordinatorFlags& f) {
  if (!MakeStateDir(f.state_dir)) return 1;
  auto hp = ParseHostPort(f.listen, "--listen");
  auto pki = EnsureClusterPki(
      f.state_dir + "/tls", ServerNames(hp.ok() ? hp->first : "", f.advertise_address, f.tls_sans),
      NowS());
  if (!pki.ok()) {
    std::fprintf(stderr, "convoy-coordinator init: %s\n", pki.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr, "%s the cluster CA in %s/tls (keys mode 0600).\n",
               pki->created_ca ? "Made" : "Kept", f.state_dir.c_str());
  bool made_id = false;
  auto cluster_id = LoadOrMakeClusterId(f.state_dir, &made_id);
  if (!cluster_id.ok()) {
    std::fprintf(stderr, "convoy-coordinator init: %s\n", cluster_id.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr, "%s the cluster id %s in %s/cluster-id.\n", made_id ? "Made" : "Kept",
               cluster_id->c_str(), f.state_dir.c_str());
  // The next steps as they can be pasted: with the state directory this init used.
  std::error_code ec;
  const std::string state_dir =
      std::filesystem::absolute(f.state_dir, ec).lexically_normal().string();
  std::fprintf(stderr,
               "Workers join with:\n  convoy-coordinator token create --state-dir %s --role "
               "worker --ttl 1h\n"
               "  convoy-worker --coordinator HOST:PORT --join-token TOKEN --ca-fingerprint %s\n",
               ShellQuote(ec ? f.state_dir : state_dir).c_str(), pki->ca_fingerprint.c_str());
  std::printf("%s\n", pki->ca_fingerprint.c_str());
  return 0;
}

// The tokens where the coordinator keeps them: <state-dir>/tokens.db, or etcd (`etcd` is kept
// for the store's life).
StatusOr<std::unique_ptr<TokenStore>> OpenTokens(const CoordinatorFlags& f,
                                                 std::unique_ptr<EtcdClient>* etcd) {
  if (f.store == "sqlite") {
    if (!MakeStateDir(f.state_dir)) return Status::Unavailable("no --state-dir");
    return TokenStore::Open(f.state_dir + "/tokens.db");
  }
  auto options = EtcdOptionsFromFlags(f);
  if (!options.ok()) return options.status();
  auto client = EtcdClient::Create(*options);
  if (!client.ok()) return client.status();
  *etcd = std::move(*client);
  // Tokens belong to a cluster: on a prefix where no coordinator has run yet, the cluster's id
  // is made now (as `init` makes it in --state-dir), and said, so that a mistyped prefix shows.
  // A prefix that another program uses is refused.
  bool made = false;
  auto id = LoadOrMakeEtcdClusterId(**etcd, f.etcd_prefix, RandomHexId(), &made);
  if (!id.ok()) return id.status();
  if (made) {
    std::fprintf(stderr, "made the cluster id %s at %scluster-id (a new cluster)\n", id->c_str(),
                 f.etcd_prefix.c_str());
  }
  return TokenStore::Open(MakeEtcdTokenBackend(**etcd, f.etcd_prefix));
}

int Token(const CoordinatorFlags& f) {
  std::unique_ptr<EtcdClient> etcd;
  auto store = OpenTokens(f, &etcd);
  if (!store.ok()) {
    std::fprintf(stderr, "convoy-coordinator token: %s\n", store.status().message().c_str());
    return 1;
  }
  const int64_t now_ms = NowS() * 1000;
  if (f.command == "token create") {
    auto role = ParseRole(f.token_role);
    if (!role.ok()) {
      std::fprintf(stderr, "convoy-coordinator token create: %s\n",
                   role.status().message().c_str());
      return 2;
    }
    auto ttl = ParseDuration(f.token_ttl, "--ttl");
    TokenRecord made;
    auto token = (*store)->Create(f.token_user, *role, *ttl * 1000, f.token_uses, now_ms, &made,
                                  f.token_name);
    if (!token.ok()) {
      std::fprintf(stderr, "convoy-coordinator token create: %s\n",
                   token.status().message().c_str());
      return 1;
    }
    std::fprintf(
        stderr, "token %s for %s (%s%s), expires %s%s. It is shown only now:\n", made.id.c_str(),
        made.user.c_str(), RoleName(made.role),
        made.name.empty() ? "" : (", joins only as " + made.name).c_str(),
        made.expires_ms ? When(made.expires_ms).c_str() : "never",
        made.uses_left > 0 ? (", " + std::to_string(made.uses_left) + " uses").c_str() : "");
    std::printf("%s\n", token->c_str());
    return 0;
  }
  if (f.command == "token list") {
    auto list = (*store)->List();
    if (!list.ok()) {
      std::fprintf(stderr, "convoy-coordinator token list: %s\n", list.status().message().c_str());
      return 1;
    }
    std::printf("%-16s  %-16s  %-6s  %-17s  %-17s  %-17s  %-5s  %-7s  %s\n", "ID", "USER", "ROLE",
                "CREATED", "EXPIRES", "LAST USED", "USES", "STATE", "NAME");
    for (const TokenRecord& t : *list) {
      const char* state = t.revoked                                       ? "revoked"
                          : (t.expires_ms != 0 && now_ms >= t.expires_ms) ? "expired"
                          : t.uses_left == 0                              ? "used up"
                                                                          : "valid";
      std::printf("%-16s  %-16s  %-6s  %-17s  %-17s  %-17s  %-5s  %-7s  %s\n", t.id.c_str(),
                  t.user.c_str(), RoleName(t.role), When(t.created_ms).c_str(),
                  When(t.expires_ms).c_str(), When(t.last_used_ms).c_str(),
                  t.uses_left < 0 ? "-" : std::to_string(t.uses_left).c_str(), state,
                  t.name.empty() ? "-" : t.name.c_str());
    }
    return 0;
  }
  auto n = (*store)->Revoke(f.revoke);
  if (!n.ok()) {
    std::fprintf(stderr, "convoy-coordinator token revoke: %s\n", n.status().message().c_str());
    return 1;
  }
  std::fprintf(
      stderr, "revoked %d token(s); the coordinator refuses them %s\n", *n,
      etcd ? "within a second (it reads etcd's tokens every second)" : "from its next call");
  return 0;
}

}  // namespace

int RunAdminCommand(const CoordinatorFlags& flags) {
  if (flags.command == "init") return Init(flags);
  return Token(flags);
}

}  // namespace convoy
