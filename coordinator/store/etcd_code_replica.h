// Code archives in etcd (--store etcd://), so that the next leader has every archive whose
// upload was acknowledged (code_store.h). Keys under the cluster's prefix:
//   code-meta/<sha256>           v1.StoredCodeArchive: size, chunk count, when, owners
//   code-chunk/<sha256>/<index>  the archive's bytes, kChunkBytes each (6-digit index)
// Chunks are written first (each its own transaction, within etcd's default request size),
// the meta last: an archive with a meta is whole. Read back chunk by chunk (a 100 MB archive
// never travels in one response) and checked against its hash. etcd keeps them in its
// database: size its quota for the archives kept (deploy/README.md).
#pragma once

#include <memory>
#include <string>

#include "coordinator/store/code_store.h"
#include "coordinator/store/etcd_client.h"

namespace convoy {

constexpr size_t kCodeChunkBytes = 1 << 20;

// `client` must outlive the replica; `prefix` ends with '/'.
std::unique_ptr<CodeReplica> MakeEtcdCodeReplica(EtcdClient& client, std::string prefix);

}  // namespace convoy
