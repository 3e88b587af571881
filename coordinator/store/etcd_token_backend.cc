#include "coordinator/store/etcd_token_backend.h"

#include <map>
#include <vector>

#include "convoy/v1/auth.pb.h"

namespace convoy {
namespace {

// A compare-and-swap that lost to another writer is tried again, from a fresh read, this
// many times before the caller is told UNAVAILABLE (try again).
constexpr int kCasTries = 8;

v1::StoredToken ToStored(const TokenRow& row) {
  v1::StoredToken t;
  t.set_id(row.record.id);
  t.set_user(row.record.user);
  t.set_role(RoleName(row.record.role));
  t.set_salt(row.salt);
  t.set_hash(row.hash);
  t.set_created_unix_ms(row.record.created_ms);
  t.set_expires_unix_ms(row.record.expires_ms);
  t.set_last_used_unix_ms(row.record.last_used_ms);
  t.set_uses_left(row.record.uses_left);
  t.set_revoked(row.record.revoked);
  t.set_name(row.record.name);
  return t;
}

// False when the value is not a token this version can grant (unreadable, unknown role).
bool FromStored(const std::string& value, TokenRow* row) {
  v1::StoredToken t;
  if (!t.ParseFromString(value)) return false;
  auto role = ParseRole(t.role());
  if (!role.ok()) return false;
  row->record.id = t.id();
  row->record.user = t.user();
  row->record.role = *role;
  row->record.created_ms = t.created_unix_ms();
  row->record.expires_ms = t.expires_unix_ms();
  row->record.last_used_ms = t.last_used_unix_ms();
  row->record.uses_left = t.uses_left();
  row->record.revoked = t.revoked();
  row->record.name = t.name();
  row->salt = t.salt();
  row->hash = t.hash();
  return true;
}

class EtcdTokenBackend : public TokenBackend {
 public:
  EtcdTokenBackend(EtcdClient& client, std::string prefix, int64_t poll_ms)
      : client_(client), prefix_(std::move(prefix)), poll_ms_(poll_ms) {}

  int64_t poll_ms() const override { return poll_ms_; }
  StatusOr<bool> MayHaveChanged() override { return true; }

  StatusOr<std::vector<TokenRow>> LoadAll() override {
    auto kvs = client_.GetPrefix(TokenKey(""));
    if (!kvs.ok()) return kvs.status();
    std::vector<TokenRow> rows;
    for (const mvccpb::KeyValue& kv : *kvs) {
      TokenRow row;
      if (FromStored(kv.value(), &row)) rows.push_back(std::move(row));
    }
    return rows;
  }

  Status Insert(const TokenRow& row) override {
    auto made = client_.CreateIfAbsent(TokenKey(row.record.id), ToStored(row).SerializeAsString());
    if (!made.ok()) return made.status();
    if (!made->created) return Status::AlreadyExists("token " + row.record.id + " exists");
    return Status::Ok();
  }

  StatusOr<std::vector<std::string>> Revoke(const std::string& id,
                                            const std::string& user) override {
    for (int attempt = 0; attempt < kCasTries; ++attempt) {
      auto kvs = client_.GetPrefix(TokenKey(""));
      if (!kvs.ok()) return kvs.status();
      etcdserverpb::TxnRequest txn;
      std::vector<std::string> ids;
      for (const mvccpb::KeyValue& kv : *kvs) {
        TokenRow row;
        if (!FromStored(kv.value(), &row) || row.record.revoked) continue;
        if (row.record.id != id && row.record.user != user) continue;
        row.record.revoked = true;
        AddCas(&txn, kv, ToStored(row).SerializeAsString());
        ids.push_back(row.record.id);
      }
      if (ids.empty()) return ids;
      auto resp = client_.Txn(txn);
      if (!resp.ok()) return resp.status();
      if (resp->succeeded()) return ids;
    }
    return Status::Unavailable("tokens: revocation kept meeting concurrent writes; try again");
  }

  StatusOr<bool> TakeUse(const std::string& id) override {
    return Update(id, [](TokenRow* row) {
      if (row->record.uses_left <= 0) return false;
      --row->record.uses_left;
      return true;
    });
  }

  Status WriteLastUsed(const std::map<std::string, int64_t>& used) override {
    for (const auto& [id, ms] : used) {
      const int64_t at = ms;
      auto written = Update(id, [at](TokenRow* row) {
        if (row->record.last_used_ms >= at) return false;
        row->record.last_used_ms = at;
        return true;
      });
      if (!written.ok() && written.status().code() != StatusCode::kNotFound) {
        return written.status();
      }
    }
    return Status::Ok();
  }

  Status RecordCertificate(const std::string& name, int64_t not_after_s) override {
    etcdserverpb::TxnRequest txn;
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(CertKey(name));
    put->set_value(std::to_string(not_after_s));
    return client_.Txn(txn).status();
  }

  StatusOr<int64_t> CertificateNotAfter(const std::string& name) override {
    auto kv = client_.Get(CertKey(name));
    if (kv.status().code() == StatusCode::kNotFound) return int64_t{0};
    if (!kv.ok()) return kv.status();
    try {
      return static_cast<int64_t>(std::stoll(kv->value()));
    } catch (const std::exception&) {
      return Status::Internal("etcd " + CertKey(name) + ": '" + kv->value() +
                              "' is not a time in seconds");
    }
  }

  StatusOr<bool> ForgetCertificate(const std::string& name) override {
    etcdserverpb::TxnRequest txn;
    txn.add_success()->mutable_request_delete_range()->set_key(CertKey(name));
    auto resp = client_.Txn(txn);
    if (!resp.ok()) return resp.status();
    return resp->responses_size() > 0 && resp->responses(0).response_delete_range().deleted() > 0;
  }

 private:
  std::string TokenKey(const std::string& id) const { return prefix_ + "token/" + id; }
  std::string CertKey(const std::string& name) const { return prefix_ + "worker-cert/" + name; }

  // Puts `value` at kv's key only if nobody wrote it since kv was read.
  static void AddCas(etcdserverpb::TxnRequest* txn, const mvccpb::KeyValue& kv, std::string value) {
    etcdserverpb::Compare* c = txn->add_compare();
    c->set_key(kv.key());
    c->set_target(etcdserverpb::Compare::MOD);
    c->set_result(etcdserverpb::Compare::EQUAL);
    c->set_mod_revision(kv.mod_revision());
    auto* put = txn->add_success()->mutable_request_put();
    put->set_key(kv.key());
    put->set_value(std::move(value));
  }

  // Reads token `id`, applies `change` (false: nothing to write, the answer is false) and
  // writes it back by compare-and-swap. NOT_FOUND when there is no such token.
  template <typename Change>
  StatusOr<bool> Update(const std::string& id, Change change) {
    for (int attempt = 0; attempt < kCasTries; ++attempt) {
      auto kv = client_.Get(TokenKey(id));
      if (!kv.ok()) return kv.status();
      TokenRow row;
      if (!FromStored(kv->value(), &row)) {
        return Status::Internal("etcd " + TokenKey(id) + ": not a token this version reads");
      }
      if (!change(&row)) return false;
      etcdserverpb::TxnRequest txn;
      AddCas(&txn, *kv, ToStored(row).SerializeAsString());
      auto resp = client_.Txn(txn);
      if (!resp.ok()) return resp.status();
      if (resp->succeeded()) return true;
    }
    return Status::Unavailable("token " + id + ": kept meeting concurrent writes; try again");
  }

  EtcdClient& client_;
  const std::string prefix_;
  const int64_t poll_ms_;
};

}  // namespace

std::unique_ptr<TokenBackend> MakeEtcdTokenBackend(EtcdClient& client, std::string prefix,
                                                   int64_t poll_ms) {
  return std::make_unique<EtcdTokenBackend>(client, std::move(prefix), poll_ms);
}

}  // namespace convoy
