#include "common/config_file.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include <algorithm>
#include <cstdlib>
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
  explicit YamlConfig(const CLI::App* app) : app_(app) {}

  std::string to_config(const CLI::App*, bool, bool, std::string) const override { return ""; }

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    std::string text(std::istreambuf_iterator<char>(in), {});
    std::string source = "--config";
    if (const CLI::Option* c = app_->get_config_ptr(); c != nullptr && c->count() > 0) {
      source = c->as<std::string>();
    }
    auto items = ParseYamlConfig(text, *app_, source);
    if (!items.ok()) throw CLI::ConfigError(items.status().message(), CLI::ExitCodes::ConfigError);
    // Precedence: command line, then environment, then file. CLI11 reads the file before the
    // environment, so a key whose variable is set is left to the environment.
    std::vector<CLI::ConfigItem> kept;
    for (CLI::ConfigItem& item : *items) {
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

StatusOr<std::vector<CLI::ConfigItem>> ParseYamlConfig(const std::string& text, const CLI::App& app,
                                                       const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source + ": line " + std::to_string(e.mark.line + 1) + ": " +
                                   e.msg);
  }
  std::vector<CLI::ConfigItem> items;
  if (root.IsNull()) return items;  // an empty file (or only comments)
  if (!root.IsMap()) {
    return Status::InvalidArgument(source + ": " + Line(root) +
                                   ": expected a map of keys (key: value)");
  }
  std::set<std::string> seen;
  for (const auto& kv : root) {
    const YAML::Node& k = kv.first;
    const YAML::Node& v = kv.second;
    if (!k.IsScalar()) {
      return Status::InvalidArgument(source + ": " + Line(k) + ": a key must be a plain name");
    }
    std::string key = k.Scalar();
    std::replace(key.begin(), key.end(), '-', '_');
    const CLI::Option* opt = nullptr;
    for (const CLI::Option* o : app.get_options()) {
      if (KeyOf(app, *o) == key) opt = o;
    }
    if (opt == nullptr) {
      return Status::InvalidArgument(source + ": " + Line(k) + ": unknown key '" + k.Scalar() +
                                     "' (--print-config-keys lists the keys)");
    }
    if (!seen.insert(key).second) {
      return Status::InvalidArgument(source + ": " + Line(k) + ": key '" + k.Scalar() +
                                     "' is given twice");
    }
    CLI::ConfigItem item;
    item.name = opt->get_lnames().front();
    if (v.IsNull()) continue;  // "key:" with nothing: the default stays
    if (v.IsScalar()) {
      item.inputs.push_back(v.Scalar());
    } else if (v.IsSequence()) {
      const bool repeatable = opt->get_expected_min() != 0 && opt->get_items_expected_max() > 1;
      if (!repeatable) {
        return Status::InvalidArgument(source + ": " + Line(v) + ": '" + k.Scalar() +
                                       "' takes one value, not a list");
      }
      for (const auto& e : v) {
        if (!e.IsScalar()) {
          return Status::InvalidArgument(source + ": " + Line(e) + ": '" + k.Scalar() +
                                         "' takes a list of plain values");
        }
        item.inputs.push_back(e.Scalar());
      }
      if (item.inputs.empty()) continue;
    } else {
      return Status::InvalidArgument(source + ": " + Line(v) + ": '" + k.Scalar() +
                                     "' takes a value, not a map");
    }
    items.push_back(std::move(item));
  }
  return items;
}

void AddConfigFileOptions(CLI::App* app) {
  app->config_formatter(std::make_shared<YamlConfig>(app));
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
  fs::path p = fs::absolute(dir).lexically_normal();
  std::error_code ec;
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
  if (access(existing.c_str(), W_OK | X_OK) != 0) {
    return Status::InvalidArgument(flag + " " + dir + ": " + existing.string() +
                                   " is not writable by this user" +
                                   (exists ? "" : " (so " + dir + " cannot be created)"));
  }
  return Status::Ok();
}

int ReportConfigCheck(const Status& result, const std::vector<std::string>& notes) {
  for (const std::string& n : notes) std::cout << "  " << n << "\n";
  if (!result.ok()) {
    std::cerr << "configuration error: " << result.message() << std::endl;
    return 1;
  }
  std::cout << "configuration OK" << std::endl;
  return 0;
}

}  // namespace convoy
