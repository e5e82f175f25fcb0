// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

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

/// One document of a YAML stream, as yamlToJson makes it.
struct YamlDocument {
  std::size_t line = 0;  ///< the line (from 1) its content starts on
  std::string json;
};

/// How strictly a stream is read. kAsKubernetesDoes refuses what Kubernetes' reader (go-yaml, YAML
/// 1.1) would read otherwise than YAML 1.2 does: plain yes/no/on/off/y/n, 0755, 1_000, 1:20 (quote
/// them), and a key given twice in a mapping.
enum class YamlReading { kPlain, kAsKubernetesDoes };

/// Every document of a YAML stream ("---" separated, as Kubernetes manifests are), in order, read
/// as yamlToJson reads one; documents holding nothing (comments only, an empty "---") are left out.
[[nodiscard]] std::expected<std::vector<YamlDocument>, YamlError> yamlDocumentsToJson(
    std::string_view text, YamlReading reading = YamlReading::kPlain);

}  // namespace ibcni::yaml
