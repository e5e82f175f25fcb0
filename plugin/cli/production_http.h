// SPDX-License-Identifier: Apache-2.0
// The HTTP(S) client cluster mode's backends send with, one per process. Each executable links
// exactly one definition: in_process_http.cpp (ibcni, dynamic: through the node agent's relay socket,
// else libcurl loaded on first use), relayed_http.cpp (ibcni-ipam, static: through the agent's relay
// socket, else `ibcni http-relay` installed beside it) or agent_http.cpp (ibcni-agent: libcurl, its
// connections kept, which the relay socket it serves sends with too).
#pragma once

#include <cstdlib>
#include <string>

#include "ibcni/http/http_client.h"
#include "lib/http/relay_socket.h"

namespace ibcni::plugin {

/// This process's client; nothing is loaded or started before its first request.
[[nodiscard]] http::HttpClient& productionHttpClient();

/// Where the plugins look for the node agent's relay: $IBCNI_HTTP_RELAY_SOCKET when set, else
/// http::kDefaultRelaySocket.
[[nodiscard]] inline std::string relaySocketPath() {
  const char* set = std::getenv(std::string(http::kRelaySocketEnv).c_str());
  return set != nullptr && *set != '\0' ? std::string(set) : std::string(http::kDefaultRelaySocket);
}

}  // namespace ibcni::plugin
