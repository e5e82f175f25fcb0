// SPDX-License-Identifier: Apache-2.0
#include "ipam/backends/etcd_lease.h"

#include <string>
#include <utility>

#include "ipam/claims/backend_support.h"

namespace ibcni::ipam::etcd {

NodeLease::NodeLease(std::chrono::seconds ttl, std::int64_t id, std::function<void(std::int64_t)> onGranted)
    : ttl_(ttl), onGranted_(std::move(onGranted)), id_(id) {}

std::int64_t NodeLease::id() const {
  const std::lock_guard lock(mutex_);
  return id_;
}

BackendResult<std::int64_t> NodeLease::grant(Call& call, std::int64_t replacing) {
  const std::lock_guard lock(mutex_);
  if (id_ != 0 && id_ != replacing) {
    return id_;  // another thread granted one meanwhile
  }
  auto r = call.post("/v3/lease/grant", json{{"TTL", std::to_string(ttl_.count())}});
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  const auto id = int64Field(*r, "ID");
  if (!id || *id <= 0) {
    return std::unexpected(call.bad("lease grant answered no lease ID: " + backend::excerpt(r->dump())));
  }
  id_ = *id;
  if (onGranted_) {
    onGranted_(*id);
  }
  return *id;
}

BackendResult<std::int64_t> NodeLease::keepAlive(Call& call, bool& regranted) {
  const std::int64_t lease = id();
  if (lease != 0) {
    auto r = call.post("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}});
    if (!r) {
      return std::unexpected(std::move(r.error()));
    }
    // A streamed answer: {"result":{"ID":"..","TTL":".."}}; TTL omitted (0) once expired.
    const json& result = r->contains("result") ? (*r)["result"] : *r;
    const auto ttl = int64Field(result, "TTL");
    if (!ttl) {
      return std::unexpected(call.bad("keepalive answer without a readable TTL: " + backend::excerpt(r->dump())));
    }
    if (*ttl > 0) {
      return lease;
    }
    regranted = true;
  }
  return grant(call, lease);
}

}  // namespace ibcni::ipam::etcd
