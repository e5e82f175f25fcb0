// SPDX-License-Identifier: Apache-2.0
// ibcni's HTTP client: the node agent's relay socket when an agent serves it (no libcurl to load, its
// connections already open), else libcurl, loaded on the first request (a node without libcurl runs
// every node-local configuration, and gets error 4 naming libcurl in cluster mode).
#include "lib/http/curl_http_client.h"
#include "lib/http/relay_socket.h"
#include "plugin/cli/production_http.h"

namespace ibcni::plugin {

http::HttpClient& productionHttpClient() {
  static http::CurlHttpClient curl;
  static http::SocketRelayHttpClient client(http::relaySocketFromEnvironment(), curl);
  return client;
}

}  // namespace ibcni::plugin
