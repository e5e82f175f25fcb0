// SPDX-License-Identifier: Apache-2.0
// ibcni-agent's HTTP client: libcurl, loaded on the first request, its connections and TLS sessions
// kept (the agent runs for the node's life). Safe from several threads: the relay socket the agent
// serves (lib/http/relay_socket.h) sends the plugins' requests with it, one thread per connection.
#include <string>
#include <vector>

#include "lib/http/curl_http_client.h"
#include "plugin/cli/production_http.h"

namespace ibcni::plugin {

http::HttpClient& productionHttpClient() {
  static http::CurlHttpClient client(std::vector<std::string>{"libcurl.so.4"}, true);
  return client;
}

}  // namespace ibcni::plugin
