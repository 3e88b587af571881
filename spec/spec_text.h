// The YAML text helpers of the spec reader (job_spec.cc) and its --set overrides
// (spec_overrides.h): how a node is named in a message, where it was written, strict JSON, and
// counting documents safely. Internal to convoy_spec_file.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>

#include "common/status.h"

namespace convoy::spec_internal {

// How `node` is named in a message: "a list", "a mapping", "nothing (null)", or its text
// quoted (at most 40 bytes).
std::string Describe(const YAML::Node& node);

// A scalar written as text: quoted, or tagged !!str. Such a scalar is never a number.
bool IsTextScalar(const YAML::Node& node);

// Levenshtein distance, for "did you mean" hints on unknown fields.
size_t EditDistance(const std::string& a, const std::string& b);

// "line:column: " for a mark, "" when the mark is unknown.
std::string Where(const YAML::Mark& mark);

// `text` for quoting in a one-line message: control bytes as \xNN, at most `max` bytes (cut at
// a UTF-8 character boundary).
std::string OneLine(const std::string& text, size_t max = 100);

// 1-based line and column of byte `offset` of `text`.
std::string LineColumn(const std::string& text, size_t offset);

// JSON is read by the YAML parser, which is more lenient than JSON (comments, trailing
// commas, unquoted words): a spec that looks like JSON must first be strict JSON.
Status CheckStrictJson(const std::string& text, const std::string& source);

// Counts the documents of a YAML stream without building them (see spec_text.cc: not
// YAML::LoadAll, which loops forever on some input).
size_t CountDocuments(const std::string& text);

// The first child of `map` under the scalar key `key`, or an invalid (!IsDefined) node.
YAML::Node ChildOf(const YAML::Node& map, const std::string& key);

}  // namespace convoy::spec_internal
