// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <expected>
#include <string>
#include <string_view>

namespace ibcni::yaml {

/// Why a text is not YAML we can read, and where (1-based; 0 when unknown).
struct YamlError {
  std::string message;  ///< libyaml's problem text ("did not find expected key", ...)
  std::size_t line = 0;
  std::size_t column = 0;

  /// "line L, column C: <message>"
  [[nodiscard]] std::string describe() const;
};

/// The first document of a YAML 1.1/1.2 text (a kubeconfig) as JSON text: mappings become objects
/// (their keys must be scalars: their text), sequences arrays, quoted scalars and scalars tagged
/// !!str strings, plain scalars resolved by YAML 1.2's core schema (null, ~ and the empty value;
/// true/false; decimal, 0x and 0o integers; floats, .inf, .nan: null in JSON), anything else a
/// string. Aliases are expanded (a text whose expansion passes 1,000,000 nodes is refused); a
/// text without a document is `null`. The text must be UTF-8 (libyaml's check).
[[nodiscard]] std::expected<std::string, YamlError> yamlToJson(std::string_view text);

}  // namespace ibcni::yaml
