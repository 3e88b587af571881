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
// errors ("coordinator.yaml: line 3: unknown key 'listn'").
StatusOr<std::vector<CLI::ConfigItem>> ParseYamlConfig(const std::string& text, const CLI::App& app,
                                                       const std::string& source);

// Adds to `app`: --config FILE (YAML, read through ParseYamlConfig during app.parse) and
// --print-config-keys (prints ConfigKeysMarkdown to stdout and exits 0, before required
// options are checked). Call once, before app.parse; `app` must outlive the parse.
void AddConfigFileOptions(CLI::App* app);

// For --check-config: OK when `dir` is a directory this process can create files in, or does
// not exist yet and its nearest existing ancestor is one (so that it can be created). Creates
// nothing. The error names `flag`.
Status CheckWritableDir(const std::string& flag, const std::string& dir);

// Prints what --check-config found (each note on stdout, then "configuration OK", or the
// error on stderr) and returns the daemon's exit code: 0, or 1 for an invalid configuration.
int ReportConfigCheck(const Status& result, const std::vector<std::string>& notes);

}  // namespace convoy
