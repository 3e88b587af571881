// convoy-coordinator's command line (DESIGN.md "Command-line contract") and its defaults.
//
//   convoy-coordinator [serve flags]             serve (the default)
//   convoy-coordinator init                      make the cluster CA, print its fingerprint
//   convoy-coordinator token create --user U --role R [--ttl 30d] [--uses N]
//   convoy-coordinator token list
//   convoy-coordinator token revoke ID|USER
// Every form takes --state-dir (default /var/lib/convoy, or CONVOY_STATE_DIR) and
// --config FILE: a YAML file whose keys are the serve flags' names (common/config_file.h);
// flags on the command line win.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace convoy {

struct ConfigCheck;  // common/config_file.h

struct CoordinatorFlags {
  // "serve", "init", "token create", "token list", "token revoke".
  std::string command = "serve";
  std::string listen = "127.0.0.1:7070";
  // The SQLite state and tls/ (the cluster CA): where a package's systemd unit keeps it.
  std::string state_dir = "/var/lib/convoy";
  // Where jobs, their events, workers and metric histories are kept: "sqlite" (the default:
  // <state_dir>/convoy.db, one machine) or "etcd://HOST:PORT,HOST:PORT,..." (issue 30: any
  // number of coordinators on one etcd, one of them leader, README "High availability").
  std::string store = "sqlite";
  // With an etcd store: TLS to etcd (the CA of its members' certificates, and this
  // coordinator's client certificate and key; none: plain text, loopback etcd only), and the
  // key prefix that is this cluster's.
  std::string etcd_ca, etcd_cert, etcd_key;
  std::string etcd_prefix = "/convoy/";
  // The leader's etcd lease, seconds: a leader killed -9 is replaced after about this long,
  // and one that cannot renew it for this long steps down (a host too loaded to renew in
  // time steps down needlessly: measured with ThreadSanitizer tests two per core).
  int64_t leader_lease_s = 2;
  // Empty: no /metrics endpoint. A bare ":PORT" binds loopback only.
  std::string metrics_listen;
  // Empty: none. grpc.health.v1 alone in plain text, for probes that cannot speak TLS
  // (Kubernetes). A bare ":PORT" binds loopback only.
  std::string health_listen;
  // Empty: no web UI. The web UI (coordinator/web): HTTPS with the serving certificate, or
  // plain HTTP on loopback only under --insecure. A bare ":PORT" binds loopback only.
  std::string ui_listen;
  // How long a finished job's per-job and per-rank series stay on /metrics (seconds; the
  // flag takes 600, 600s, 10m or 1h): long enough for a few scrapes and an alert to see
  // the end, short enough that series do not pile up with every job ever run.
  double metrics_retention_s = 600;
  // Finished jobs are deleted (as by `convoy delete`: rows, and their files on the workers)
  // once they ended longer ago than this duration, or, given a bare count, beyond the
  // newest that many finished jobs; "0" keeps every job. A month is long enough to look
  // back on a run and short enough that the state and the workers' disks stay bounded.
  std::string job_retention = "30d";
  int64_t job_retention_ms = 30LL * 86400 * 1000;  // parsed from job_retention
  int64_t job_retention_count = 0;
  // Plain text without authentication; refused on anything but a loopback address.
  bool insecure = false;
  // Names other than the listen host that clients reach the coordinator by (put in the
  // serving certificate).
  std::string advertise_address;
  std::vector<std::string> tls_sans;
  // The operator's own PKI (all three or none).
  std::string tls_cert, tls_key, tls_ca;
  // Lifetime of the client certificates issued to workers: a day, renewed at 2/3 of it,
  // bounds how long a stolen worker certificate is good for.
  std::string worker_cert_ttl = "24h";
  int64_t worker_cert_ttl_s = 24 * 3600;  // parsed from worker_cert_ttl
  // Per-token limits.
  int max_streams_per_token = 32;
  double submits_per_minute = 60;
  // Bytes of code each user (not admins) may upload a day; 0: no limit.
  int64_t upload_bytes_per_day = int64_t{2} << 30;
  // Code archives each user (not admins) may keep stored; 0: no limit.
  int max_archives_per_user = 100;

  // A worker not heard from for this long is lost and its ranks count as gone. Heartbeats
  // come every second; 10 s rides out a GC pause or a busy machine without leaving a
  // failed node's peers blocked for long.
  double worker_timeout_s = 10;
  // Grace between SIGTERM and SIGKILL when an attempt is torn down.
  int kill_grace_ms = 3000;
  // From placement until every rank has started (covers exec and library loading).
  double rendezvous_timeout_s = 60;
  int heartbeat_interval_ms = 1000;
  // README "Sharing a cluster": priorities, fair share, ageing and a reservation with
  // backfill; `fifo` is submission order with backfill and no reservation.
  std::string scheduler = "priority";
  // A waiting job's effective priority grows by one per this many seconds: nothing waits
  // forever. 15 minutes lets a priority-1 stream pass a priority-0 job for a while only.
  double priority_ageing_s = 900;
  // The highest `priority` a user (not an admin) may ask for.
  int max_user_priority = 0;
  // Quotas per user (0: none): processes their jobs run at once (over it, a job waits), and
  // jobs they may have waiting (over it, a submit is refused).
  int max_slots_per_user = 0;
  int max_queued_per_user = 0;
  // More specific quotas: "role:user=slots:8,gpus:2,queued:20", "user:alice=slots:32"
  // (coordinator/sched/quota.h), each limit falling back to the next rule.
  std::vector<std::string> quotas;
  // A job that would take its owner over their process or GPU quota: "queue" (it waits) or
  // "refuse" (the submit fails naming the quota).
  std::string over_quota = "queue";
  // Jobs whose spec says nothing of `preemptible` may be preempted when their priority is
  // below this: by default the negative priorities, work that asked to yield.
  int preemptible_below = 0;
  // How long a preempted (or resized, or drained --now) rank has between SIGTERM and SIGKILL
  // to write its checkpoint: the built-in trainer needs one step; 30 s, as Kubernetes'
  // default grace, leaves a user script time to save a large model.
  double preempt_grace_s = 30;
  // Elastic jobs grow at most once per this long (unless their spec's resize_interval says
  // otherwise): each resize restarts the attempt from a checkpoint.
  double min_resize_interval_s = 60;
  // When nodes are sick (README): a worker where ranks of this many different jobs failed
  // for the node's reasons within --node-fault-window is cordoned (0: never by itself). Two:
  // one job failing twice may be the job; two jobs that failed there point at the machine.
  int node_fault_jobs = 2;
  // Ten minutes: long enough that two jobs' failures on a broken disk meet, short enough that
  // two unrelated ones a day apart do not.
  double node_fault_window_s = 600;
  std::string log_level = "info";
  // --check-config: validate everything, start nothing (coordinator/server/check_config.h).
  bool check_config = false;

  // token create / revoke.
  std::string token_user;
  std::string token_role;
  std::string token_ttl;   // empty: 30d for people, 1h for join tokens
  int token_uses = 0;      // join tokens: uses (0 given: 1, single-use)
  std::string token_name;  // join tokens: the one worker name it joins (may take it over)
  std::string revoke;
};

// Parses argv. OK with exit_code 0: run `flags.command`. Otherwise `exit_code` is what main
// returns: 0 for --help/--version, 2 for a usage error (whatever CLI11's own code). The
// Status message says what is wrong; it is empty when CLI11 printed the help, the version
// or its own parse error already.
//
// With --check-config among the arguments and `check` given, a configuration problem is no
// usage error: every one found (the command line's, each bad key of the file, each failed
// check after the parse) is appended to check->errors, check->incomplete says whether the
// flags are whole enough to check further, and the result is OK with exit_code 0 (unless
// --help or --version was asked for).
Status ParseCoordinatorFlags(int argc, char** argv, CoordinatorFlags* flags, int* exit_code,
                             ConfigCheck* check = nullptr);

// --job-retention: "0" (keep every job: both 0), a count "1000" (`count`), or a duration
// "30d" (`age_ms`). Errors name the flag.
Status ParseJobRetention(const std::string& text, int64_t* age_ms, int64_t* count);

// "90s", "15m", "1h", "30d", "0" (never) -> seconds. Errors name `flag`.
StatusOr<int64_t> ParseDuration(const std::string& text, const std::string& flag);

}  // namespace convoy
