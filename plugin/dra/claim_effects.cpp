// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/claim_effects.h"

#include <utility>

namespace ibcni::dra {

NodeClaimEffects::NodeClaimEffects(ClaimCheckpoint checkpoint, MetadataPlace files, VfAccess vfs)
    : checkpoint_(std::move(checkpoint)), files_(std::move(files)), vfs_(vfs) {}

os::SysResult<int> NodeClaimEffects::pfIndex(const VfRef& vf) {
  auto link = vfs_.netlink.linkByName(vfs_.host, vf.pfName);
  if (!link) {
    return std::unexpected(link.error());
  }
  return link->index;
}

os::SysResult<nl::VfInfo> NodeClaimEffects::vfInfo(const VfRef& vf) {
  auto pf = pfIndex(vf);
  if (!pf) {
    return std::unexpected(pf.error());
  }
  return vfs_.netlink.vfInfo(vfs_.host, *pf, vf.vf);
}

os::SysResult<void> NodeClaimEffects::setVfGuids(const VfRef& vf, const net::Guid& node, const net::Guid& port) {
  auto pf = pfIndex(vf);
  if (!pf) {
    return std::unexpected(pf.error());
  }
  return vfs_.netlink.setVfGuids(vfs_.host, *pf, vf.vf, node, port);
}

os::SysResult<void> NodeClaimEffects::setVfLinkState(const VfRef& vf, nl::VfLinkState state) {
  auto pf = pfIndex(vf);
  if (!pf) {
    return std::unexpected(pf.error());
  }
  return vfs_.netlink.setVfLinkState(vfs_.host, *pf, vf.vf, state);
}

}  // namespace ibcni::dra
