// YAML configuration files for the daemons, derived from their CLI11 option definitions, so
// that an option added to a binary is a config key without further work:
//   - every long option of the App is a key: the flag name without "--" ('-' and '_' alike);
//   - a repeatable option takes a YAML list (or one scalar), a flag true/false;
//   - options marked configurable(false) (--check-config, ...) and --help, --version,
//     --config are not keys;
//   - the command line wins over the environment (an option's envname), which wins over the
//     file; an empty value leaves the default;
//   - an unknown key, a nested map or a list for a single-valued option is refused with the
//     file's line.
// Everything here runs on the thread that parses the command line.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace convoy {

// One config key as documented in deploy/README.md.
struct ConfigKey {
  std::string key;            // "state_dir"
  std::string flag;           // "--state-dir"
  std::string default_value;  // as --help shows it; empty when none
  std::string description;
  bool repeatable = false;
  bool is_flag = false;
};

// The keys of `app` in definition order (top-level options only: subcommands' options are
// not configurable).
std::vector<ConfigKey> ConfigKeys(const CLI::App& app);

// The keys as a Markdown table (key, flag, default, description), one row per key.
std::string ConfigKeysMarkdown(const CLI::App& app);

// Parses `text` (a YAML map) into CLI11 config items for `app`. `source` names the file in
// errors ("coordinator.yaml: line 3: unknown key 'listn'"). Every problem of the file is
// reported, one per line of the message, not only the first.
StatusOr<std::vector<CLI::ConfigItem>> ParseYamlConfig(const std::string& text, const CLI::App& app,
                                                       const std::string& source);

// Like ParseYamlConfig, but a problem with one key does not hide the others: the keys that
// parse are returned (with their lines in `lines`, when given), each problem is appended to
// `errors` ("FILE: line N: ..."). Text that is not a YAML map is one error and no items;
// `usable` (when given) is then false.
std::vector<CLI::ConfigItem> ParseYamlConfigItems(const std::string& text, const CLI::App& app,
                                                  const std::string& source,
                                                  std::vector<std::string>* errors,
                                                  std::vector<int>* lines = nullptr,
                                                  bool* usable = nullptr);

// What --check-config finds before the daemon's own checks: every problem of the command
// line and the file, one line each, each naming its flag or the file's line.
struct ConfigCheck {
  // True when "--check-config" is among the arguments (WantsCheckConfig): the parse then
  // collects its problems here instead of failing at the first.
  bool enabled = false;
  std::vector<std::string> errors;
  // The command line or the file could not be read as a whole (a missing file, text that is
  // not YAML, an option CLI11 refused): the flags are incomplete and not worth checking
  // further.
  bool incomplete = false;
  // The --config file was not a YAML map (set while parsing).
  bool file_unusable = false;
  // Tries one key of the file alone (the daemon's options defined afresh, bound to scratch
  // flags; TryConfigItem): its error, or "". Keys that fail are reported and left out.
  std::function<std::string(const CLI::ConfigItem&)> try_item;

  // Appends `error` unless it is there already.
  void Add(const std::string& error);
};

// Runs app.parse(argc, argv) for a daemon. OK: parsed (`*recorded` false), or, with `check`
// enabled, the parse failed and its error was recorded in `check` (incomplete set,
// `*recorded` true: the flags are not worth checking further); `*exit_code` is 0 either way.
// Otherwise CLI11 printed the help, the version or the error, and `*exit_code` is what main
// returns: 0 for help and version, 2 for any usage error (README "Exit codes"), whatever
// CLI11's own code; the Status is INVALID_ARGUMENT with no message.
Status ParseDaemonFlags(CLI::App& app, int argc, char** argv, ConfigCheck* check, int* exit_code,
                        bool* recorded);

// After a successful ParseDaemonFlags: runs the daemon's own checks of its flags
// (`validate`: every problem, each naming its flag) and returns what main does with them.
// With `check` enabled, the problems are appended to it and the result is OK (not run at all,
// incomplete set, when the file was unusable: its settings are missing). Otherwise the first
// problem, with `*exit_code` 2; OK with 0 when there is none.
Status FinishDaemonFlags(ConfigCheck* check, const std::function<std::vector<Status>()>& validate,
                         int* exit_code);

// Whether "--check-config" is among the command-line arguments (it is no config key).
bool WantsCheckConfig(int argc, char** argv);

// Parses `item` (a key of the file) alone into `app` as "--name=value" per value, without
// the environment: CLI11's error for its value, or "" (a missing required option is no
// error of this item). `app` must be freshly defined and is used up.
std::string TryConfigItem(CLI::App* app, const CLI::ConfigItem& item);

// Adds to `app`: --config FILE (YAML, read through ParseYamlConfig during app.parse) and
// --print-config-keys (prints ConfigKeysMarkdown to stdout and exits 0, before required
// options are checked). Call once, before app.parse; `app` must outlive the parse. With
// `check` (enabled), the file's problems are appended to check->errors and its bad keys left
// out instead of failing the parse; `check` must outlive the parse.
void AddConfigFileOptions(CLI::App* app, ConfigCheck* check = nullptr);

// For --check-config: OK when `dir` is a directory this process can create files in, or does
// not exist yet and its nearest existing ancestor is one (so that it can be created). Tried
// for real: an empty directory is made there and removed at once, so that a read-only or
// pseudo file system (/proc) is caught even for root. Leaves nothing behind. The error names
// `flag`.
Status CheckWritableDir(const std::string& flag, const std::string& dir);

// Prints what --check-config found: each note on stdout, then "configuration OK", or one
// "configuration error: <reason>" line per error on stderr. Returns the daemon's exit code:
// 0, or 1 for an invalid configuration.
int ReportConfigCheck(const std::vector<std::string>& errors,
                      const std::vector<std::string>& notes);

}  // namespace convoy
