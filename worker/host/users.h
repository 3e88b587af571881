// The Unix users ranks run as (issue 12): an account from the password database, the job
// owner's account (--run-as owner), and the one --run-as user of a root worker. Free
// functions; any thread.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "common/status.h"

namespace convoy {

// The user a rank runs as (issue 12): its uid, its primary gid (the only group it keeps),
// and its name and home directory for USER, LOGNAME and HOME.
struct RunAsUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
  std::string home;
};

// The account `name` (or a numeric uid) from the password database. NotFound when there
// is none.
StatusOr<RunAsUser> LookupUser(const std::string& name);

// --run-as owner: the Unix account of a job's owner (a Convoy user name). Refused, saying
// why: no owner (an --insecure coordinator), a name that is all digits (never taken for a
// uid), no such account on this worker, or an account with uid or gid 0.
StatusOr<RunAsUser> OwnerAccount(const std::string& owner, const std::string& worker);

// Gives `path`, a file the worker made for a rank (its log, its metrics socket), to `user`
// without following a symlink; with `parent_searchable`, also lets everyone search its
// parent directory when the worker owns it (a socket is reached through it). Nothing
// without a user; a failure is logged.
void GiveToUser(const std::optional<RunAsUser>& user, const std::string& path,
                bool parent_searchable);

// The user ranks run as, from --run-as and --allow-root-jobs, for a worker whose effective
// uid is `euid`. A root worker: that user; an unknown user is an error saying how to create
// it, and uid 0 is one unless `allow_root`. Any other worker cannot switch users: nullopt
// (ranks run as the worker's own user).
StatusOr<std::optional<RunAsUser>> ResolveRankUser(const std::string& run_as, bool allow_root,
                                                   uid_t euid);

}  // namespace convoy
