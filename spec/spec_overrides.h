// `--set FIELD=VALUE` (ParseJobSpec's and OverrideJobSpec's `sets`): each applied to the spec's
// tree before it is read, and each error it leads to named by its --set. Internal to
// convoy_spec_file.
#pragma once

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <vector>

namespace convoy::spec_internal {

// A field set by `--set`: its path as messages name it, and how to name the --set.
struct Override {
  std::string field;  // "trainer.max_steps", "env.FOO"
  std::string label;  // "--set trainer.max_steps=300"
};

// Applies each "PATH=VALUE" of `sets` to the mapping `root`, in order (a later one wins), and
// records each in `applied`. Returns one message line per --set that cannot be applied.
std::vector<std::string> ApplyOverrides(YAML::Node root, const std::vector<std::string>& sets,
                                        std::vector<Override>* applied);

// The --set that wrote `field` or a mapping or list above it (the last one), or null.
const Override* OverrideOf(const std::vector<Override>& applied, const std::string& field);

// Whether `field` or a field above it ("trainer" for "trainer.lr", "command" for
// "command[1]") is in `fields`.
bool UnderAny(const std::set<std::string>& fields, const std::string& field);

}  // namespace convoy::spec_internal
