// SPDX-License-Identifier: Apache-2.0
// What a plain YAML scalar means: its value under YAML 1.2's core schema, and whether YAML 1.1
// (Kubernetes' reader, go-yaml) would read it otherwise. The shapes are matched by hand: std::regex
// would read the patterns in the comments alike, but compiling them costs a short-lived process
// about a millisecond (an ADD reading its kubeconfig).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ibcni::yaml {

/// null for "", ~ and null; true/false; decimal, 0o and 0x integers (the text when out of range);
/// floats; null for .inf and .nan (JSON has neither); else the text.
[[nodiscard]] nlohmann::json resolvePlain(std::string_view s);

/// Why `s` is read differently by YAML 1.1 than by 1.2's core schema, or "" when both read it alike.
[[nodiscard]] std::string yaml11Reading(std::string_view s);

}  // namespace ibcni::yaml
