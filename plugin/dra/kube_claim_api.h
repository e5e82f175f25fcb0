// SPDX-License-Identifier: Apache-2.0
// The ResourceClaims ibcni-dra reads (resource.k8s.io/v1), behind an interface so that the
// preparation's tests can serve them from memory.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "plugin/dra/kube_api.h"

namespace ibcni::dra {

/// How fresh a read must be.
enum class Read {
  kLatest,  ///< from etcd (a quorum read): what a Prepare checks the claim's uid and allocation against
  kCached,  ///< from the API server's watch cache (resourceVersion=0): may lag behind by moments, costs
            ///< no etcd request; what the background sweep reads, whose grace outlasts any lag
};

class ClaimApi {
 public:
  virtual ~ClaimApi() = default;
  /// ResourceClaim `name` of namespace `ns`, as fresh as `read`; kNotFound when there is none.
  [[nodiscard]] virtual ApiResult<nlohmann::json> get(const std::string& ns, const std::string& name, Read read) = 0;
  /// Applies `devices` as this driver's status.devices[] of claim `name` (uid `uid`: a claim made
  /// again under that name is not touched): server-side apply, so that other drivers' entries stay.
  [[nodiscard]] virtual ApiResult<void> applyStatus(const std::string& ns, const std::string& name,
                                                    const std::string& uid, const nlohmann::json& devices) = 0;
};

class KubeClaimApi final : public ClaimApi {
 public:
  KubeClaimApi(http::HttpClient& client, KubeTarget target);
  [[nodiscard]] ApiResult<nlohmann::json> get(const std::string& ns, const std::string& name, Read read) override;
  [[nodiscard]] ApiResult<void> applyStatus(const std::string& ns, const std::string& name, const std::string& uid,
                                            const nlohmann::json& devices) override;

 private:
  KubeClient kube_;
};

}  // namespace ibcni::dra
