// convoy: the command-line client of convoy-coordinator. This file only parses the command
// line and dispatches; the verbs are in commands.cc, rendering in format.cc and the live
// view in progress.cc / watch.cc.
#include <grpc/support/log.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "client/commands.h"
#include "client/config.h"
#include "client/format.h"
#include "client/ui.h"
#include "common/util.h"
#include "common/version.h"

namespace {

// Used when neither --coordinator nor CONVOY_COORDINATOR is given: a coordinator on this
// machine with convoy-coordinator's usual port.
constexpr const char* kDefaultCoordinator = "127.0.0.1:7070";

// gRPC's own log lines (a failed TLS handshake logs "ssl_transport_security.cc:...") are for
// debugging: the CLI says what went wrong itself. GRPC_VERBOSITY or GRPC_TRACE brings them back.
void QuietGrpcLog(gpr_log_func_args* /*args*/) {}

}  // namespace

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
  std::string coordinator, token, ca_file, ca_fingerprint, config_path = DefaultConfigPath();
  bool insecure = false;
  app.add_option("--coordinator", coordinator,
                 "HOST:PORT of convoy-coordinator (default: the config file, else " +
                     std::string(kDefaultCoordinator) + ")")
      ->envname("CONVOY_COORDINATOR");
  app.add_option("--token", token, "bearer token (convoy-coordinator token create)")
      ->envname("CONVOY_TOKEN");
  app.add_option("--ca", ca_file, "PEM file of the cluster CA")->envname("CONVOY_CA");
  app.add_flag("--insecure", insecure, "plain text to a --insecure coordinator on loopback");
  app.add_option("--config", config_path, "the config file")
      ->envname("CONVOY_CONFIG")
      ->capture_default_str();

  std::string output = "text";
  auto add_output = [&output](CLI::App* cmd) {
    cmd->add_option("--output,-o", output, "text, json or yaml")
        ->check(CLI::IsMember({"text", "json", "yaml"}))
        ->capture_default_str();
  };
  std::string job;
  bool watch = false, follow = false;
  int rank = 0, attempt = -1;
  int64_t tail = 0;

  SubmitArgs submit_args;
  CLI::App* submit = app.add_subcommand(
      "submit",
      "submit a job spec (YAML or JSON; '-': standard input) or a command after '--'; prints "
      "its id");
  submit->footer(
      "Examples:\n  convoy submit job.yaml --code ./myproject\n"
      "  convoy submit job.yaml --set trainer.max_steps=300 --set env.OMP_NUM_THREADS=1\n"
      "  convoy submit --nodes 2 --procs-per-node 1 --code . -- python3 train.py --epochs 1\n"
      "  cat job.yaml | convoy submit -");
  submit->add_option("FILE", submit_args.file, "the job spec; '-' reads standard input");
  submit->add_option("--code", submit_args.code_dir,
                     "pack this directory (at most 100 MB, minus .gitignore/.convoyignore) and "
                     "unpack it into the job's directory on every worker");
  submit->add_option("--nodes", submit_args.nodes, "nodes (overrides the spec's)");
  submit->add_option("--procs-per-node", submit_args.procs_per_node,
                     "processes per node (overrides the spec's)");
  submit->add_option("--name", submit_args.name, "job name (default with a command: job)");
  submit
      ->add_option("--set", submit_args.sets,
                   "set a spec field, typed and checked as in the file (repeatable; before "
                   "--nodes, --procs-per-node, --name): trainer.max_steps=300, env.FOO=bar")
      ->type_name("FIELD=VALUE")
      ->allow_extra_args(false);
  submit->add_flag("--watch,-w", watch, "then follow it like `watch` (exit 0 iff it SUCCEEDED)");
  add_output(submit);
  ListArgs list_args;
  CLI::App* list = app.add_subcommand("list", "list jobs, oldest first, with filters and paging");
  list->add_option("--state,-s", list_args.states,
                   "only jobs in this state (repeatable, or comma-separated: RUNNING,PENDING)");
  list->add_option("--owner", list_args.owner, "only jobs submitted by this user");
  list->add_option("--since", list_args.since,
                   "only jobs submitted since: a duration back from now (90s, 15m, 1h, 7d) or a "
                   "local time (2026-11-25, 2026-11-25T10:00; UTC with a trailing Z)");
  list->add_option("--limit,-n", list_args.limit,
                   "one page of at most N jobs (1-1000; default: every job, fetched in pages)")
      ->check(CLI::Range(1, 1000));
  list->add_option("--page-token", list_args.page_token,
                   "start after the previous page (the token --limit printed)");
  list->footer(
      "Examples:\n  convoy list\n  convoy list --state RUNNING,PENDING --owner alice\n"
      "  convoy list --since 1h -o yaml\n"
      "  convoy list --limit 50            # then: --limit 50 --page-token <printed token>");
  add_output(list);
  CLI::App* queue =
      app.add_subcommand("queue", "waiting jobs in the order they will start, and why each waits");
  queue->footer("Examples:\n  convoy queue\n  convoy queue -o json");
  add_output(queue);
  CLI::App* status =
      app.add_subcommand("status", "a job's state, placement, progress, failures and events");
  status->add_option("JOB", job, "job id")->required();
  status->footer("Examples:\n  convoy status j-000001\n  convoy status j-000001 -o json");
  add_output(status);
  CLI::App* watch_cmd =
      app.add_subcommand("watch", "follow a job live until it ends (exit 0 iff it SUCCEEDED)");
  watch_cmd->add_option("JOB", job, "job id")->required();
  watch_cmd->footer(
      "Examples:\n  convoy watch j-000001 && echo trained\n"
      "  convoy watch j-000001 -o json     # one JSON object a line per update");
  add_output(watch_cmd);
  CLI::App* logs = app.add_subcommand("logs", "a rank's output (stdout and stderr), raw");
  logs->add_option("JOB", job, "job id")->required();
  logs->footer(
      "Examples:\n  convoy logs j-000001               # rank 0 of the latest attempt\n"
      "  convoy logs j-000001 --rank 1 -f\n  convoy logs j-000001 --attempt 0 --tail 4096");
  logs->add_option("--rank,-r", rank, "global rank")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  logs->add_option("--attempt", attempt, "attempt number (default: the latest)")
      ->check(CLI::Range(0, 1 << 20));
  logs->add_flag("--follow,-f", follow, "keep streaming until the rank exits");
  logs->add_option("--tail", tail, "only the last N bytes")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  CLI::App* cancel = app.add_subcommand("cancel", "cancel a job; prints its new state");
  cancel->add_option("JOB", job, "job id")->required();
  cancel->footer("Example:\n  convoy cancel j-000001");
  add_output(cancel);
  int workers_limit = 0;
  std::string workers_page_token;
  CLI::App* delete_cmd = app.add_subcommand(
      "delete",
      "delete a finished job: its record, events and metrics, and its files on the workers "
      "(logs, checkpoints, unpacked code)");
  delete_cmd->add_option("JOB", job, "job id")->required();
  delete_cmd->footer(
      "Examples:\n  convoy delete j-000001\n"
      "  convoy cancel j-000002 && convoy delete j-000002   # a job that still runs");
  add_output(delete_cmd);
  CLI::App* workers = app.add_subcommand("workers", "list workers, by name");
  workers
      ->add_option("--limit,-n", workers_limit,
                   "one page of at most N workers (1-1000; default: every worker)")
      ->check(CLI::Range(1, 1000));
  workers->add_option("--page-token", workers_page_token,
                      "start after the previous page (the token --limit printed)");
  workers->footer("Examples:\n  convoy workers\n  convoy workers --limit 100 -o json");
  add_output(workers);
  std::string worker;
  CLI::App* drain = app.add_subcommand(
      "drain", "admins: no new jobs on WORKER; what runs there finishes (`undrain` reverts)");
  drain->add_option("WORKER", worker, "worker name")->required();
  bool drain_now = false;
  drain->add_flag("--now", drain_now,
                  "preempt what runs there: its ranks checkpoint and stop, and each job waits to "
                  "resume elsewhere without using a restart");
  drain->footer(
      "Examples:\n  convoy drain w1      # then, after maintenance: convoy undrain w1\n"
      "  convoy drain w1 --now   # move its jobs off it now, from their checkpoints");
  add_output(drain);
  CLI::App* undrain = app.add_subcommand("undrain", "admins: place jobs on WORKER again");
  undrain->add_option("WORKER", worker, "worker name")->required();
  undrain->footer("Example:\n  convoy undrain w1");
  add_output(undrain);
  CLI::App* worker_group = app.add_subcommand("worker", "admins: verbs on one worker");
  worker_group->require_subcommand(1);
  worker_group->footer("Example:\n  convoy worker forget w2");
  CLI::App* forget = worker_group->add_subcommand(
      "forget",
      "admins: remove a LOST worker's record for good (it leaves `convoy workers`, also after a "
      "coordinator restart); a connected worker is refused");
  forget->add_option("WORKER", worker, "worker name")->required();
  forget->footer(
      "Examples:\n  convoy worker forget w2\n"
      "  convoy drain w2   # a worker still connected: drain it, stop its daemon, wait until "
      "`convoy workers` shows it LOST, then forget it");
  add_output(forget);
  std::string metric = "loss", plot_output = "chart";
  int plot_rank = -1;
  CLI::App* plot = app.add_subcommand(
      "plot", "a job's metric history as a terminal chart, or its series as CSV or JSON");
  plot->add_option("JOB", job, "job id")->required();
  plot->footer(
      "Examples:\n  convoy plot j-000001\n  convoy plot j-000001 --metric accuracy\n"
      "  convoy plot j-000001 --rank 0 -o csv > loss.csv");
  plot->add_option("--metric,-m", metric, "loss, samples_per_second or accuracy")
      ->check(CLI::IsMember({"loss", "samples_per_second", "accuracy"}))
      ->capture_default_str();
  plot->add_option("--rank,-r", plot_rank, "only this global rank (default: every rank)")
      ->check(CLI::Range(0, 1 << 20));
  plot->add_option("--output,-o", plot_output, "chart, csv, json or yaml")
      ->check(CLI::IsMember({"chart", "csv", "json", "yaml"}))
      ->capture_default_str();
  bool once = false;
  int interval_ms = 1000;
  CLI::App* top = app.add_subcommand(
      "top", "every running job with its progress, rate and slowest rank, refreshed in place");
  top->footer("Examples:\n  convoy top\n  convoy top --once --interval-ms 5000");
  top->add_flag("--once", once, "print once, without escape codes (for scripts), and exit");
  top->add_option("--interval-ms", interval_ms, "refresh period")
      ->check(CLI::Range(100, 3600 * 1000))
      ->capture_default_str();
  CLI::App* login = app.add_subcommand(
      "login",
      "check --coordinator, --token and --ca (or --ca-fingerprint), then save them in "
      "the config file (mode 0600)");
  login->footer(
      "Example:\n  convoy login --coordinator coord.example.net:7070 --ca-fingerprint "
      "SHA256:3f9c... "
      "\\\n    --token \"$(convoy-coordinator token create --user alice --role user)\"");
  login->add_option("--ca-fingerprint", ca_fingerprint,
                    "fetch the CA from the coordinator and check it against this SHA256:...");
  bool ui_open = false;
  CLI::App* ui = app.add_subcommand(
      "ui", "print a one-time login link to the coordinator's web UI (valid a minute)");
  ui->add_option("JOB", job, "open at this job's page (default: the jobs)");
  ui->add_flag("--open", ui_open, "also open it in the browser ($BROWSER, else xdg-open)");
  ui->footer("Examples:\n  convoy ui\n  convoy ui j-000001 --open");

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
        for (int j = i + 1; j < argc; ++j) submit_args.command.emplace_back(argv[j]);
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
  // Flags and environment first, then the config file (not read at all when everything
  // came from flags: a bad file must not stand in the way of explicit flags).
  ClientConfig config;
  if (!login->parsed() && (coordinator.empty() || token.empty() || ca_file.empty()) && !insecure) {
    auto file = LoadClientConfig(config_path);
    if (!file.ok()) {
      std::cerr << "convoy: " << file.status().message() << "\n";
      return kExitUsage;
    }
    config = *file;
  }
  if (!coordinator.empty()) config.coordinator = coordinator;
  if (config.coordinator.empty()) config.coordinator = kDefaultCoordinator;
  coordinator = config.coordinator;
  if (!token.empty()) config.token = token;
  if (!ca_file.empty()) {
    std::ifstream in(ca_file);
    std::stringstream pem;
    pem << in.rdbuf();
    if (!in || pem.str().find("BEGIN CERTIFICATE") == std::string::npos) {
      std::cerr << "convoy: --ca (or CONVOY_CA) " << ca_file
                << ": not a readable PEM certificate\n";
      return kExitUsage;
    }
    config.ca_pem = pem.str();
  }
  if (login->parsed() && !ca_fingerprint.empty()) {
    auto ca = FetchPinnedCa(config.coordinator, ca_fingerprint);
    if (!ca.ok()) {
      std::cerr << "convoy login: " << ca.status().message() << "\n";
      return ca.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitUnavailable;
    }
    config.ca_pem = *ca;
  }
  // HOST:PORT is checked here; a gRPC target URI ("dns:///host:port", "unix:/path") is
  // passed through as it is.
  std::string host;
  if (coordinator.find(":/") == std::string::npos) {
    auto checked = CheckCoordinators(coordinator, "--coordinator (or CONVOY_COORDINATOR)");
    if (!checked.ok()) {
      std::cerr << "convoy: " << checked.status().message() << "\n";
      return kExitUsage;
    }
    host = *checked;
  }
  // Plain text only when asked, or when nothing secret would travel: no token, no CA, and a
  // coordinator on this machine (convoy-coordinator --insecure serves loopback only).
  config.insecure =
      insecure || (config.token.empty() && config.ca_pem.empty() && IsLoopbackHost(host));
  if (insecure && !IsLoopbackHost(host)) {
    std::cerr << "convoy: --insecure: plain text is for a coordinator on loopback, not '" << host
              << "'\n";
    return kExitUsage;
  }
  if (login->parsed()) return LoginCommand(config, config_path);

  CoordinatorClient c = ConnectToCoordinator(config, insecure);
  CommandOptions options;
  options.json = output == "json";
  options.yaml = output == "yaml";
  if (submit->parsed()) return SubmitCommand(c, submit_args, watch, options);
  if (list->parsed()) return ListCommand(c, list_args, options);
  if (queue->parsed()) return QueueCommand(c, options);
  if (status->parsed()) return StatusCommand(c, job, options);
  if (watch_cmd->parsed()) return WatchCommand(c, job, options);
  if (logs->parsed()) return LogsCommand(c, job, rank, attempt, follow, tail);
  if (cancel->parsed()) return CancelCommand(c, job, options);
  if (delete_cmd->parsed()) return DeleteCommand(c, job, options);
  if (workers->parsed()) return WorkersCommand(c, workers_limit, workers_page_token, options);
  if (drain->parsed()) return DrainCommand(c, worker, true, drain_now, options);
  if (undrain->parsed()) return DrainCommand(c, worker, false, false, options);
  if (forget->parsed()) return ForgetWorkerCommand(c, worker, options);
  if (plot->parsed()) return PlotCommand(c, job, metric, plot_rank, plot_output);
  if (top->parsed()) return TopCommand(c, once, interval_ms);
  if (ui->parsed()) return UiCommand(c, coordinator, job, ui_open);
  return kExitUsage;
}
