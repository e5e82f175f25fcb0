// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/kube_slice_api.h"

#include <utility>

namespace ibcni::dra {

namespace {

using nlohmann::json;

constexpr const char* kSlices = "/apis/resource.k8s.io/v1/resourceslices";

}  // namespace

KubeSliceApi::KubeSliceApi(http::HttpClient& client, KubeTarget target)
    : kube_(client, std::move(target)) {}

ApiResult<std::vector<json>> KubeSliceApi::list(const std::string& driver, const std::string& nodeName) {
  auto r = kube_.call(http::Method::kGet,
                std::string(kSlices) + "?fieldSelector=spec.nodeName%3D" + nodeName + "%2Cspec.driver%3D" + driver,
                nullptr, {200});
  if (!r) {
    return std::unexpected(r.error());
  }
  auto doc = json::parse(r->body, nullptr, false);
  if (!doc.is_object() || !doc.value("items", json()).is_array()) {
    return std::unexpected(ApiError{ApiError::Kind::kOther, "GET " + std::string(kSlices) + ": not a list"});
  }
  return std::vector<json>(doc["items"].begin(), doc["items"].end());
}

ApiResult<void> KubeSliceApi::create(const json& slice) {
  auto r = kube_.call(http::Method::kPost, kSlices, &slice, {200, 201});
  return r ? ApiResult<void>() : std::unexpected(r.error());
}

ApiResult<void> KubeSliceApi::update(const json& slice) {
  auto r = kube_.call(http::Method::kPut, std::string(kSlices) + "/" + slice["metadata"].value("name", ""), &slice, {200});
  return r ? ApiResult<void>() : std::unexpected(r.error());
}

ApiResult<void> KubeSliceApi::remove(const std::string& name, const std::string& uid) {
  const json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"preconditions", {{"uid", uid}}}};
  // 404: gone already; 409: a precondition failed (another slice of that name now): not ours.
  auto r = kube_.call(http::Method::kDelete, std::string(kSlices) + "/" + name, &options, {200, 202, 404, 409});
  return r ? ApiResult<void>() : std::unexpected(r.error());
}

}  // namespace ibcni::dra
