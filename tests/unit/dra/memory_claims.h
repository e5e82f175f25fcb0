// SPDX-License-Identifier: Apache-2.0
// ResourceClaims served from memory for the dra tests: what get() answers (or its failure), what
// applyStatus() was given, and how many reads were made.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plugin/dra/kube_claim_api.h"

namespace ibcni::dra {

/// Claims served from memory, counting the calls.
class MemoryClaims final : public ClaimApi {
 public:
  ApiResult<nlohmann::json> get(const std::string& ns, const std::string& name, Read read) override {
    ++calls;
    reads.push_back(read);
    if (!getFailWith.empty()) {
      return std::unexpected(ApiError{ApiError::Kind::kOther, getFailWith});
    }
    auto it = claims.find(ns + "/" + name);
    if (it == claims.end()) {
      return std::unexpected(ApiError{ApiError::Kind::kNotFound, "GET " + ns + "/" + name + ": 404"});
    }
    return it->second;
  }
  ApiResult<void> applyStatus(const std::string& ns, const std::string& name, const std::string& uid,
                              const nlohmann::json& devices) override {
    ++applyCalls;
    if (!failWith.empty()) {
      return std::unexpected(ApiError{failKind, failWith});
    }
    applied.push_back({{"claim", ns + "/" + name}, {"uid", uid}, {"devices", devices}});
    return {};
  }
  std::map<std::string, nlohmann::json> claims;
  std::vector<nlohmann::json> applied;  ///< {claim, uid, devices} per call
  std::string failWith;                 ///< non-empty: applyStatus fails with it
  ApiError::Kind failKind = ApiError::Kind::kOther;  ///< and this kind
  int applyCalls = 0;
  std::string getFailWith;              ///< non-empty: get fails with it (not a 404)
  int calls = 0;
  std::vector<Read> reads;  ///< the freshness each get asked for
};

}  // namespace ibcni::dra
