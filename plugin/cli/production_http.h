// SPDX-License-Identifier: Apache-2.0
// The HTTP(S) client cluster mode's backends send with, one per process. Each executable links
// exactly one definition: in_process_http.cpp (ibcni, dynamic: libcurl loaded on first use) or
// relayed_http.cpp (ibcni-ipam, static: its requests sent by `ibcni http-relay` installed beside it).
#pragma once

#include "ibcni/http/http_client.h"

namespace ibcni::plugin {

/// This process's client; nothing is loaded or started before its first request.
[[nodiscard]] http::HttpClient& productionHttpClient();

}  // namespace ibcni::plugin
