// SPDX-License-Identifier: Apache-2.0
// For the node agent's count of the backend calls its own passes make (cluster pools: renewals, give-backs,
// takeovers): each backend its embedded IPAM builds is wrapped so that every call is told to a sink.
#pragma once

#include <functional>
#include <string_view>

#include "ipam/cluster/cluster_pool.h"

namespace ibcni::ipam {

/// One backend call: the backend ("etcd", "kubernetes"), the operation ("claim", "list", "renew",
/// ...) and its result ("success", or the error's kind with '_' for ' ': "unreachable", "timeout",
/// "bad_answer", "auth", "unavailable", "invalid_argument").
using BackendCallSink = std::function<void(std::string_view backend, std::string_view op, std::string_view result)>;

/// `inner`, with each backend it builds wrapped so that every call is told to `sink` (which must be
/// safe to call from the thread that makes the call).
[[nodiscard]] BackendFactory countingBackends(BackendFactory inner, BackendCallSink sink);

}  // namespace ibcni::ipam
