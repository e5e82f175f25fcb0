// SPDX-License-Identifier: Apache-2.0
// SliceApi over the Kubernetes API: resource.k8s.io/v1 ResourceSlices through an HttpClient, as
// the node's ServiceAccount (a bearer token, read again from its file for every call, since a
// projected token rotates).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "ibcni/http/http_client.h"
#include "plugin/dra/slice_publisher.h"

namespace ibcni::dra {

/// Where the API server is and who calls it.
struct KubeTarget {
  std::string server;      ///< "https://host:port", no trailing '/'
  http::TlsOptions tls;
  std::string token;       ///< a bearer token, or ""
  std::string tokenFile;   ///< read for every call when set
  std::chrono::milliseconds timeout{10000};
};

class KubeSliceApi final : public SliceApi {
 public:
  KubeSliceApi(http::HttpClient& client, KubeTarget target);

  [[nodiscard]] ApiResult<std::vector<nlohmann::json>> list(const std::string& driver,
                                                            const std::string& nodeName) override;
  [[nodiscard]] ApiResult<void> create(const nlohmann::json& slice) override;
  [[nodiscard]] ApiResult<void> update(const nlohmann::json& slice) override;
  [[nodiscard]] ApiResult<void> remove(const std::string& name, const std::string& uid) override;

 private:
  /// One request; its answer when the status is one of `accepted`, else an error naming the call
  /// (kConflict for 409).
  [[nodiscard]] ApiResult<http::Response> call(http::Method method, const std::string& path,
                                               const nlohmann::json* body, std::vector<long> accepted);

  http::HttpClient& client_;
  KubeTarget target_;
};

}  // namespace ibcni::dra
