// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ibcni/http/http_client.h"

namespace ibcni::http {

struct CurlApi;

/// http::HttpClient over libcurl's easy interface, with libcurl loaded by dlopen on the first
/// send() (never linked): ibcni and ibcni-ipam start on a node without libcurl, and only a
/// configuration that needs HTTP needs the library (Debian: libcurl4).
///
/// Choices beyond the interface comments:
///  * The library is loaded, every function resolved and curl_global_init called once per client
///    (dlopen hands back the same library to every client); a failure is kept and every send()
///    returns it as kUnavailable, naming the library and the package to install. The library is
///    never unloaded.
///  * One easy handle per send(), so sends from several threads do not share state.
///  * No proxy unless Request::proxy is set: CURLOPT_PROXY "" (rather than NOPROXY "*") turns off
///    http_proxy/https_proxy/all_proxy from the environment, which a runtime may pass on to a CNI
///    plugin and which must not carry the cluster's datastore traffic; an explicit proxy stays
///    possible.
///  * No redirect is followed, no signal is used (CURLOPT_NOSIGNAL), only http and https are
///    allowed; CURLOPT_TIMEOUT_MS and CURLOPT_CONNECTTIMEOUT_MS are both Request::timeout.
///  * curl's own "Content-Type: application/x-www-form-urlencoded" for a body and its
///    "Expect: 100-continue" are never sent.
///  * A CA (file or data) replaces the system's trust: CURLOPT_CAPATH is cleared with it.
class CurlHttpClient final : public HttpClient {
 public:
  /// @param library what is dlopen'd. Only tests pass anything but the default (a library that
  ///        does not exist, or one that is not libcurl).
  explicit CurlHttpClient(std::string library = "libcurl.so.4");
  /// The first of `libraries` that dlopen finds (a choice of libcurl builds, most wanted first).
  /// `keepConnections`: the client's requests share one cache of open connections and TLS
  /// sessions (a long-running caller: ibcni-dra), so that a request to a server asked before needs
  /// no new connection or handshake; otherwise each request opens and closes its own.
  explicit CurlHttpClient(std::vector<std::string> libraries, bool keepConnections = false);
  ~CurlHttpClient() override;
  CurlHttpClient(const CurlHttpClient&) = delete;
  CurlHttpClient& operator=(const CurlHttpClient&) = delete;

  [[nodiscard]] HttpResult<Response> send(const Request& request) override;

 private:
  std::vector<std::string> libraries_;
  bool keepConnections_ = false;
  std::unique_ptr<CurlApi> api_;  ///< filled on first use, under its once flag
};

}  // namespace ibcni::http
