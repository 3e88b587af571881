#include "coordinator/store/etcd_client.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "common/util.h"

namespace convoy {
namespace {

StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(flag + " " + path + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// etcd's server passes its own context's end through unconverted ("context deadline exceeded"
// when a read or write cannot reach a quorum in time), and gRPC-Go answers an unconverted error
// with UNKNOWN. It is a timeout like the client's own deadline, so it is read as one.
bool EtcdTimedOut(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         (status.error_code() == grpc::StatusCode::UNKNOWN &&
          (status.error_message() == "context deadline exceeded" ||
           status.error_message() == "context canceled"));
}

bool Retryable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE || EtcdTimedOut(status);
}

}  // namespace

Status FromEtcd(const grpc::Status& status, const std::string& what) {
  const std::string message = what + ": " + status.error_message();
  if (EtcdTimedOut(status)) return Status::Unavailable(message);
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return Status::Ok();
    case grpc::StatusCode::UNAVAILABLE:
      return Status::Unavailable(message);
    case grpc::StatusCode::NOT_FOUND:
      return Status::NotFound(message);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Status::InvalidArgument(message);
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status::FailedPrecondition(message);
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status::Unauthenticated(message);
    case grpc::StatusCode::PERMISSION_DENIED:
      return Status::PermissionDenied(message);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Status::ResourceExhausted(message);
    default:
      return Status::Internal(message);
  }
}

StatusOr<std::vector<std::string>> ParseEtcdUrl(const std::string& flag, const std::string& url) {
  const std::string scheme = "etcd://";
  if (url.rfind(scheme, 0) != 0) {
    return Status::InvalidArgument(flag + ": expected etcd://HOST:PORT[,HOST:PORT...], got '" +
                                   url + "'");
  }
  std::vector<std::string> endpoints;
  std::stringstream rest(url.substr(scheme.size()));
  std::string endpoint;
  while (std::getline(rest, endpoint, ',')) {
    // HOST:PORT as every other address flag takes it (ParseHostPort), with a message that
    // names the URL's form.
    if (!ParseHostPort(endpoint, flag).ok() || endpoint.find('/') != std::string::npos) {
      return Status::InvalidArgument(flag + ": '" + endpoint +
                                     "' is not HOST:PORT (in etcd://HOST:PORT,HOST:PORT)");
    }
    endpoints.push_back(endpoint);
  }
  if (endpoints.empty()) return Status::InvalidArgument(flag + ": no etcd member in '" + url + "'");
  return endpoints;
}

std::string EtcdPrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(const EtcdOptions& options) {
  if (options.endpoints.empty()) return Status::InvalidArgument("etcd: no member given");
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!options.ca_file.empty() || !options.cert_file.empty() || !options.key_file.empty()) {
    if (options.ca_file.empty()) {
      return Status::InvalidArgument("--etcd-ca: needed with --etcd-cert and --etcd-key");
    }
    if (options.cert_file.empty() != options.key_file.empty()) {
      return Status::InvalidArgument("--etcd-cert and --etcd-key: give both or neither");
    }
    grpc::SslCredentialsOptions ssl;
    auto ca = ReadPem("--etcd-ca", options.ca_file);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    if (!options.cert_file.empty()) {
      auto cert = ReadPem("--etcd-cert", options.cert_file);
      if (!cert.ok()) return cert.status();
      auto key = ReadPem("--etcd-key", options.key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    creds = grpc::SslCredentials(ssl);
  }
  std::unique_ptr<EtcdClient> client(new EtcdClient(options, creds));
  MutexLock lock(client->mu_);
  for (const std::string& endpoint : options.endpoints) {
    client->members_.push_back(client->Dial(endpoint));
    client->dialled_ms_.push_back(SystemClock().NowMonotonicMs());
  }
  return client;
}

std::shared_ptr<EtcdClient::Member> EtcdClient::Dial(const std::string& endpoint) const {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // A member that went away is tried again soon after it is back.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // In gRPC 1.51 this is also the connect timeout: long enough for a loaded host.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  auto m = std::make_shared<Member>();
  m->endpoint = endpoint;
  m->channel = grpc::CreateCustomChannel(endpoint, creds_, args);
  m->kv = etcdserverpb::KV::NewStub(m->channel);
  m->lease = etcdserverpb::Lease::NewStub(m->channel);
  m->maintenance = etcdserverpb::Maintenance::NewStub(m->channel);
  return m;
}

std::shared_ptr<EtcdClient::Member> EtcdClient::MemberAt(size_t i) {
  MutexLock lock(mu_);
  return members_[i];
}

void EtcdClient::Redial(size_t i, const std::shared_ptr<Member>& failed) {
  const int64_t now = SystemClock().NowMonotonicMs();
  {
    MutexLock lock(mu_);
    if (members_[i] != failed || now - dialled_ms_[i] < kRedialIntervalMs) return;
    dialled_ms_[i] = now;
  }
  std::shared_ptr<Member> fresh = Dial(failed->endpoint);  // makes no connection yet
  MutexLock lock(mu_);
  if (members_[i] == failed) members_[i] = std::move(fresh);
}

template <typename Call>
Status EtcdClient::OnSomeMember(const char* what, Call&& call) {
  const size_t n = options_.endpoints.size();
  const size_t first = current_.load();
  std::string errors;
  for (size_t i = 0; i < n; ++i) {
    const size_t at = (first + i) % n;
    std::shared_ptr<Member> m = MemberAt(at);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(options_.call_timeout_ms));
    const grpc::Status st = call(*m, &ctx);
    if (st.ok() || !Retryable(st)) {
      if (st.ok()) current_ = at;
      return FromEtcd(st, std::string("etcd ") + what + " at " + m->endpoint);
    }
    errors += (errors.empty() ? "" : "; ") + m->endpoint + ": " + st.error_message();
    Redial(at, m);
  }
  return Status::Unavailable(std::string("etcd ") + what + ": no member answered (" + errors + ")");
}

StatusOr<std::vector<mvccpb::KeyValue>> EtcdClient::GetPrefix(const std::string& prefix) {
  std::vector<mvccpb::KeyValue> out;
  etcdserverpb::RangeRequest req;
  req.set_key(prefix);
  req.set_range_end(EtcdPrefixEnd(prefix));
  req.set_limit(1000);
  int64_t revision = 0;  // every page from the same revision: one consistent view
  for (;;) {
    etcdserverpb::RangeResponse resp;
    if (revision != 0) req.set_revision(revision);
    Status st = OnSomeMember(
        "range", [&](Member& m, grpc::ClientContext* ctx) { return m.kv->Range(ctx, req, &resp); });
    if (!st.ok()) return st;
    if (revision == 0) revision = resp.header().revision();
    for (mvccpb::KeyValue& kv : *resp.mutable_kvs()) out.push_back(std::move(kv));
    if (!resp.more() || resp.kvs_size() == 0) break;
    req.set_key(out.back().key() + std::string(1, '\0'));  // after the last one
  }
  return out;
}

StatusOr<mvccpb::KeyValue> EtcdClient::Get(const std::string& key) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  etcdserverpb::RangeResponse resp;
  Status st = OnSomeMember(
      "get", [&](Member& m, grpc::ClientContext* ctx) { return m.kv->Range(ctx, req, &resp); });
  if (!st.ok()) return st;
  if (resp.kvs_size() == 0) return Status::NotFound("etcd: no key " + key);
  return resp.kvs(0);
}

StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& request) {
  etcdserverpb::TxnResponse resp;
  Status st = OnSomeMember(
      "txn", [&](Member& m, grpc::ClientContext* ctx) { return m.kv->Txn(ctx, request, &resp); });
  if (!st.ok()) return st;
  return resp;
}

StatusOr<EtcdClient::Created> EtcdClient::CreateIfAbsent(const std::string& key,
                                                         const std::string& value, int64_t lease) {
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare* c = txn.add_compare();
  c->set_key(key);
  c->set_target(etcdserverpb::Compare::CREATE);
  c->set_result(etcdserverpb::Compare::EQUAL);
  c->set_create_revision(0);  // absent
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  txn.add_failure()->mutable_request_range()->set_key(key);
  auto resp = Txn(txn);
  if (!resp.ok()) return resp.status();
  Created out;
  out.created = resp->succeeded();
  out.revision = resp->header().revision();
  if (!out.created) {
    const auto& range = resp->responses(0).response_range();
    if (range.kvs_size() > 0) out.value = range.kvs(0).value();
  }
  return out;
}

StatusOr<int64_t> EtcdClient::GrantLease(int64_t ttl_s) {
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(ttl_s);
  etcdserverpb::LeaseGrantResponse resp;
  Status st = OnSomeMember("lease grant", [&](Member& m, grpc::ClientContext* ctx) {
    return m.lease->LeaseGrant(ctx, req, &resp);
  });
  if (!st.ok()) return st;
  if (!resp.error().empty()) return Status::Unavailable("etcd lease grant: " + resp.error());
  return resp.id();
}

Status EtcdClient::KeepAlive(int64_t lease) {
  etcdserverpb::LeaseKeepAliveResponse resp;
  Status st = OnSomeMember("lease keep-alive", [&](Member& m, grpc::ClientContext* ctx) {
    auto stream = m.lease->LeaseKeepAlive(ctx);
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    if (!stream->Write(req) || !stream->Read(&resp)) return stream->Finish();
    stream->WritesDone();
    ctx->TryCancel();
    stream->Finish();
    return grpc::Status::OK;
  });
  if (!st.ok()) return st;
  if (resp.ttl() <= 0) return Status::NotFound("etcd lease " + std::to_string(lease) + " expired");
  return Status::Ok();
}

Status EtcdClient::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseRevokeResponse resp;
  return OnSomeMember("lease revoke", [&](Member& m, grpc::ClientContext* ctx) {
    return m.lease->LeaseRevoke(ctx, req, &resp);
  });
}

StatusOr<etcdserverpb::StatusResponse> EtcdClient::MemberStatus() {
  etcdserverpb::StatusRequest req;
  etcdserverpb::StatusResponse resp;
  Status st = OnSomeMember("status", [&](Member& m, grpc::ClientContext* ctx) {
    return m.maintenance->Status(ctx, req, &resp);
  });
  if (!st.ok()) return st;
  return resp;
}

}  // namespace convoy
