#include "common/config_file.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <memory>
#include <set>

namespace convoy {
namespace {

// The long name without dashes, or empty for options that are not config keys.
std::string KeyOf(const CLI::App& app, const CLI::Option& opt) {
  if (&opt == app.get_help_ptr() || &opt == app.get_help_all_ptr() ||
      &opt == app.get_version_ptr() || &opt == app.get_config_ptr() || !opt.get_configurable() ||
      opt.get_lnames().empty()) {
    return "";
  }
  std::string key = opt.get_lnames().front();
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

std::string Line(const YAML::Node& node) { return "line " + std::to_string(node.Mark().line + 1); }

// Reads the YAML file named by --config during CLI11's parse.
class YamlConfig : public CLI::Config {
 public:
  YamlConfig(const CLI::App* app, ConfigCheck* check) : app_(app), check_(check) {}

  std::string to_config(const CLI::App*, bool, bool, std::string) const override { return ""; }

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    std::string text(std::istreambuf_iterator<char>(in), {});
    std::string source = "--config";
    if (const CLI::Option* c = app_->get_config_ptr(); c != nullptr && c->count() > 0) {
      source = c->as<std::string>();
    }
    std::vector<CLI::ConfigItem> items;
    if (check_ == nullptr) {
      auto parsed = ParseYamlConfig(text, *app_, source);
      if (!parsed.ok()) {
        throw CLI::ConfigError(parsed.status().message(), CLI::ExitCodes::ConfigError);
      }
      items = std::move(*parsed);
    } else {
      // --check-config: every bad key is reported and left out, so that the others (and the
      // daemon's own checks) still get their say.
      std::vector<std::string> errors;
      std::vector<int> lines;
      bool usable = true;
      std::vector<CLI::ConfigItem> all =
          ParseYamlConfigItems(text, *app_, source, &errors, &lines, &usable);
      for (const std::string& e : errors) check_->Add(e);
      if (!usable) check_->file_unusable = true;
      for (size_t i = 0; i < all.size(); ++i) {
        const std::string error = check_->try_item ? check_->try_item(all[i]) : "";
        if (error.empty()) {
          items.push_back(std::move(all[i]));
        } else {
          check_->Add(source + ": line " + std::to_string(lines[i]) + ": " + error);
        }
      }
    }
    // Precedence: command line, then environment, then file. CLI11 reads the file before the
    // environment, so a key whose variable is set is left to the environment.
    std::vector<CLI::ConfigItem> kept;
    for (CLI::ConfigItem& item : items) {
      const CLI::Option* opt = app_->get_option_no_throw("--" + item.name);
      if (opt != nullptr && !opt->get_envname().empty() &&
          std::getenv(opt->get_envname().c_str()) != nullptr) {
        continue;
      }
      kept.push_back(std::move(item));
    }
    return kept;
  }

 private:
  const CLI::App* app_;
  ConfigCheck* check_;
};

std::string Escape(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

}  // namespace

std::vector<ConfigKey> ConfigKeys(const CLI::App& app) {
  std::vector<ConfigKey> keys;
  for (const CLI::Option* opt : app.get_options()) {
    const std::string key = KeyOf(app, *opt);
    if (key.empty()) continue;
    ConfigKey k;
    k.key = key;
    k.flag = "--" + opt->get_lnames().front();
    k.default_value = opt->get_default_str();
    k.description = opt->get_description();
    k.is_flag = opt->get_expected_min() == 0;
    k.repeatable = !k.is_flag && opt->get_items_expected_max() > 1;
    if (!opt->get_envname().empty()) k.description += " (env " + opt->get_envname() + ")";
    keys.push_back(std::move(k));
  }
  return keys;
}

std::string ConfigKeysMarkdown(const CLI::App& app) {
  std::string out = "| key | flag | default | description |\n| --- | --- | --- | --- |\n";
  for (const ConfigKey& k : ConfigKeys(app)) {
    std::string def = k.is_flag ? "false" : k.default_value;
    if (k.repeatable) def = def.empty() ? "[]" : def;
    out += "| `" + k.key + "` | `" + k.flag + "`" + (k.repeatable ? " (list)" : "") + " | " +
           (def.empty() ? "" : "`" + Escape(def) + "`") + " | " + Escape(k.description) + " |\n";
  }
  return out;
}

std::vector<CLI::ConfigItem> ParseYamlConfigItems(const std::string& text, const CLI::App& app,
                                                  const std::string& source,
                                                  std::vector<std::string>* errors,
                                                  std::vector<int>* lines, bool* usable) {
  std::vector<CLI::ConfigItem> items;
  if (usable != nullptr) *usable = true;
  auto fail = [&](const YAML::Node& at, const std::string& what) {
    errors->push_back(source + ": " + Line(at) + ": " + what);
  };
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    errors->push_back(source + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
    if (usable != nullptr) *usable = false;
    return items;
  }
  if (root.IsNull()) return items;  // an empty file (or only comments)
  if (!root.IsMap()) {
    fail(root, "expected a map of keys (key: value)");
    if (usable != nullptr) *usable = false;
    return items;
  }
  std::set<std::string> seen;
  for (const auto& kv : root) {
    const YAML::Node& k = kv.first;
    const YAML::Node& v = kv.second;
    if (!k.IsScalar()) {
      fail(k, "a key must be a plain name");
      continue;
    }
    std::string key = k.Scalar();
    std::replace(key.begin(), key.end(), '-', '_');
    const CLI::Option* opt = nullptr;
    for (const CLI::Option* o : app.get_options()) {
      if (KeyOf(app, *o) == key) opt = o;
    }
    if (opt == nullptr) {
      fail(k, "unknown key '" + k.Scalar() + "' (--print-config-keys lists the keys)");
      continue;
    }
    if (!seen.insert(key).second) {
      fail(k, "key '" + k.Scalar() + "' is given twice");
      continue;
    }
    CLI::ConfigItem item;
    item.name = opt->get_lnames().front();
    if (v.IsNull()) continue;  // "key:" with nothing: the default stays
    if (v.IsScalar()) {
      item.inputs.push_back(v.Scalar());
    } else if (v.IsSequence()) {
      const bool repeatable = opt->get_expected_min() != 0 && opt->get_items_expected_max() > 1;
      if (!repeatable) {
        fail(v, "'" + k.Scalar() + "' takes one value, not a list");
        continue;
      }
      bool plain = true;
      for (const auto& e : v) {
        if (!e.IsScalar()) {
          fail(e, "'" + k.Scalar() + "' takes a list of plain values");
          plain = false;
          break;
        }
        item.inputs.push_back(e.Scalar());
      }
      if (!plain || item.inputs.empty()) continue;
    } else {
      fail(v, "'" + k.Scalar() + "' takes a value, not a map");
      continue;
    }
    items.push_back(std::move(item));
    if (lines != nullptr) lines->push_back(k.Mark().line + 1);
  }
  return items;
}

StatusOr<std::vector<CLI::ConfigItem>> ParseYamlConfig(const std::string& text, const CLI::App& app,
                                                       const std::string& source) {
  std::vector<std::string> errors;
  std::vector<CLI::ConfigItem> items = ParseYamlConfigItems(text, app, source, &errors);
  if (errors.empty()) return items;
  std::string all;
  for (const std::string& e : errors) all += (all.empty() ? "" : "\n") + e;
  return Status::InvalidArgument(all);
}

void ConfigCheck::Add(const std::string& error) {
  if (std::find(errors.begin(), errors.end(), error) == errors.end()) errors.push_back(error);
}

Status ParseDaemonFlags(CLI::App& app, int argc, char** argv, ConfigCheck* check, int* exit_code,
                        bool* recorded) {
  const bool checking = check != nullptr && check->enabled;
  *recorded = false;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0 || !checking) {
      *exit_code = app.exit(e) == 0 ? 0 : 2;
      return Status::InvalidArgument("");
    }
    // --check-config: a configuration error like the others. A required option missing
    // because the file was unreadable is no news.
    if (!(check->file_unusable && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr)) {
      check->Add(e.what());
    }
    check->incomplete = true;
    *recorded = true;
  }
  *exit_code = 0;
  return Status::Ok();
}

Status FinishDaemonFlags(ConfigCheck* check, const std::function<std::vector<Status>()>& validate,
                         int* exit_code) {
  const bool checking = check != nullptr && check->enabled;
  *exit_code = 0;
  if (checking && check->file_unusable) {
    check->incomplete = true;  // the file's settings are missing: later checks would mislead
    return Status::Ok();
  }
  const std::vector<Status> problems = validate();
  if (checking) {
    for (const Status& s : problems) check->Add(s.message());
    return Status::Ok();
  }
  if (problems.empty()) return Status::Ok();
  *exit_code = 2;
  return problems.front();
}

bool WantsCheckConfig(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a == "--check-config" || a.rfind("--check-config=", 0) == 0) return true;
  }
  return false;
}

std::string TryConfigItem(CLI::App* app, const CLI::ConfigItem& item) {
  for (CLI::Option* opt : app->get_options()) opt->envname("");
  std::vector<std::string> args = {"check"};
  for (const std::string& in : item.inputs) args.push_back("--" + item.name + "=" + in);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    app->parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::RequiredError&) {
    return "";  // checked after the values: this item's value was fine
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

void AddConfigFileOptions(CLI::App* app, ConfigCheck* check) {
  app->config_formatter(std::make_shared<YamlConfig>(app, check));
  app->set_config("--config", "", "YAML file of options (keys: --print-config-keys); flags win");
  app->add_flag_callback(
         "--print-config-keys",
         [app] {
           std::cout << ConfigKeysMarkdown(*app);
           throw CLI::Success();
         },
         "print the config file's keys as a Markdown table and exit")
      ->configurable(false);
}

Status CheckWritableDir(const std::string& flag, const std::string& dir) {
  namespace fs = std::filesystem;
  if (dir.empty()) return Status::InvalidArgument(flag + " must not be empty");
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  const bool exists = fs::exists(p, ec);
  fs::path existing = p;
  while (!fs::exists(existing, ec) && existing.has_parent_path() &&
         existing != existing.parent_path()) {
    existing = existing.parent_path();
  }
  if (!fs::is_directory(existing, ec)) {
    return Status::InvalidArgument(flag + " " + dir + ": " + existing.string() +
                                   " is not a directory");
  }
  // Tried for real: access(2) says yes to root everywhere, even on /proc or a read-only mount.
  std::string probe = (existing / ".convoy-check-XXXXXX").string();
  if (mkdtemp(probe.data()) == nullptr) {
    const int err = errno;
    return Status::InvalidArgument(
        flag + " " + dir + ": " +
        (exists ? "cannot create files in it" : "cannot be created in " + existing.string()) +
        ": " + std::strerror(err));
  }
  rmdir(probe.c_str());
  return Status::Ok();
}

int ReportConfigCheck(const std::vector<std::string>& errors,
                      const std::vector<std::string>& notes) {
  for (const std::string& n : notes) std::cout << "  " << n << "\n";
  std::cout << std::flush;
  if (!errors.empty()) {
    for (const std::string& e : errors) {
      // One line per problem, a multi-line message included.
      size_t start = 0;
      while (start <= e.size()) {
        size_t end = e.find('\n', start);
        if (end == std::string::npos) end = e.size();
        if (end > start)
          std::cerr << "configuration error: " << e.substr(start, end - start) << "\n";
        start = end + 1;
      }
    }
    std::cerr << std::flush;
    return 1;
  }
  std::cout << "configuration OK" << std::endl;
  return 0;
}

}  // namespace convoy
