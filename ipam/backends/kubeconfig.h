// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <expected>
#include <string>
#include <string_view>

#include "ibcni/http/http_client.h"

namespace ibcni::ipam {

/// What is wrong with a kubeconfig.
enum class KubeconfigErrc {
  kMissing,     ///< the file does not exist
  kUnreadable,  ///< it exists but cannot be read (permissions, a directory, I/O)
  kMalformed,   ///< not YAML, or not a kubeconfig's shape (a list that is not a list...)
  kNoContext,   ///< no current-context and none asked for, or no context of that name
  kNoCluster,   ///< the context names no cluster, or one the file does not define
  kNoUser,      ///< the context names no user, or one the file does not define
  kNoServer,    ///< the cluster has no server (or not an http(s):// URL)
  kBadValue,    ///< a field of the wrong type, undecodable *-data, an unsupported auth method
};

struct KubeconfigError {
  KubeconfigErrc kind = KubeconfigErrc::kMalformed;
  std::string file;     ///< the kubeconfig's path
  std::string field;    ///< the field concerned ("users[ibcni].user.token", "current-context"...)
  std::string message;

  /// "kubeconfig FILE: FIELD: MESSAGE"
  [[nodiscard]] std::string describe() const;
};

/// What a node needs from a kubeconfig to reach the API server as its user.
struct Kubeconfig {
  std::string file;       ///< the path read
  std::string context;    ///< the context used
  std::string cluster;    ///< its cluster's name
  std::string user;       ///< its user's name
  std::string server;     ///< the cluster's server URL, without a trailing '/'
  std::string namespace_; ///< the context's namespace ("" when it names none)
  /// certificate-authority(-data), client-certificate(-data), client-key(-data) as files (absolute:
  /// relative ones are resolved against the kubeconfig's folder) or in-memory PEM (the *-data
  /// fields decoded); insecure-skip-tls-verify.
  http::TlsOptions tls;
  std::string token;      ///< user.token
  std::string tokenFile;  ///< user.tokenFile (absolute); read again for every request (tokens rotate)
};

/// Reads the kubeconfig at `path` (YAML or JSON) and resolves `context` (empty: its
/// current-context). Accepted users: token, tokenFile, client certificate and key, or nothing
/// (anonymous); exec, auth-provider and username/password are refused (kBadValue).
[[nodiscard]] std::expected<Kubeconfig, KubeconfigError> loadKubeconfig(const std::string& path,
                                                                        std::string_view context = {});

}  // namespace ibcni::ipam
