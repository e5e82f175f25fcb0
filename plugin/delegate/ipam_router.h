// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "ibcni/config/ipam_conf.h"
#include "ibcni/ipam/ipam.h"

namespace ibcni::delegate {

using ipam::Ipam;
using ipam::Request;

/// Picks the IPAM for a request: the embedded one, in process, for ipam.type "ibcni-ipam"
/// (no second binary is executed), the delegated plugin from CNI_PATH for anything else.
class IpamRouter final : public ipam::Ipam {
 public:
  IpamRouter(Ipam& embedded, Ipam& delegated) : embedded_(embedded), delegated_(delegated) {}

  cni::Result<cni::AddResult> add(const Request& r) override { return pick(r).add(r); }
  cni::Result<void> del(const Request& r) override { return pick(r).del(r); }
  cni::Result<void> check(const Request& r) override { return pick(r).check(r); }
  cni::Result<void> gc(const Request& r) override { return pick(r).gc(r); }
  cni::Result<void> status(const Request& r) override { return pick(r).status(r); }

 private:
  Ipam& pick(const Request& r) { return r.ipamType == config::kEmbeddedIpamType ? embedded_ : delegated_; }
  Ipam& embedded_;
  Ipam& delegated_;
};

}  // namespace ibcni::delegate
