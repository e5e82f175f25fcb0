// SPDX-License-Identifier: Apache-2.0
// ibcni-dra's calls on the Kubernetes API: one request through an HttpClient as the node's
// ServiceAccount (a bearer token, read again from its file for every call, since a projected token
// rotates), its answer or an error naming the call.
#pragma once

#include <chrono>
#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/http/http_client.h"

namespace ibcni::dra {

/// A failed API call.
struct ApiError {
  enum class Kind {
    kConflict,  ///< 409: the object changed (or exists) meanwhile
    kNotFound,  ///< 404
    kOther,     ///< transport, authorization, validation, server errors
  };
  Kind kind = Kind::kOther;
  std::string message;  ///< "PUT /apis/...: 409 ...", for the log
};

template <class T>
using ApiResult = std::expected<T, ApiError>;

/// Where the API server is and who calls it.
struct KubeTarget {
  std::string server;      ///< "https://host:port", no trailing '/'
  http::TlsOptions tls;
  std::string token;       ///< a bearer token, or ""
  std::string tokenFile;   ///< read for every call when set
  std::chrono::milliseconds timeout{10000};
};

class KubeClient {
 public:
  KubeClient(http::HttpClient& client, KubeTarget target);

  /// One request (`body` as JSON of `contentType`, none when null); its answer when the status is
  /// one of `accepted`, else an error naming the call and the Status's message.
  [[nodiscard]] ApiResult<http::Response> call(http::Method method, const std::string& path,
                                               const nlohmann::json* body, const std::vector<long>& accepted,
                                               const char* contentType = "application/json");

 private:
  http::HttpClient& client_;
  KubeTarget target_;
};

/// The uid of Node `name` (the owner of its ResourceSlices, so that they go with it).
[[nodiscard]] ApiResult<std::string> nodeUid(KubeClient& kube, const std::string& name);

/// The API server as a pod's ServiceAccount sees it: KUBERNETES_SERVICE_HOST and _PORT, the token
/// and CA mounted under `secrets` (/var/run/secrets/kubernetes.io/serviceaccount); nullopt outside
/// a pod.
[[nodiscard]] std::optional<KubeTarget> inClusterTarget(
    const std::string& secrets = "/var/run/secrets/kubernetes.io/serviceaccount");

}  // namespace ibcni::dra
