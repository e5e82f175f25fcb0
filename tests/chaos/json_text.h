// SPDX-License-Identifier: Apache-2.0
// Reading what ibcni-ipam, etcd and kube-apiserver answer without trusting its shape: a field that
// is absent, null or of another type reads as the fallback (nlohmann's value() throws on null).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ibcni::chaos {

[[nodiscard]] inline std::string jsonText(const nlohmann::json& j, const char* key, const std::string& fallback = {}) {
  if (!j.is_object()) {
    return fallback;
  }
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

[[nodiscard]] inline long jsonInt(const nlohmann::json& j, const char* key, long fallback = 0) {
  if (!j.is_object()) {
    return fallback;
  }
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<long>() : fallback;
}

/// j[key] when it is an array, else an empty array.
[[nodiscard]] inline nlohmann::json jsonArray(const nlohmann::json& j, const char* key) {
  if (j.is_object()) {
    auto it = j.find(key);
    if (it != j.end() && it->is_array()) {
      return *it;
    }
  }
  return nlohmann::json::array();
}

}  // namespace ibcni::chaos
