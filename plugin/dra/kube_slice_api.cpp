// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/kube_slice_api.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

namespace ibcni::dra {

namespace {

using nlohmann::json;

constexpr const char* kSlices = "/apis/resource.k8s.io/v1/resourceslices";

/// The Status's message of an error answer, or the start of its body.
std::string messageOf(const http::Response& r) {
  auto doc = json::parse(r.body, nullptr, false);
  if (doc.is_object() && doc.contains("message") && doc["message"].is_string()) {
    return doc["message"];
  }
  constexpr std::size_t kMax = 200;
  return r.body.substr(0, kMax);
}

}  // namespace

KubeSliceApi::KubeSliceApi(http::HttpClient& client, KubeTarget target)
    : client_(client), target_(std::move(target)) {}

ApiResult<http::Response> KubeSliceApi::call(http::Method method, const std::string& path, const json* body,
                                             std::vector<long> accepted) {
  const std::string where = std::string(http::methodName(method)) + " " + path;
  http::Request r;
  r.method = method;
  r.url = target_.server + path;
  r.timeout = target_.timeout;
  r.tls = target_.tls;
  std::string token = target_.token;
  if (!target_.tokenFile.empty()) {
    std::ifstream in(target_.tokenFile);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) {
      return std::unexpected(ApiError{ApiError::Kind::kOther, where + ": cannot read the token file " + target_.tokenFile});
    }
    token = text.str();
    token.erase(token.find_last_not_of(" \n\r\t") + 1);
  }
  if (!token.empty()) {
    r.headers.push_back({"Authorization", "Bearer " + token});
  }
  r.headers.push_back({"Accept", "application/json"});
  if (body != nullptr) {
    r.body = body->dump();
    r.headers.push_back({"Content-Type", "application/json"});
  }
  auto answer = client_.send(r);
  if (!answer) {
    return std::unexpected(ApiError{ApiError::Kind::kOther, where + ": " + answer.error().describe()});
  }
  if (std::find(accepted.begin(), accepted.end(), answer->status) != accepted.end()) {
    return std::move(*answer);
  }
  return std::unexpected(ApiError{answer->status == 409 ? ApiError::Kind::kConflict : ApiError::Kind::kOther,
                                  where + ": " + std::to_string(answer->status) + " " + messageOf(*answer)});
}

ApiResult<std::vector<json>> KubeSliceApi::list(const std::string& driver, const std::string& nodeName) {
  auto r = call(http::Method::kGet,
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
  auto r = call(http::Method::kPost, kSlices, &slice, {200, 201});
  return r ? ApiResult<void>() : std::unexpected(r.error());
}

ApiResult<void> KubeSliceApi::update(const json& slice) {
  auto r = call(http::Method::kPut, std::string(kSlices) + "/" + slice["metadata"].value("name", ""), &slice, {200});
  return r ? ApiResult<void>() : std::unexpected(r.error());
}

ApiResult<void> KubeSliceApi::remove(const std::string& name, const std::string& uid) {
  const json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"preconditions", {{"uid", uid}}}};
  // 404: gone already; 409: a precondition failed (another slice of that name now): not ours.
  auto r = call(http::Method::kDelete, std::string(kSlices) + "/" + name, &options, {200, 202, 404, 409});
  return r ? ApiResult<void>() : std::unexpected(r.error());
}

}  // namespace ibcni::dra
