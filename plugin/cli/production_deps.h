// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <memory>

#include "ipam/backend_calls.h"
#include "plugin/deps.h"

namespace ibcni::plugin {

/// Owns the real implementations behind Deps: libnl netlink, sysfs at /sys, the system's
/// namespaces, IPAM (ibcni-ipam in process, any other type delegated) and the file attachment store.
class ProductionDeps {
 public:
  /// Wraps the factory of the cluster-pool backends the embedded IPAM builds (the node agent counts
  /// their calls); none: the production factory as it is.
  using BackendWrap = std::function<ipam::BackendFactory(ipam::BackendFactory)>;

  explicit ProductionDeps(const BackendWrap& wrapBackends = {});
  ~ProductionDeps();
  ProductionDeps(const ProductionDeps&) = delete;
  ProductionDeps& operator=(const ProductionDeps&) = delete;

  [[nodiscard]] Deps& deps() { return *deps_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Deps> deps_;
};

}  // namespace ibcni::plugin
