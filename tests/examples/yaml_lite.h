// SPDX-License-Identifier: Apache-2.0
// A reader for the subset of YAML that the repository's Kubernetes manifests use, into JSON values,
// so that the example test needs no YAML library. Whatever it does not understand is an error
// naming the line, never a guess: anchors, aliases, tags, directives, complex keys, multi-line
// plain or quoted scalars, flow collections spanning lines, tabs in indentation, and plain scalars
// that YAML 1.1 (Kubernetes' go-yaml) and YAML 1.2 read differently (yes/no/on/off, 0755, 0x10).
//
// Understood: block mappings and sequences (including "key:" followed by "- item" at the key's
// indentation), plain, 'single-' and "double-quoted" scalars on one line, literal (|) and folded
// (>) block scalars with chomping and indentation indicators, one-line flow collections ({a: 1},
// ["x", y]), comments, and documents separated by "---" (or ended by "...").
#pragma once

#include <expected>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ibcni::testing::yamlite {

/// One YAML document of a stream.
struct Document {
  int firstLine = 1;  ///< line number of the document's first line in the whole text (from 1)
  std::string text;   ///< its lines, without the separators
};

/// Splits a YAML stream at "---" lines (and "..." end markers). Documents holding nothing but
/// blank lines and comments are dropped. `firstLine` is the number of the stream's first line.
/// @return an error naming the line for directives ("%YAML") and content after "---".
[[nodiscard]] std::expected<std::vector<Document>, std::string> splitDocuments(std::string_view text,
                                                                               int firstLine = 1);

/// Parses one document. Plain scalars resolve to null, booleans, integers and floats as YAML's
/// core schema does; everything else is a string. An empty document is null.
/// @return "line N: what" for anything outside the subset or malformed.
[[nodiscard]] std::expected<nlohmann::json, std::string> parse(const Document& doc);

/// parse() of a stream holding one document (tests).
[[nodiscard]] std::expected<nlohmann::json, std::string> parseOne(std::string_view text);

}  // namespace ibcni::testing::yamlite
