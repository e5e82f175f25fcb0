// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>

#include "plugin/deps.h"

namespace ibcni::plugin {

/// Owns the real implementations behind Deps: libnl netlink, sysfs at /sys, the system's
/// namespaces, IPAM (ibcni-ipam in process, any other type delegated) and the file attachment store.
class ProductionDeps {
 public:
  ProductionDeps();
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
