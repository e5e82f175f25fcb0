// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/kube_claim_api.h"

#include <utility>

namespace ibcni::dra {

KubeClaimApi::KubeClaimApi(http::HttpClient& client, KubeTarget target) : kube_(client, std::move(target)) {}

ApiResult<nlohmann::json> KubeClaimApi::get(const std::string& ns, const std::string& name, Read read) {
  const std::string path = "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + name +
                           (read == Read::kCached ? "?resourceVersion=0" : "");
  auto r = kube_.call(http::Method::kGet, path, nullptr, {200});
  if (!r) {
    return std::unexpected(r.error());
  }
  auto doc = nlohmann::json::parse(r->body, nullptr, false);
  if (!doc.is_object()) {
    return std::unexpected(ApiError{ApiError::Kind::kOther, "GET " + path + ": not JSON"});
  }
  return doc;
}

ApiResult<void> KubeClaimApi::applyStatus(const std::string& ns, const std::string& name, const std::string& uid,
                                          const nlohmann::json& devices) {
  const std::string path =
      "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + name + "/status?fieldManager=ibcni.io&force=true";
  const nlohmann::json body = {{"apiVersion", "resource.k8s.io/v1"},
                               {"kind", "ResourceClaim"},
                               {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
                               {"status", {{"devices", devices}}}};
  auto r = kube_.call(http::Method::kPatch, path, &body, {200, 201}, "application/apply-patch+yaml");
  return r ? ApiResult<void>() : std::unexpected(r.error());
}

}  // namespace ibcni::dra
