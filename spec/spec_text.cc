#include "spec/spec_text.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace convoy::spec_internal {

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default: {
      std::string text = node.Scalar();
      if (text.size() > 40) text = text.substr(0, 40) + "...";
      return (node.Tag() == "!" ? "the string '" : "'") + text + "'";
    }
  }
}

// A scalar written as text: quoted, or tagged !!str. Such a scalar is never a number.
bool IsTextScalar(const YAML::Node& node) {
  return node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str";
}

// Levenshtein distance, for "did you mean" hints on unknown fields.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "line:column: " for a mark, "" when the mark is unknown.
std::string Where(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ":";
}

// `text` for quoting in a one-line message: control bytes as \xNN, at most `max` bytes (cut at
// a UTF-8 character boundary).
std::string OneLine(const std::string& text, size_t max) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (out.size() >= max && (c & 0xC0) != 0x80) return out + "...";
    if (c < 0x20 || c == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    } else {
      out += text[i];
    }
  }
  return out;
}

// 1-based line and column of byte `offset` of `text`.
std::string LineColumn(const std::string& text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column) + ":";
}

// JSON is read by the YAML parser, which is more lenient than JSON (comments, trailing
// commas, unquoted words): a spec that looks like JSON must first be strict JSON.
Status CheckStrictJson(const std::string& text, const std::string& source) {
  try {
    const nlohmann::json parsed = nlohmann::json::parse(text);
    (void)parsed;
  } catch (const nlohmann::json::parse_error& e) {
    std::string why = e.what();
    const size_t at = why.find("syntax error");
    if (at != std::string::npos) why = why.substr(at);
    const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    return Status::InvalidArgument(source + ":" + LineColumn(text, offset) +
                                   " invalid JSON: " + OneLine(why, 200));
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(source + ": invalid JSON: " + OneLine(e.what(), 200));
  }
  return Status::Ok();
}

// Counts the documents of a YAML stream without building them. Not YAML::LoadAll: in
// yaml-cpp 0.7 it loops forever, allocating, on a ',' outside any flow collection
// (jbeder/yaml-cpp#1040): the parser reports an empty document without consuming the token,
// again and again. A document that starts where the previous one did is that token.
size_t CountDocuments(const std::string& text) {
  struct Starts : YAML::EventHandler {
    void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
    std::vector<YAML::Mark> marks;
  } starts;
  std::istringstream in(text);
  YAML::Parser parser(in);
  while (parser.HandleNextDocument(starts)) {
    const size_t n = starts.marks.size();
    if (n >= 2 && starts.marks[n - 1].pos == starts.marks[n - 2].pos) {
      const YAML::Mark& at = starts.marks[n - 1];
      const char c = at.pos >= 0 && static_cast<size_t>(at.pos) < text.size() ? text[at.pos] : ' ';
      throw YAML::ParserException(at, std::string("unexpected '") + c + "'");
    }
  }
  return starts.marks.size();
}

// The first child of `map` under the scalar key `key`, or an invalid (!IsDefined) node.
YAML::Node ChildOf(const YAML::Node& map, const std::string& key) {
  for (const auto& kv : map) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return kv.second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

}  // namespace convoy::spec_internal
