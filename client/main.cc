// convoy: the command-line client of convoy-coordinator. This file only parses the command
// line and dispatches; the verbs are in commands.cc, rendering in format.cc and the live
// view in progress.cc / watch.cc.
#include <grpc/support/log.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "client/checkpoints.h"
#include "client/commands.h"
#include "client/config.h"
#include "client/format.h"
#include "client/sick_nodes.h"
#include "client/ui.h"
#include "common/util.h"
#include "common/version.h"

namespace convoy {
namespace {

// Used when neither --coordinator nor CONVOY_COORDINATOR is given: a coordinator on this
// machine with convoy-coordinator's usual port.
constexpr const char* kDefaultCoordinator = "127.0.0.1:7070";

// gRPC's own log lines (a failed TLS handshake logs "ssl_transport_security.cc:...") are for
// debugging: the CLI says what went wrong itself. GRPC_VERBOSITY or GRPC_TRACE brings them back.
void QuietGrpcLog(gpr_log_func_args* /*args*/) {}

// What the command line says: each option's value (CLI11 writes them here as it parses) and
// each verb.
struct Invocation {
  // Everyone's.
  std::string coordinator, token, ca_file, ca_fingerprint, config_path = DefaultConfigPath();
  bool insecure = false;
  std::string output = "text";
  // The verbs' arguments.
  std::string job;
  bool watch = false, follow = false;
  bool cascade = false;  // cancel --cascade
  int rank = 0, attempt = -1;
  int64_t tail = 0;
  SubmitArgs submit_args;
  ListArgs list_args;
  int workers_limit = 0;
  std::string workers_page_token;
  std::string worker;
  bool drain_now = false;
  std::string cordon_reason;
  std::string metric = "loss", plot_output = "chart";
  int plot_rank = -1;
  bool once = false;
  int interval_ms = 1000;
  // The verbs.
  CLI::App* submit = nullptr;
  CLI::App* list = nullptr;
  CLI::App* queue = nullptr;
  CLI::App* status = nullptr;
  CLI::App* watch_cmd = nullptr;
  CLI::App* logs = nullptr;
  CLI::App* cancel = nullptr;
  CLI::App* delete_cmd = nullptr;
  CLI::App* workers = nullptr;
  CLI::App* drain = nullptr;
  CLI::App* undrain = nullptr;
  CLI::App* forget = nullptr;
  CLI::App* cordon = nullptr;
  CLI::App* uncordon = nullptr;
  CLI::App* plot = nullptr;
  CLI::App* top = nullptr;
  CLI::App* login = nullptr;
  CLI::App* ui = nullptr;
  bool ui_open = false;
  CLI::App* checkpoints = nullptr;  // client/checkpoints.h
};

void AddOutput(Invocation& v, CLI::App* cmd) {
  cmd->add_option("--output,-o", v.output, "text, json or yaml")
      ->check(CLI::IsMember({"text", "json", "yaml"}))
      ->capture_default_str();
}

void AddGlobalOptions(CLI::App& app, Invocation& v) {
  app.add_option("--coordinator", v.coordinator,
                 "HOST:PORT of convoy-coordinator (default: the config file, else " +
                     std::string(kDefaultCoordinator) + ")")
      ->envname("CONVOY_COORDINATOR");
  app.add_option("--token", v.token, "bearer token (convoy-coordinator token create)")
      ->envname("CONVOY_TOKEN");
  app.add_option("--ca", v.ca_file, "PEM file of the cluster CA")->envname("CONVOY_CA");
  app.add_flag("--insecure", v.insecure, "plain text to a --insecure coordinator on loopback");
  app.add_option("--config", v.config_path, "the config file")
      ->envname("CONVOY_CONFIG")
      ->capture_default_str();
}

// submit, list, queue, status, watch, logs, cancel, delete.
void AddJobVerbs(CLI::App& app, Invocation& v) {
  v.submit = app.add_subcommand(
      "submit",
      "submit a job spec (YAML or JSON; '-': standard input) or a command after '--'; prints "
      "its id");
  v.submit->footer(
      "Examples:\n  convoy submit job.yaml --code ./myproject\n"
      "  convoy submit job.yaml --set trainer.max_steps=300 --set env.OMP_NUM_THREADS=1\n"
      "  convoy submit job.yaml --set checkpoint.keep_last=2   # keep the newest 2 checkpoints\n"
      "  convoy submit job.yaml --set resume_from=j-000004 --set resume_checkpoint=best\n"
      "  convoy submit --nodes 2 --procs-per-node 1 --code . -- python3 train.py --epochs 1\n"
      "  cat job.yaml | convoy submit -\n"
      "  convoy submit eval.yaml --after j-000004               # runs once j-000004 succeeded\n"
      "  convoy submit cleanup.yaml --after j-000004:failed     # runs only if it failed\n"
      "  convoy submit report.yaml --after j-000004:ended --after j-000005\n"
      "  convoy submit job.yaml --sweep trainer.lr=0.1,0.01,0.001 --max-parallel 2 \\\n"
      "      --sweep-metric test_accuracy:max     # a sweep: one trial job per value");
  v.submit->add_option("FILE", v.submit_args.file, "the job spec; '-' reads standard input");
  v.submit->add_option("--code", v.submit_args.code_dir,
                       "pack this directory (at most 100 MB, minus .gitignore/.convoyignore) and "
                       "unpack it into the job's directory on every worker");
  v.submit->add_option("--nodes", v.submit_args.nodes, "nodes (overrides the spec's)");
  v.submit->add_option("--procs-per-node", v.submit_args.procs_per_node,
                       "processes per node (overrides the spec's)");
  v.submit->add_option("--name", v.submit_args.name, "job name (default with a command: job)");
  v.submit
      ->add_option("--set", v.submit_args.sets,
                   "set a spec field, typed and checked as in the file (repeatable; before "
                   "--nodes, --procs-per-node, --name): trainer.max_steps=300, env.FOO=bar")
      ->type_name("FIELD=VALUE")
      ->allow_extra_args(false);
  v.submit
      ->add_option("--after", v.submit_args.after,
                   "wait for this job (repeatable; added to the spec's `after`): WHEN is "
                   "succeeded (the default), failed or ended; if it ends the other way, this "
                   "job fails at once")
      ->type_name("JOB[:WHEN]")
      ->allow_extra_args(false);
  v.submit
      ->add_option("--sweep", v.submit_args.sweep.params,
                   "sweep a spec field (repeatable): one trial per value, or per combination "
                   "of several --sweep (README \"Sweeps\")")
      ->type_name("FIELD=V1,V2,...")
      ->allow_extra_args(false);
  v.submit
      ->add_option("--max-parallel", v.submit_args.sweep.max_parallel,
                   "a sweep's trials unfinished at once (default 1)")
      ->check(CLI::Range(1, 256));
  v.submit
      ->add_option("--sweep-metric", v.submit_args.sweep.metric,
                   "what ranks a sweep's trials: a metric and max or min "
                   "(default loss:min)")
      ->type_name("NAME[:max|min]");
  v.submit->add_flag("--watch,-w", v.watch,
                     "then follow it like `watch` (exit 0 iff it SUCCEEDED)");
  AddOutput(v, v.submit);
  v.list = app.add_subcommand("list", "list jobs, oldest first, with filters and paging");
  v.list->add_option("--state,-s", v.list_args.states,
                     "only jobs in this state (repeatable, or comma-separated: RUNNING,PENDING)");
  v.list->add_option("--owner", v.list_args.owner, "only jobs submitted by this user");
  v.list->add_option("--since", v.list_args.since,
                     "only jobs submitted since: a duration back from now (90s, 15m, 1h, 7d) or a "
                     "local time (2026-11-25, 2026-11-25T10:00; UTC with a trailing Z)");
  v.list
      ->add_option("--limit,-n", v.list_args.limit,
                   "one page of at most N jobs (1-1000; default: every job, fetched in pages)")
      ->check(CLI::Range(1, 1000));
  v.list->add_option("--page-token", v.list_args.page_token,
                     "start after the previous page (the token --limit printed)");
  v.list->add_flag("--trials", v.list_args.trials,
                   "list sweeps' trials too (a sweep is one row otherwise)");
  v.list->footer(
      "Examples:\n  convoy list\n  convoy list --state RUNNING,PENDING --owner alice\n"
      "  convoy list --since 1h -o yaml\n"
      "  convoy list --trials              # sweeps and their trials\n"
      "  convoy list --limit 50            # then: --limit 50 --page-token <printed token>");
  AddOutput(v, v.list);
  v.queue =
      app.add_subcommand("queue", "waiting jobs in the order they will start, and why each waits");
  v.queue->footer("Examples:\n  convoy queue\n  convoy queue -o json");
  AddOutput(v, v.queue);
  v.status =
      app.add_subcommand("status", "a job's state, placement, progress, failures and events");
  v.status->add_option("JOB", v.job, "job id")->required();
  v.status->footer(
      "Examples:\n  convoy status j-000001\n  convoy status j-000001 -o json\n"
      "  convoy status j-000007            # a sweep: its trials, the best, what ASHA stopped");
  AddOutput(v, v.status);
  v.watch_cmd =
      app.add_subcommand("watch", "follow a job live until it ends (exit 0 iff it SUCCEEDED)");
  v.watch_cmd->add_option("JOB", v.job, "job id")->required();
  v.watch_cmd->footer(
      "Examples:\n  convoy watch j-000001 && echo trained\n"
      "  convoy watch j-000001 -o json     # one JSON object a line per update");
  AddOutput(v, v.watch_cmd);
  v.logs = app.add_subcommand("logs", "a rank's output (stdout and stderr), raw");
  v.logs->add_option("JOB", v.job, "job id")->required();
  v.logs->footer(
      "Examples:\n  convoy logs j-000001               # rank 0 of the latest attempt\n"
      "  convoy logs j-000001 --rank 1 -f\n  convoy logs j-000001 --attempt 0 --tail 4096");
  v.logs->add_option("--rank,-r", v.rank, "global rank")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  v.logs->add_option("--attempt", v.attempt, "attempt number (default: the latest)")
      ->check(CLI::Range(0, 1 << 20));
  v.logs->add_flag("--follow,-f", v.follow, "keep streaming until the rank exits");
  v.logs->add_option("--tail", v.tail, "only the last N bytes")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  v.cancel = app.add_subcommand("cancel", "cancel a job; prints its new state");
  v.cancel->add_option("JOB", v.job, "job id")->required();
  v.cancel->add_flag("--cascade", v.cascade,
                     "also cancel the jobs of the same owner that wait on it (after), in turn");
  v.cancel->footer(
      "Examples:\n  convoy cancel j-000001\n"
      "  convoy cancel --cascade j-000001   # and every job of yours waiting on it\n"
      "  convoy cancel j-000007            # a sweep: its unfinished trials too");
  AddOutput(v, v.cancel);
  v.delete_cmd = app.add_subcommand(
      "delete",
      "delete a finished job: its record, events and metrics, and its files on the workers "
      "(logs, checkpoints, unpacked code)");
  v.delete_cmd->add_option("JOB", v.job, "job id")->required();
  v.delete_cmd->footer(
      "Examples:\n  convoy delete j-000001\n"
      "  convoy cancel j-000002 && convoy delete j-000002   # a job that still runs");
  AddOutput(v, v.delete_cmd);
  // Checkpoints kept by policy (client/checkpoints.h).
  v.checkpoints = app.add_subcommand(
      "checkpoints",
      "the checkpoints a job keeps (its spec's checkpoint policy): where, step, metrics, why");
  v.checkpoints->add_option("JOB", v.job, "job id")->required();
  v.checkpoints->footer(kCheckpointsHelpFooter);
  AddOutput(v, v.checkpoints);
}

// workers, drain, undrain, cordon, uncordon, worker forget.
void AddWorkerVerbs(CLI::App& app, Invocation& v) {
  v.workers = app.add_subcommand("workers", "list workers, by name");
  v.workers
      ->add_option("--limit,-n", v.workers_limit,
                   "one page of at most N workers (1-1000; default: every worker)")
      ->check(CLI::Range(1, 1000));
  v.workers->add_option("--page-token", v.workers_page_token,
                        "start after the previous page (the token --limit printed)");
  v.workers->footer("Examples:\n  convoy workers\n  convoy workers --limit 100 -o json");
  AddOutput(v, v.workers);
  v.drain = app.add_subcommand(
      "drain", "admins: no new jobs on WORKER; what runs there finishes (`undrain` reverts)");
  v.drain->add_option("WORKER", v.worker, "worker name")->required();
  v.drain->add_flag("--now", v.drain_now,
                    "preempt what runs there: its ranks checkpoint and stop, and each job waits to "
                    "resume elsewhere without using a restart");
  v.drain->footer(
      "Examples:\n  convoy drain w1      # then, after maintenance: convoy undrain w1\n"
      "  convoy drain w1 --now   # move its jobs off it now, from their checkpoints");
  AddOutput(v, v.drain);
  v.undrain = app.add_subcommand("undrain", "admins: place jobs on WORKER again");
  v.undrain->add_option("WORKER", v.worker, "worker name")->required();
  v.undrain->footer("Example:\n  convoy undrain w1");
  AddOutput(v, v.undrain);
  // When nodes are sick (README).
  v.cordon = app.add_subcommand(
      "cordon", "admins: no new ranks on WORKER, with a reason; what runs there goes on");
  v.cordon->add_option("WORKER", v.worker, "worker name")->required();
  v.cordon->add_option("--reason", v.cordon_reason, "why, shown in `convoy workers`");
  v.cordon->footer(
      "Examples:\n  convoy cordon w3 --reason 'GPU 2 throws ECC errors'\n"
      "  convoy workers          # w3 READY,CORDONED with the reason\n"
      "  convoy uncordon w3      # after the repair");
  AddOutput(v, v.cordon);
  v.uncordon = app.add_subcommand(
      "uncordon",
      "admins: place ranks on WORKER again after a cordon (yours, or the coordinator's when "
      "ranks of several jobs failed there for the node's reasons); clears its node faults");
  v.uncordon->add_option("WORKER", v.worker, "worker name")->required();
  v.uncordon->footer(
      "Examples:\n  convoy uncordon w3\n  convoy workers -o json   # node_faults: what cordoned "
      "it");
  AddOutput(v, v.uncordon);
  CLI::App* worker_group = app.add_subcommand("worker", "admins: verbs on one worker");
  worker_group->require_subcommand(1);
  worker_group->footer("Example:\n  convoy worker forget w2");
  v.forget = worker_group->add_subcommand(
      "forget",
      "admins: remove a LOST worker's record for good (it leaves `convoy workers`, also after a "
      "coordinator restart); a connected worker is refused");
  v.forget->add_option("WORKER", v.worker, "worker name")->required();
  v.forget->footer(
      "Examples:\n  convoy worker forget w2\n"
      "  convoy drain w2   # a worker still connected: drain it, stop its daemon, wait until "
      "`convoy workers` shows it LOST, then forget it");
  AddOutput(v, v.forget);
}

// plot, top, login.
void AddOtherVerbs(CLI::App& app, Invocation& v) {
  v.plot = app.add_subcommand(
      "plot", "a job's metric history as a terminal chart, or its series as CSV or JSON");
  v.plot->add_option("JOB", v.job, "job id")->required();
  v.plot->footer(
      "Examples:\n  convoy plot j-000001\n  convoy plot j-000001 --metric accuracy\n"
      "  convoy plot j-000001 --rank 0 -o csv > loss.csv");
  v.plot->add_option("--metric,-m", v.metric, "loss, samples_per_second or accuracy")
      ->check(CLI::IsMember({"loss", "samples_per_second", "accuracy"}))
      ->capture_default_str();
  v.plot->add_option("--rank,-r", v.plot_rank, "only this global rank (default: every rank)")
      ->check(CLI::Range(0, 1 << 20));
  v.plot->add_option("--output,-o", v.plot_output, "chart, csv, json or yaml")
      ->check(CLI::IsMember({"chart", "csv", "json", "yaml"}))
      ->capture_default_str();
  v.top = app.add_subcommand(
      "top", "every running job with its progress, rate and slowest rank, refreshed in place");
  v.top->footer("Examples:\n  convoy top\n  convoy top --once --interval-ms 5000");
  v.top->add_flag("--once", v.once, "print once, without escape codes (for scripts), and exit");
  v.top->add_option("--interval-ms", v.interval_ms, "refresh period")
      ->check(CLI::Range(100, 3600 * 1000))
      ->capture_default_str();
  v.login = app.add_subcommand(
      "login",
      "check --coordinator, --token and --ca (or --ca-fingerprint), then save them in "
      "the config file (mode 0600)");
  v.login->footer(
      "Example:\n  convoy login --coordinator coord.example.net:7070 --ca-fingerprint "
      "SHA256:3f9c... "
      "\\\n    --token \"$(convoy-coordinator token create --user alice --role user)\"");
  v.login->add_option("--ca-fingerprint", v.ca_fingerprint,
                      "fetch the CA from the coordinator and check it against this SHA256:...");
  v.ui = app.add_subcommand(
      "ui", "print a one-time login link to the coordinator's web UI (valid a minute)");
  v.ui->add_option("JOB", v.job, "open at this job's page (default: the jobs)");
  v.ui->add_flag("--open", v.ui_open, "also open it in the browser ($BROWSER, else xdg-open)");
  v.ui->footer("Examples:\n  convoy ui\n  convoy ui j-000001 --open");
}

// Parses the command line into `v`; an exit code when the process is to exit at once (help,
// the version, a usage error).
std::optional<int> Parse(CLI::App& app, int argc, char** argv, Invocation& v) {
  try {
    // `convoy submit ... -- CMD ARGS`: what follows the first `--` after `submit` is the
    // job's command, never parsed as options.
    int cut = argc;
    bool seen_submit = false;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "submit") seen_submit = true;
      if (a == "--" && seen_submit) {
        cut = i;
        for (int j = i + 1; j < argc; ++j) v.submit_args.command.emplace_back(argv[j]);
        break;
      }
    }
    app.parse(cut, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const auto extra = app.remaining();
    if (app.get_subcommands().empty() && !extra.empty() && extra[0][0] != '-') {
      std::string names;  // every verb, in the order --help lists them
      for (const CLI::App* cmd : app.get_subcommands([](CLI::App*) { return true; })) {
        names += (names.empty() ? "" : ", ") + cmd->get_name();
      }
      std::cerr << "convoy: unknown command '" << extra[0] << "' (commands: " << names << ")";
    } else {
      std::cerr << "convoy: " << e.what();
    }
    std::cerr << "\nRun 'convoy --help' for usage.\n";
    return kExitUsage;
  }
  return std::nullopt;
}

// Where to connect and how (`config`), from the flags, the environment and the config file;
// an exit code when they do not make sense.
std::optional<int> Configure(Invocation& v, ClientConfig* config) {
  // Flags and environment first, then the config file (not read at all when everything
  // came from flags: a bad file must not stand in the way of explicit flags).
  if (!v.login->parsed() && (v.coordinator.empty() || v.token.empty() || v.ca_file.empty()) &&
      !v.insecure) {
    auto file = LoadClientConfig(v.config_path);
    if (!file.ok()) {
      std::cerr << "convoy: " << file.status().message() << "\n";
      return kExitUsage;
    }
    *config = *file;
  }
  if (!v.coordinator.empty()) config->coordinator = v.coordinator;
  if (config->coordinator.empty()) config->coordinator = kDefaultCoordinator;
  v.coordinator = config->coordinator;
  if (!v.token.empty()) config->token = v.token;
  if (!v.ca_file.empty()) {
    std::ifstream in(v.ca_file);
    std::stringstream pem;
    pem << in.rdbuf();
    if (!in || pem.str().find("BEGIN CERTIFICATE") == std::string::npos) {
      std::cerr << "convoy: --ca (or CONVOY_CA) " << v.ca_file
                << ": not a readable PEM certificate\n";
      return kExitUsage;
    }
    config->ca_pem = pem.str();
  }
  if (v.login->parsed() && !v.ca_fingerprint.empty()) {
    auto ca = FetchPinnedCa(config->coordinator, v.ca_fingerprint);
    if (!ca.ok()) {
      std::cerr << "convoy login: " << ca.status().message() << "\n";
      return ca.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitUnavailable;
    }
    config->ca_pem = *ca;
  }
  // HOST:PORT is checked here; a gRPC target URI ("dns:///host:port", "unix:/path") is
  // passed through as it is.
  std::string host;
  if (v.coordinator.find(":/") == std::string::npos) {
    auto checked = CheckCoordinators(v.coordinator, "--coordinator (or CONVOY_COORDINATOR)");
    if (!checked.ok()) {
      std::cerr << "convoy: " << checked.status().message() << "\n";
      return kExitUsage;
    }
    host = *checked;
  }
  // Plain text only when asked, or when nothing secret would travel: no token, no CA, and a
  // coordinator on this machine (convoy-coordinator --insecure serves loopback only).
  config->insecure =
      v.insecure || (config->token.empty() && config->ca_pem.empty() && IsLoopbackHost(host));
  if (v.insecure && !IsLoopbackHost(host)) {
    std::cerr << "convoy: --insecure: plain text is for a coordinator on loopback, not '" << host
              << "'\n";
    return kExitUsage;
  }
  return std::nullopt;
}

// Runs the verb.
int Dispatch(const Invocation& v, const ClientConfig& config) {
  CoordinatorClient c = ConnectToCoordinator(config, v.insecure);
  CommandOptions options;
  options.json = v.output == "json";
  options.yaml = v.output == "yaml";
  if (v.submit->parsed()) return SubmitCommand(c, v.submit_args, v.watch, options);
  if (v.list->parsed()) return ListCommand(c, v.list_args, options);
  if (v.queue->parsed()) return QueueCommand(c, options);
  if (v.status->parsed()) return StatusCommand(c, v.job, options);
  if (v.watch_cmd->parsed()) return WatchCommand(c, v.job, options);
  if (v.logs->parsed()) return LogsCommand(c, v.job, v.rank, v.attempt, v.follow, v.tail);
  if (v.cancel->parsed()) return CancelCommand(c, v.job, options, v.cascade);
  if (v.delete_cmd->parsed()) return DeleteCommand(c, v.job, options);
  if (v.checkpoints->parsed()) return CheckpointsCommand(c, v.job, options);
  if (v.workers->parsed()) return WorkersCommand(c, v.workers_limit, v.workers_page_token, options);
  if (v.drain->parsed()) return DrainCommand(c, v.worker, true, v.drain_now, options);
  if (v.undrain->parsed()) return DrainCommand(c, v.worker, false, false, options);
  if (v.forget->parsed()) return ForgetWorkerCommand(c, v.worker, options);
  if (v.cordon->parsed()) return CordonCommand(c, v.worker, true, v.cordon_reason, options);
  if (v.uncordon->parsed()) return CordonCommand(c, v.worker, false, "", options);
  if (v.plot->parsed()) return PlotCommand(c, v.job, v.metric, v.plot_rank, v.plot_output);
  if (v.top->parsed()) return TopCommand(c, v.once, v.interval_ms);
  if (v.ui->parsed()) return UiCommand(c, v.coordinator, v.job, v.ui_open);
  return kExitUsage;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  using namespace convoy;
  if (std::getenv("GRPC_VERBOSITY") == nullptr && std::getenv("GRPC_TRACE") == nullptr) {
    gpr_set_log_function(QuietGrpcLog);
  }
  CLI::App app{"convoy: submit and follow distributed training jobs on a Convoy cluster"};
  app.footer(kExitCodesHelp);
  app.set_version_flag("--version", VersionLine("convoy"));
  app.require_subcommand(1);
  app.fallthrough();  // --coordinator may also follow the verb
  Invocation v;
  AddGlobalOptions(app, v);
  AddJobVerbs(app, v);
  AddWorkerVerbs(app, v);
  AddOtherVerbs(app, v);
  if (std::optional<int> exit = Parse(app, argc, argv, v)) return *exit;
  ClientConfig config;
  if (std::optional<int> exit = Configure(v, &config)) return *exit;
  if (v.login->parsed()) return LoginCommand(config, v.config_path);
  return Dispatch(v, config);
}
