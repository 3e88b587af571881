#include "spec/spec_overrides.h"

#include <algorithm>

#include "spec/job_spec_validation.h"
#include "spec/spec_text.h"

namespace convoy::spec_internal {

// Applies each "PATH=VALUE" of `sets` to the mapping `root`, in order (a later one wins), and
// records each in `applied`. Returns one message line per --set that cannot be applied.
std::vector<std::string> ApplyOverrides(YAML::Node root, const std::vector<std::string>& sets,
                                        std::vector<Override>* applied) {
  std::vector<std::string> errors;
  for (const std::string& set : sets) {
    const std::string label = "--set " + OneLine(set);
    const size_t eq = set.find('=');
    if (eq == std::string::npos || eq == 0) {
      errors.push_back(label + ": expected FIELD=VALUE, as trainer.max_steps=300");
      continue;
    }
    const std::string path = set.substr(0, eq);
    // Names of env variables and labels may hold dots: after env. or node_selector. the rest
    // of the path is one key.
    std::vector<std::string> keys;
    for (size_t start = 0;;) {
      const size_t dot = path.find('.', start);
      if (keys.size() == 1 && (keys[0] == "env" || keys[0] == "node_selector")) {
        keys.push_back(path.substr(start));
        break;
      }
      keys.push_back(path.substr(start, dot == std::string::npos ? dot : dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    if (std::any_of(keys.begin(), keys.end(), [](const std::string& k) { return k.empty(); })) {
      errors.push_back(label + ": '" + OneLine(path) +
                       "' is not a field (FIELD or FIELD.FIELD, as trainer.max_steps)");
      continue;
    }
    const std::string field = keys.size() == 2 && (keys[0] == "env" || keys[0] == "node_selector")
                                  ? MapKeyFieldName(keys[0], keys[1])
                                  : OneLine(path, 128);
    YAML::Node value;
    try {
      const std::string text = set.substr(eq + 1);
      const size_t docs = CountDocuments(text);
      if (docs > 1) {
        errors.push_back(label + ": " + field + ": expected one value, got " +
                         std::to_string(docs) + " YAML documents");
        continue;
      }
      value = docs == 0 ? YAML::Node() : YAML::Load(text);
    } catch (const YAML::Exception& e) {
      errors.push_back(label + ": " + field + ": invalid YAML: " + e.msg);
      continue;
    }
    // Walk to the mapping that holds the last key, making mappings where there are none.
    // (Assigning one YAML::Node to another replaces the node in the tree; reset() moves the
    // handle.)
    YAML::Node map;
    map.reset(root);
    std::string walked;
    bool ok = true;
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
      walked += (i == 0 ? "" : ".") + keys[i];
      YAML::Node child = ChildOf(map, keys[i]);
      if (!child.IsDefined()) {
        map.force_insert(keys[i], YAML::Node(YAML::NodeType::Map));
        child.reset(ChildOf(map, keys[i]));
      } else if (child.IsNull()) {
        child = YAML::Node(YAML::NodeType::Map);  // `trainer:` alone: now a mapping
      } else if (!child.IsMap()) {
        errors.push_back(label + ": " + walked + ": expected a mapping, got " + Describe(child));
        ok = false;
        break;
      }
      map.reset(child);
    }
    if (!ok) continue;
    YAML::Node target = ChildOf(map, keys.back());
    if (target.IsDefined()) {
      target = value;  // replaces the node in the tree
    } else {
      map.force_insert(keys.back(), value);
    }
    applied->push_back({field, label});
  }
  return errors;
}

// The --set that wrote `field` or a mapping or list above it (the last one), or null.
const Override* OverrideOf(const std::vector<Override>& applied, const std::string& field) {
  for (auto it = applied.rbegin(); it != applied.rend(); ++it) {
    const std::string& f = it->field;
    if (field == f || (field.size() > f.size() && field.compare(0, f.size(), f) == 0 &&
                       (field[f.size()] == '.' || field[f.size()] == '['))) {
      return &*it;
    }
  }
  return nullptr;
}

// Whether `field` or a field above it ("trainer" for "trainer.lr", "command" for
// "command[1]") is in `fields`.
bool UnderAny(const std::set<std::string>& fields, const std::string& field) {
  for (size_t i = 1; i <= field.size(); ++i) {
    if ((i == field.size() || field[i] == '.' || field[i] == '[') &&
        fields.count(field.substr(0, i)) != 0) {
      return true;
    }
  }
  return false;
}

}  // namespace convoy::spec_internal
