#include "coordinator/store/etcd_code_replica.h"

#include <chrono>
#include <cstdio>

#include "common/pki.h"
#include "convoy/v1/auth.pb.h"

namespace convoy {
namespace {

class EtcdCodeReplica : public CodeReplica {
 public:
  EtcdCodeReplica(EtcdClient& client, std::string prefix)
      : client_(client), prefix_(std::move(prefix)) {}

  Status Put(const std::string& sha256, const std::string& bytes,
             const std::vector<std::string>& owners) override {
    v1::StoredCodeArchive meta;
    auto had = client_.Get(MetaKey(sha256));
    if (had.ok() && meta.ParseFromString(had->value()) &&
        meta.size() == static_cast<int64_t>(bytes.size())) {
      // Held already: the owners only.
    } else if (had.ok() || had.status().code() == StatusCode::kNotFound) {
      meta.Clear();
      meta.set_size(static_cast<int64_t>(bytes.size()));
      meta.set_chunks(static_cast<int32_t>((bytes.size() + kCodeChunkBytes - 1) / kCodeChunkBytes));
      meta.set_stored_unix_s(std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
      for (int i = 0; i < meta.chunks(); ++i) {
        etcdserverpb::TxnRequest txn;
        auto* put = txn.add_success()->mutable_request_put();
        put->set_key(ChunkKey(sha256, i));
        put->set_value(bytes.substr(static_cast<size_t>(i) * kCodeChunkBytes, kCodeChunkBytes));
        auto resp = client_.Txn(txn);
        if (!resp.ok()) return resp.status();
      }
    } else {
      return had.status();
    }
    meta.clear_owners();
    for (const std::string& o : owners) meta.add_owners(o);
    etcdserverpb::TxnRequest txn;
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(MetaKey(sha256));
    put->set_value(meta.SerializeAsString());
    return client_.Txn(txn).status();
  }

  Status Get(const std::string& sha256, std::string* bytes,
             std::vector<std::string>* owners) override {
    auto kv = client_.Get(MetaKey(sha256));
    if (!kv.ok()) return kv.status();  // NOT_FOUND included
    v1::StoredCodeArchive meta;
    if (!meta.ParseFromString(kv->value())) {
      return Status::Internal("etcd " + MetaKey(sha256) + ": not an archive's record");
    }
    bytes->clear();
    bytes->reserve(static_cast<size_t>(meta.size()));
    for (int i = 0; i < meta.chunks(); ++i) {
      auto chunk = client_.Get(ChunkKey(sha256, i));
      if (!chunk.ok())
        return Status::Internal("etcd " + ChunkKey(sha256, i) + ": " + chunk.status().message());
      bytes->append(chunk->value());
    }
    if (static_cast<int64_t>(bytes->size()) != meta.size() || Sha256Hex(*bytes) != sha256) {
      return Status::Internal("etcd: code archive " + sha256 + " does not hash to its name");
    }
    owners->assign(meta.owners().begin(), meta.owners().end());
    return Status::Ok();
  }

  Status Remove(const std::string& sha256) override {
    // The meta first: without it the chunks are no archive.
    etcdserverpb::TxnRequest txn;
    txn.add_success()->mutable_request_delete_range()->set_key(MetaKey(sha256));
    auto* chunks = txn.add_success()->mutable_request_delete_range();
    chunks->set_key(ChunkKey(sha256, -1));
    chunks->set_range_end(EtcdPrefixEnd(ChunkKey(sha256, -1)));
    return client_.Txn(txn).status();
  }

  StatusOr<std::vector<std::pair<std::string, int64_t>>> List() override {
    auto kvs = client_.GetPrefix(prefix_ + "code-meta/");
    if (!kvs.ok()) return kvs.status();
    std::vector<std::pair<std::string, int64_t>> out;
    for (const mvccpb::KeyValue& kv : *kvs) {
      v1::StoredCodeArchive meta;
      if (!meta.ParseFromString(kv.value())) continue;
      out.emplace_back(kv.key().substr(prefix_.size() + 10), meta.stored_unix_s());
    }
    return out;
  }

 private:
  std::string MetaKey(const std::string& sha) const { return prefix_ + "code-meta/" + sha; }
  // index -1: the prefix of every chunk of the archive.
  std::string ChunkKey(const std::string& sha, int index) const {
    std::string key = prefix_ + "code-chunk/" + sha + "/";
    if (index < 0) return key;
    char digits[16];
    std::snprintf(digits, sizeof digits, "%06d", index);
    return key + digits;
  }

  EtcdClient& client_;
  const std::string prefix_;
};

}  // namespace

std::unique_ptr<CodeReplica> MakeEtcdCodeReplica(EtcdClient& client, std::string prefix) {
  return std::make_unique<EtcdCodeReplica>(client, std::move(prefix));
}

}  // namespace convoy
