// SPDX-License-Identifier: Apache-2.0
// The HTTP(S) client cluster mode's backends send with, one per process. Each executable links
// exactly one definition: in_process_http.cpp (ibcni, dynamic: through the node agent's relay socket,
// else libcurl loaded on first use), relayed_http.cpp (ibcni-ipam, static: through the agent's relay
// socket, else `ibcni http-relay` installed beside it) or agent_http.cpp (ibcni-agent: libcurl, its
// connections kept, which the relay socket it serves sends with too).
#pragma once

#include "ibcni/http/http_client.h"

namespace ibcni::plugin {

/// This process's client; nothing is loaded or started before its first request.
[[nodiscard]] http::HttpClient& productionHttpClient();

}  // namespace ibcni::plugin
