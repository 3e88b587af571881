// Tokens and worker-certificate records in etcd (--store etcd://), so that every coordinator
// of a leader-elected group, and `convoy-coordinator token ...` run on any machine that
// reaches etcd, share them (token_store.h). Keys under the cluster's prefix:
//   token/<id>            v1.StoredToken (the salted hash, never the secret)
//   worker-cert/<name>    the not-after (Unix seconds, decimal) of the name's certificate
// Changes to a token (revocation, a join token's use, last use) are compare-and-swap
// transactions on the key's mod revision, retried on a conflict: two coordinators, or a
// coordinator and the `token` command, never undo each other's write. Token writes are not
// fenced by the leader's election: they are made by people's commands, not by the leader's
// view of the cluster.
#pragma once

#include <memory>
#include <string>

#include "coordinator/store/etcd_client.h"
#include "coordinator/store/token_store.h"

namespace convoy {

// `client` must outlive the backend; `prefix` ends with '/'. The coordinator reloads the
// tokens every `poll_ms`.
std::unique_ptr<TokenBackend> MakeEtcdTokenBackend(EtcdClient& client, std::string prefix,
                                                   int64_t poll_ms = 1000);

}  // namespace convoy
