// SPDX-License-Identifier: Apache-2.0
#include "ipam/backends/kubeconfig.h"

#include <cerrno>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ibcni/cni/error.h"
#include "ibcni/os/file_io.h"
#include "ibcni/os/text.h"
#include "ibcni/yaml/yaml_json.h"

namespace ibcni::ipam {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxKubeconfigBytes = 4U << 20U;

struct Reader {
  const std::string& file;
  std::string dir;  // the kubeconfig's folder, for relative paths

  std::unexpected<KubeconfigError> fail(KubeconfigErrc kind, std::string field, std::string message) const {
    return std::unexpected(KubeconfigError{kind, file, std::move(field), std::move(message)});
  }

  /// The entry named `name` of the list `list` ("clusters", "users", "contexts"): its `key`
  /// object ("cluster", "user", "context"). std::nullopt when there is no such entry.
  std::expected<std::optional<json>, KubeconfigError> entry(const json& doc, const char* list, const char* key,
                                                            const std::string& name) const {
    if (!doc.contains(list) || doc[list].is_null()) {
      return std::optional<json>();
    }
    if (!doc[list].is_array()) {
      return fail(KubeconfigErrc::kMalformed, list, "is not a list");
    }
    for (const auto& item : doc[list]) {
      if (!item.is_object() || !item.contains("name") || !item["name"].is_string()) {
        return fail(KubeconfigErrc::kMalformed, list, "has an entry without a \"name\"");
      }
      if (item["name"].get<std::string>() != name) {
        continue;
      }
      const std::string field = std::string(list) + "[" + name + "]." + key;
      if (!item.contains(key) || item[key].is_null()) {
        return std::optional<json>(json::object());
      }
      if (!item[key].is_object()) {
        return fail(KubeconfigErrc::kMalformed, field, "is not a mapping");
      }
      return std::optional<json>(item[key]);
    }
    return std::optional<json>();
  }

  /// The entry named `name` of `list` as entry() finds it; `kind` and `missing` make the error
  /// when there is none.
  std::expected<json, KubeconfigError> required(const json& doc, const char* list, const char* key,
                                                const std::string& name, KubeconfigErrc kind,
                                                const std::string& missing) const {
    auto found = entry(doc, list, key, name);
    if (!found) {
      return std::unexpected(std::move(found.error()));
    }
    if (!*found) {
      return fail(kind, list, missing);
    }
    return std::move(**found);
  }

  /// A string field of `obj` ("" when absent or null).
  std::expected<std::string, KubeconfigError> string(const json& obj, const std::string& path, const char* name) const {
    if (!obj.contains(name) || obj[name].is_null()) {
      return std::string();
    }
    if (!obj[name].is_string()) {
      return fail(KubeconfigErrc::kBadValue, path + "." + name, "is not a string");
    }
    return obj[name].get<std::string>();
  }

  std::string resolve(const std::string& p) const {
    if (p.empty() || p.front() == '/') {
      return p;
    }
    return dir + "/" + p;
  }

  /// A file field and its *-data twin: at most one; the file resolved, the data base64-decoded.
  std::expected<void, KubeconfigError> pem(const json& obj, const std::string& path, const char* fileName,
                                          const char* dataName, std::string& fileOut, std::string& dataOut) const {
    auto f = string(obj, path, fileName);
    if (!f) {
      return std::unexpected(std::move(f.error()));
    }
    auto d = string(obj, path, dataName);
    if (!d) {
      return std::unexpected(std::move(d.error()));
    }
    if (!f->empty() && !d->empty()) {
      return fail(KubeconfigErrc::kBadValue, path + "." + dataName,
                  std::string("is given with ") + fileName + ": give one of them");
    }
    if (!d->empty()) {
      auto decoded = os::base64Decode(*d);
      if (!decoded || decoded->empty()) {
        return fail(KubeconfigErrc::kBadValue, path + "." + dataName, "is not base64 (of a PEM text)");
      }
      dataOut = std::move(*decoded);
    }
    fileOut = resolve(*f);
    return {};
  }
};

}  // namespace

std::string KubeconfigError::describe() const {
  std::string out = "kubeconfig " + cni::quoted(file);
  if (!field.empty()) {
    out += ": " + field;
  }
  return out + ": " + message;
}

namespace {

using Step = std::expected<void, KubeconfigError>;

/// The kubeconfig's text read and parsed (YAML or JSON) into a mapping.
std::expected<json, KubeconfigError> readDocument(const Reader& r) {
  auto text = os::readFile(r.file, kMaxKubeconfigBytes);
  if (!text) {
    if (text.error().err == ENOENT) {
      return r.fail(KubeconfigErrc::kMissing, "", "no such file (the node agent writes it; give the path in "
                                                  "ipam.cluster.kubernetes.kubeconfig)");
    }
    return r.fail(KubeconfigErrc::kUnreadable, "", text.error().describe());
  }
  auto converted = yaml::yamlToJson(*text);
  if (!converted) {
    return r.fail(KubeconfigErrc::kMalformed, "", "not YAML: " + converted.error().describe());
  }
  json doc = json::parse(*converted, nullptr, false);
  if (!doc.is_object()) {
    return r.fail(KubeconfigErrc::kMalformed, "", "not a mapping (a kubeconfig has clusters, users and contexts)");
  }
  return doc;
}

/// The context asked for, else the file's current-context, into out.context.
Step chooseContext(const Reader& r, const json& doc, std::string_view context, Kubeconfig& out) {
  if (!context.empty()) {
    out.context = std::string(context);
    return {};
  }
  auto current = r.string(doc, "", "current-context");
  if (!current) {
    current.error().field = "current-context";
    return std::unexpected(std::move(current.error()));
  }
  if (current->empty()) {
    return r.fail(KubeconfigErrc::kNoContext, "current-context", "is not set and no context was asked for");
  }
  out.context = *current;
  return {};
}

/// The context's entry: the names of its cluster and user, and its namespace.
Step readContext(const Reader& r, const json& doc, Kubeconfig& out) {
  auto ctx = r.required(doc, "contexts", "context", out.context, KubeconfigErrc::kNoContext,
                        "no context named " + cni::quoted(out.context));
  if (!ctx) {
    return std::unexpected(std::move(ctx.error()));
  }
  const std::string ctxPath = "contexts[" + out.context + "].context";
  auto clusterName = r.string(*ctx, ctxPath, "cluster");
  auto userName = r.string(*ctx, ctxPath, "user");
  auto ns = r.string(*ctx, ctxPath, "namespace");
  for (auto* s : {&clusterName, &userName, &ns}) {
    if (!*s) {
      return std::unexpected(std::move(s->error()));
    }
  }
  out.namespace_ = *ns;
  if (clusterName->empty()) {
    return r.fail(KubeconfigErrc::kNoCluster, ctxPath + ".cluster", "is not set");
  }
  if (userName->empty()) {
    return r.fail(KubeconfigErrc::kNoUser, ctxPath + ".user", "is not set");
  }
  out.cluster = *clusterName;
  out.user = *userName;
  return {};
}

/// The cluster's server URL (without trailing '/'), checked to be http(s)://.
std::expected<std::string, KubeconfigError> readServer(const Reader& r, const json& cluster,
                                                       const std::string& clPath) {
  auto server = r.string(cluster, clPath, "server");
  if (!server) {
    return std::unexpected(std::move(server.error()));
  }
  while (!server->empty() && server->back() == '/') {
    server->pop_back();
  }
  if (server->empty()) {
    return r.fail(KubeconfigErrc::kNoServer, clPath + ".server", "is not set");
  }
  if ((!server->starts_with("https://") && !server->starts_with("http://")) || !os::isPrintableText(*server) ||
      server->find(' ') != std::string::npos) {
    return r.fail(KubeconfigErrc::kNoServer, clPath + ".server",
                  cni::quoted(*server) + " is not an http(s):// URL");
  }
  return server;
}

/// The context's cluster: its server, its CA and insecure-skip-tls-verify.
Step readCluster(const Reader& r, const json& doc, Kubeconfig& out) {
  auto cluster = r.required(doc, "clusters", "cluster", out.cluster, KubeconfigErrc::kNoCluster,
                            "no cluster named " + cni::quoted(out.cluster) + " (context " +
                                cni::quoted(out.context) + ")");
  if (!cluster) {
    return std::unexpected(std::move(cluster.error()));
  }
  const std::string clPath = "clusters[" + out.cluster + "].cluster";
  auto server = readServer(r, *cluster, clPath);
  if (!server) {
    return std::unexpected(std::move(server.error()));
  }
  out.server = *server;
  if (auto p = r.pem(*cluster, clPath, "certificate-authority", "certificate-authority-data", out.tls.caFile,
                     out.tls.caData);
      !p) {
    return std::unexpected(std::move(p.error()));
  }
  if (cluster->contains("insecure-skip-tls-verify")) {
    const json& v = (*cluster)["insecure-skip-tls-verify"];
    if (!v.is_boolean() && !v.is_null()) {
      return r.fail(KubeconfigErrc::kBadValue, clPath + ".insecure-skip-tls-verify", "is not true or false");
    }
    out.tls.insecure = v.is_boolean() && v.get<bool>();
  }
  return {};
}

/// The user's client certificate and key: both or neither.
Step readClientCertificate(const Reader& r, const json& user, const std::string& usPath, Kubeconfig& out) {
  if (auto p = r.pem(user, usPath, "client-certificate", "client-certificate-data", out.tls.certFile,
                     out.tls.certData);
      !p) {
    return std::unexpected(std::move(p.error()));
  }
  if (auto p = r.pem(user, usPath, "client-key", "client-key-data", out.tls.keyFile, out.tls.keyData); !p) {
    return std::unexpected(std::move(p.error()));
  }
  const bool cert = !out.tls.certFile.empty() || !out.tls.certData.empty();
  const bool key = !out.tls.keyFile.empty() || !out.tls.keyData.empty();
  if (cert != key) {
    return r.fail(KubeconfigErrc::kBadValue, usPath + (cert ? ".client-key" : ".client-certificate"),
                  "is missing: a client certificate needs its key and the other way round");
  }
  return {};
}

/// The context's user: no unsupported auth method; its token, tokenFile, client certificate and key.
Step readUser(const Reader& r, const json& doc, Kubeconfig& out) {
  auto user = r.required(doc, "users", "user", out.user, KubeconfigErrc::kNoUser,
                         "no user named " + cni::quoted(out.user) + " (context " + cni::quoted(out.context) + ")");
  if (!user) {
    return std::unexpected(std::move(user.error()));
  }
  const std::string usPath = "users[" + out.user + "].user";
  for (const char* unsupported : {"exec", "auth-provider", "username", "password"}) {
    if (user->contains(unsupported) && !(*user)[unsupported].is_null()) {
      return r.fail(KubeconfigErrc::kBadValue, usPath + "." + unsupported,
                    "is not supported: give the user a token, a tokenFile or a client certificate and key");
    }
  }
  auto token = r.string(*user, usPath, "token");
  auto tokenFile = r.string(*user, usPath, "tokenFile");
  for (auto* s : {&token, &tokenFile}) {
    if (!*s) {
      return std::unexpected(std::move(s->error()));
    }
  }
  out.token = *token;
  out.tokenFile = r.resolve(*tokenFile);
  return readClientCertificate(r, *user, usPath, out);
}

}  // namespace

std::expected<Kubeconfig, KubeconfigError> loadKubeconfig(const std::string& path, std::string_view context) {
  Reader r{path, {}};
  const auto slash = path.rfind('/');
  r.dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  auto doc = readDocument(r);
  if (!doc) {
    return std::unexpected(std::move(doc.error()));
  }
  Kubeconfig out;
  out.file = path;
  if (auto c = chooseContext(r, *doc, context, out); !c) {
    return std::unexpected(std::move(c.error()));
  }
  if (auto c = readContext(r, *doc, out); !c) {
    return std::unexpected(std::move(c.error()));
  }
  if (auto c = readCluster(r, *doc, out); !c) {
    return std::unexpected(std::move(c.error()));
  }
  if (auto u = readUser(r, *doc, out); !u) {
    return std::unexpected(std::move(u.error()));
  }
  return out;
}

}  // namespace ibcni::ipam
