// SPDX-License-Identifier: Apache-2.0
// SliceApi over the Kubernetes API: resource.k8s.io/v1 ResourceSlices through an HttpClient, as
// the node's ServiceAccount (a bearer token, read again from its file for every call, since a
// projected token rotates).
#pragma once

#include <string>
#include <vector>

#include "plugin/dra/kube_api.h"
#include "plugin/dra/slice_publisher.h"

namespace ibcni::dra {

class KubeSliceApi final : public SliceApi {
 public:
  KubeSliceApi(http::HttpClient& client, KubeTarget target);

  [[nodiscard]] ApiResult<std::vector<nlohmann::json>> list(const std::string& driver,
                                                            const std::string& nodeName) override;
  [[nodiscard]] ApiResult<void> create(const nlohmann::json& slice) override;
  [[nodiscard]] ApiResult<void> update(const nlohmann::json& slice) override;
  [[nodiscard]] ApiResult<void> remove(const std::string& name, const std::string& uid) override;

 private:
  KubeClient kube_;
};

}  // namespace ibcni::dra
