// SPDX-License-Identifier: Apache-2.0
// ibcni's HTTP client: libcurl, loaded on the first request (a node without libcurl runs every
// node-local configuration, and gets error 4 naming libcurl in cluster mode).
#include "lib/http/curl_http_client.h"
#include "plugin/cli/production_http.h"

namespace ibcni::plugin {

http::HttpClient& productionHttpClient() {
  static http::CurlHttpClient client;
  return client;
}

}  // namespace ibcni::plugin
