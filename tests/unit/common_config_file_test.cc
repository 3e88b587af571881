// The YAML config machinery (common/config_file.h): keys derived from CLI11 options, flags
// winning over the file, unknown keys refused with their line.
#include "common/config_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace convoy {
namespace common_config_file_test {

struct Opts {
  std::string listen = "127.0.0.1:7070";
  std::string state_dir = "/var/lib/convoy";
  std::vector<std::string> data_paths = {"/usr/share/datasets"};
  int slots = 0;
  bool insecure = false;
  bool check = false;
  std::string name;
};

void Define(CLI::App& app, Opts& o) {
  AddConfigFileOptions(&app);
  app.add_flag("--check-config", o.check, "check")->configurable(false);
  app.add_option("--listen", o.listen, "HOST:PORT")->capture_default_str();
  app.add_option("--state-dir", o.state_dir, "state")->capture_default_str();
  app.add_option("--data-path", o.data_paths, "roots")->take_all()->capture_default_str();
  app.add_option("--slots", o.slots, "slots")->check(CLI::Range(1, 4096));
  app.add_flag("--insecure", o.insecure, "plain text");
  app.add_option("--name", o.name, "name")->required();
}

// Parses `args` with `yaml` as the --config file (none when empty). Returns "" or the error.
std::string Parse(const std::string& yaml, std::vector<std::string> args, Opts* o) {
  testing::TempDir dir;
  CLI::App app{"test"};
  Define(app, *o);
  std::vector<std::string> argv = {"prog"};
  if (!yaml.empty()) {
    std::ofstream(dir.str() + "/c.yaml") << yaml;
    argv.push_back("--config");
    argv.push_back(dir.str() + "/c.yaml");
  }
  for (auto& a : args) argv.push_back(a);
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  try {
    app.parse(static_cast<int>(cargv.size()), cargv.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigFile, KeysComeFromTheOptionDefinitions) {
  CLI::App app{"test"};
  Opts o;
  Define(app, o);
  std::vector<std::string> keys;
  for (const ConfigKey& k : ConfigKeys(app)) keys.push_back(k.key);
  // Not --help, --config, --print-config-keys, --check-config.
  EXPECT_EQ(keys, (std::vector<std::string>{"listen", "state_dir", "data_path", "slots", "insecure",
                                            "name"}));
  const std::string table = ConfigKeysMarkdown(app);
  EXPECT_NE(table.find("| `state_dir` | `--state-dir` | `/var/lib/convoy` | state |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| `data_path` | `--data-path` (list) |"), std::string::npos) << table;
  EXPECT_NE(table.find("| `insecure` | `--insecure` | `false` |"), std::string::npos) << table;
}

struct Case {
  const char* what;
  const char* yaml;
  std::vector<std::string> args;
  const char* error;  // substring of the error; "" when it must parse
};

TEST(ConfigFile, Table) {
  const Case cases[] = {
      {"keys with _ or -",
       "name: w1\nstate_dir: /s\nstate-dir2: x\n",
       {},
       "line 3: unknown key 'state-dir2'"},
      {"unknown key names its line",
       "name: w1\n\n# c\nlisten_address: x\n",
       {},
       "line 4: unknown key 'listen_address'"},
      {"not configurable",
       "name: w1\ncheck_config: true\n",
       {},
       "line 2: unknown key 'check_config'"},
      {"config itself is no key", "name: w1\nconfig: x.yaml\n", {}, "line 2: unknown key 'config'"},
      {"list for a single value",
       "name: w1\nlisten:\n  - a:1\n  - b:2\n",
       {},
       "line 3: 'listen' takes one value"},
      {"map value", "name: w1\nlisten: {a: 1}\n", {}, "line 2: 'listen' takes a value, not a map"},
      {"twice", "name: w1\nname: w2\n", {}, "line 2: key 'name' is given twice"},
      {"not a map", "- a\n- b\n", {}, "expected a map"},
      {"bad YAML", "name: [w1\n", {}, "line "},
      {"validators apply", "name: w1\nslots: 0\n", {}, "slots"},
      {"required from the file", "name: w1\n", {}, ""},
      {"required missing", "slots: 2\n", {}, "name"},
      {"comments only", "# nothing\n", {"--name", "w"}, ""},
      {"empty value keeps default", "name: w1\nstate_dir:\n", {}, ""},
  };
  for (const Case& c : cases) {
    Opts o;
    const std::string err = Parse(c.yaml, c.args, &o);
    if (std::string(c.error).empty()) {
      EXPECT_EQ(err, "") << c.what;
    } else {
      EXPECT_NE(err.find(c.error), std::string::npos) << c.what << ": got '" << err << "'";
    }
  }
}

TEST(ConfigFile, ValuesAndPrecedence) {
  Opts o;
  ASSERT_EQ(Parse("name: w1\nstate-dir: /srv/convoy\ninsecure: true\nslots: 4\n"
                  "data_path: [/a, /b]\n",
                  {}, &o),
            "");
  EXPECT_EQ(o.name, "w1");
  EXPECT_EQ(o.state_dir, "/srv/convoy");
  EXPECT_TRUE(o.insecure);
  EXPECT_EQ(o.slots, 4);
  EXPECT_EQ(o.data_paths, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(o.listen, "127.0.0.1:7070");  // default kept

  Opts p;  // the command line wins over the file
  ASSERT_EQ(Parse("name: w1\nslots: 4\ninsecure: false\ndata_path: /a\n",
                  {"--slots", "8", "--insecure", "--data-path", "/x", "/y"}, &p),
            "");
  EXPECT_EQ(p.slots, 8);
  EXPECT_TRUE(p.insecure);
  EXPECT_EQ(p.data_paths, (std::vector<std::string>{"/x", "/y"}));

  Opts q;
  ASSERT_EQ(Parse("name: w1\ndata_path: /only\n", {}, &q), "");
  EXPECT_EQ(q.data_paths, (std::vector<std::string>{"/only"}));
}

TEST(ConfigFile, MissingFileIsAnError) {
  CLI::App app{"test"};
  Opts o;
  Define(app, o);
  const char* argv[] = {"prog", "--name", "w", "--config", "/nonexistent/c.yaml"};
  EXPECT_THROW(app.parse(5, const_cast<char**>(argv)), CLI::FileError);
}

TEST(ConfigFile, CheckWritableDir) {
  testing::TempDir dir;
  EXPECT_TRUE(CheckWritableDir("--d", dir.str()).ok());
  EXPECT_TRUE(CheckWritableDir("--d", dir.str() + "/not/yet/made").ok());
  std::ofstream(dir.str() + "/file") << "x";
  const Status s = CheckWritableDir("--d", dir.str() + "/file/sub");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--d"), std::string::npos);
  EXPECT_FALSE(CheckWritableDir("--d", "").ok());
  // Tried for real: root's access(2) says yes to /proc, mkdir there does not.
  const Status proc = CheckWritableDir("--state-dir", "/proc/nope");
  EXPECT_FALSE(proc.ok());
  EXPECT_NE(proc.message().find("--state-dir /proc/nope"), std::string::npos) << proc.message();
  // Nothing is left behind by the probe.
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.str())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);  // the file made above
}

TEST(ConfigFile, EveryProblemOfTheFileIsReported) {
  CLI::App app{"test"};
  Opts o;
  Define(app, o);
  std::vector<std::string> errors;
  std::vector<int> lines;
  bool usable = false;
  const auto items = ParseYamlConfigItems(
      "name: w1\nlistn: x\nslots: 2\nlisten: [a, b]\nname: w2\nstate_dir: {a: 1}\n", app, "c.yaml",
      &errors, &lines, &usable);
  EXPECT_TRUE(usable);
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0], "c.yaml: line 2: unknown key 'listn' (--print-config-keys lists the keys)");
  EXPECT_NE(errors[1].find("c.yaml: line 4: 'listen' takes one value"), std::string::npos);
  EXPECT_EQ(errors[2], "c.yaml: line 5: key 'name' is given twice");
  EXPECT_NE(errors[3].find("c.yaml: line 6: 'state_dir' takes a value, not a map"),
            std::string::npos);
  ASSERT_EQ(items.size(), 2u);  // name and slots parse
  EXPECT_EQ(lines, (std::vector<int>{1, 3}));
  // ParseYamlConfig: all of them in one error, a line each.
  auto all = ParseYamlConfig("listn: x\nslot: 1\n", app, "c.yaml");
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().message(),
            "c.yaml: line 1: unknown key 'listn' (--print-config-keys lists the keys)\n"
            "c.yaml: line 2: unknown key 'slot' (--print-config-keys lists the keys)");
  errors.clear();
  ParseYamlConfigItems("name: [w1\n", app, "c.yaml", &errors, nullptr, &usable);
  EXPECT_FALSE(usable);
  EXPECT_EQ(errors.size(), 1u);
}

TEST(ConfigFile, WantsCheckConfig) {
  const char* with[] = {"prog", "--config", "c.yaml", "--check-config"};
  EXPECT_TRUE(WantsCheckConfig(4, const_cast<char**>(with)));
  const char* without[] = {"prog", "--config", "c.yaml", "--", "--check-config"};
  EXPECT_FALSE(WantsCheckConfig(5, const_cast<char**>(without)));
}

// The collecting parse of --check-config: bad keys (unknown, or a value the option refuses)
// are reported with their lines and left out; the rest is applied.
TEST(ConfigFile, CheckModeCollectsAndLeavesBadKeysOut) {
  testing::TempDir dir;
  std::ofstream(dir.str() + "/c.yaml") << "name: w1\nslots: 0\nlistn: x\nlisten: a:1\n"
                                          "insecure: maybe\n";
  ConfigCheck check;
  check.enabled = true;
  check.try_item = [](const CLI::ConfigItem& item) {
    CLI::App probe{"probe"};
    Opts scratch;
    Define(probe, scratch);
    return TryConfigItem(&probe, item);
  };
  CLI::App app{"test"};
  Opts o;
  AddConfigFileOptions(&app, &check);
  app.add_option("--listen", o.listen, "HOST:PORT");
  app.add_option("--slots", o.slots, "slots")->check(CLI::Range(1, 4096));
  app.add_flag("--insecure", o.insecure, "plain text");
  app.add_option("--name", o.name, "name")->required();
  const std::string path = dir.str() + "/c.yaml";
  const char* argv[] = {"prog", "--config", path.c_str()};
  ASSERT_NO_THROW(app.parse(3, const_cast<char**>(argv)));
  ASSERT_EQ(check.errors.size(), 3u) << ::testing::PrintToString(check.errors);
  EXPECT_EQ(check.errors[0].rfind(path + ": line 3: unknown key 'listn'", 0), 0u);
  EXPECT_EQ(check.errors[1].rfind(path + ": line 2: ", 0), 0u) << check.errors[1];
  EXPECT_NE(check.errors[1].find("slots"), std::string::npos) << check.errors[1];
  EXPECT_EQ(check.errors[2].rfind(path + ": line 5: ", 0), 0u) << check.errors[2];
  EXPECT_EQ(o.name, "w1");
  EXPECT_EQ(o.listen, "a:1");
  EXPECT_EQ(o.slots, 0);  // left out: the default stays
  check.Add(check.errors[0]);
  EXPECT_EQ(check.errors.size(), 3u) << "Add keeps one of each";
}

}  // namespace common_config_file_test
}  // namespace convoy
