// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/kube_api.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

namespace ibcni::dra {

namespace {

using nlohmann::json;

/// The Status's message of an error answer, or the start of its body.
std::string messageOf(const http::Response& r) {
  auto doc = json::parse(r.body, nullptr, false);
  if (doc.is_object() && doc.contains("message") && doc["message"].is_string()) {
    return doc["message"];
  }
  constexpr std::size_t kMax = 200;
  return r.body.substr(0, kMax);
}

ApiError::Kind kindOf(long status) {
  switch (status) {
    case 404: return ApiError::Kind::kNotFound;
    case 409: return ApiError::Kind::kConflict;
    default: return ApiError::Kind::kOther;
  }
}

}  // namespace

KubeClient::KubeClient(http::HttpClient& client, KubeTarget target) : client_(client), target_(std::move(target)) {}

ApiResult<http::Response> KubeClient::call(http::Method method, const std::string& path, const json* body,
                                           const std::vector<long>& accepted, const char* contentType) {
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
    r.headers.push_back({"Content-Type", contentType});
  }
  auto answer = client_.send(r);
  if (!answer) {
    return std::unexpected(ApiError{ApiError::Kind::kOther, where + ": " + answer.error().describe()});
  }
  if (std::find(accepted.begin(), accepted.end(), answer->status) != accepted.end()) {
    return std::move(*answer);
  }
  return std::unexpected(ApiError{kindOf(answer->status),
                                  where + ": " + std::to_string(answer->status) + " " + messageOf(*answer)});
}

ApiResult<std::string> nodeUid(KubeClient& kube, const std::string& name) {
  auto r = kube.call(http::Method::kGet, "/api/v1/nodes/" + name, nullptr, {200});
  if (!r) {
    return std::unexpected(r.error());
  }
  const auto doc = json::parse(r->body, nullptr, false);
  const std::string uid = doc.is_object() ? doc.value("/metadata/uid"_json_pointer, std::string()) : "";
  if (uid.empty()) {
    return std::unexpected(ApiError{ApiError::Kind::kOther, "GET /api/v1/nodes/" + name + ": no metadata.uid"});
  }
  return uid;
}

std::optional<KubeTarget> inClusterTarget(const std::string& secrets) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0') {
    return std::nullopt;
  }
  KubeTarget t;
  const std::string h = host;
  t.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  t.tls.caFile = secrets + "/ca.crt";
  t.tokenFile = secrets + "/token";
  return t;
}

}  // namespace ibcni::dra
