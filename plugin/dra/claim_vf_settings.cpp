// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/claim_vf_settings.h"

#include <cerrno>

#include "plugin/modes/sriov_vf_guid_pool.h"
#include "plugin/modes/sriov_vf_lookup.h"

namespace ibcni::dra {

namespace {

std::string vfText(const VfChange& c) { return "VF " + std::to_string(c.vf) + " of " + c.pfName + " (" + c.pci + ")"; }

VfRef refOf(const VfChange& c) { return {c.pfName, c.vf}; }


std::string stepError(const std::string& what, const os::SysError& e) { return what + ": " + e.describe(); }

/// The GUID the VF gets: the requested one, or the pool's (allocated here, written ahead).
std::expected<std::optional<net::Guid>, std::string> chooseGuid(VfSteps& steps, const ClaimRef& claim,
                                                               const VfSettings& settings, const nl::VfInfo& info,
                                                               VfChange& change, plugin::VfGuids& restoreTo) {
  if (!settings.guidPool) {
    return settings.guid;
  }
  const config::GuidPoolConf& pool = *settings.guidPool;
  const plugin::PoolGuidChoice choice = plugin::choosePoolGuid(pool, settings.guid, info.portGuid);
  if (!choice.fromPool) {
    return settings.guid;
  }
  change.guidPool = pool.pool;
  change.guidPoolDir = steps.effects.guidStoreOf(pool);
  if (auto ok = steps.saveAhead(); !ok) {
    return std::unexpected(ok.error().describe());
  }
  const cni::CmdArgs args{cni::Command::kAdd, claim.uid, "", change.device, "", {}};
  cni::CniArgs cniArgs;
  cniArgs.podNamespace = claim.ns;
  cniArgs.podName = claim.name;
  const ipam::GuidRequest request{pool, kDraGuidNetwork, args, cniArgs, choice.requested,
                                  settings.guid ? "guid" : "the VF's own GUID"};
  auto lease = steps.effects.allocateGuid(request);
  if (!lease) {
    return std::unexpected("GUID of " + vfText(change) + " from guidPool " + pool.pool + ": " + lease.error().msg);
  }
  restoreTo = plugin::restorableOutsidePool(restoreTo, pool);
  return lease->guid;
}

}  // namespace

bool pending(const VfChange& change) {
  return !change.guid.empty() || change.oldLinkState || !change.guidPoolDir.empty();
}

std::string applyVfSettings(VfSteps& steps, const ClaimRef& claim, const IbDevice& device, const VfSettings& settings,
                            VfChange& change) {
  if (!settings.changesVf()) {
    return {};  // nothing to ask of the PF: a VF prepared as it is needs no PF netdev
  }
  auto info = steps.effects.vfInfo(refOf(change));
  if (!info) {
    return stepError("read the settings of " + vfText(change) + " from its PF", info.error());
  }
  plugin::VfGuids restoreTo{info->nodeGuid, info->portGuid};
  auto guid = chooseGuid(steps, claim, settings, *info, change, restoreTo);
  if (!guid) {
    return guid.error();
  }
  const bool carries = *guid && info->nodeGuid == *guid && info->portGuid == *guid;
  // A pool's GUID is recorded even when the VF carries it already: Unprepare takes it off the VF.
  if (*guid && (!carries || !change.guidPoolDir.empty())) {
    change.guid = (*guid)->toString();
    change.oldNodeGuid = plugin::writableGuid(restoreTo.node).toString();
    change.oldPortGuid = plugin::writableGuid(restoreTo.port).toString();
    if (auto ok = steps.saveAhead(); !ok) {
      return ok.error().describe();
    }
    if (auto ok = steps.effects.setVfGuids(refOf(change), **guid, **guid); !ok) {
      return stepError("set GUID " + change.guid + " on " + vfText(change) +
                           (ok.error().err == EOPNOTSUPP ? " (the PF's driver cannot set VF GUIDs: mlx5 on kernel >= "
                                                           "5.6 can)"
                                                         : ""),
                       ok.error());
    }
  }
  if (*guid && !carries) {
    if (auto ok = steps.effects.rebind(device.pci); !ok) {
      return stepError("rebind " + change.pci + " to its driver so that GUID " + change.guid + " takes effect",
                       ok.error());
    }
  }
  if (settings.linkState) {
    const nl::VfLinkState want = plugin::toNl(*settings.linkState);
    const nl::VfLinkState was = info->linkState.value_or(nl::VfLinkState::kAuto);
    if (want != was) {
      change.oldLinkState = static_cast<std::uint32_t>(was);
      if (auto ok = steps.saveAhead(); !ok) {
        return ok.error().describe();
      }
      if (auto ok = steps.effects.setVfLinkState(refOf(change), want); !ok) {
        return stepError("set linkState = " + std::string(config::toString(*settings.linkState)) + " on " +
                             vfText(change),
                         ok.error());
      }
    }
  }
  return {};
}

std::string undoVfChange(ClaimEffects& effects, const std::string& claimUid, VfChange& change) {
  std::string errors;
  auto fail = [&](const std::string& e) { errors += (errors.empty() ? "" : "; ") + e; };
  if (change.oldLinkState) {
    auto ok = effects.setVfLinkState(refOf(change), static_cast<nl::VfLinkState>(*change.oldLinkState));
    if (ok || ok.error().err == ENODEV) {
      change.oldLinkState.reset();
    } else {
      fail(stepError("restore the link state of " + vfText(change), ok.error()));
    }
  }
  if (!change.guid.empty()) {
    auto info = effects.vfInfo(refOf(change));
    const auto guid = net::Guid::parse(change.guid);
    if (!info && info.error().err != ENODEV && info.error().err != ENOENT) {
      fail(stepError("read the GUIDs of " + vfText(change), info.error()));
    } else if (info && guid && (info->nodeGuid == guid || info->portGuid == guid)) {
      const auto node = plugin::writableGuid(net::Guid::parse(change.oldNodeGuid));
      const auto port = plugin::writableGuid(net::Guid::parse(change.oldPortGuid));
      auto set = effects.setVfGuids(refOf(change), node, port);
      auto pci = net::PciAddress::parse(change.pci);
      auto rebound = set && pci ? effects.rebind(*pci) : os::SysResult<void>{};
      if (!set) {
        fail(stepError("restore the GUIDs of " + vfText(change), set.error()));
      } else if (!rebound) {
        fail(stepError("rebind " + change.pci + " after restoring its GUIDs", rebound.error()));
      } else {
        change.guid.clear();
      }
    } else {
      change.guid.clear();  // the VF is gone, or no longer carries the claim's GUID
    }
  }
  if (change.guid.empty() && !change.guidPoolDir.empty()) {
    auto released = effects.releaseGuid(change.guidPoolDir, {claimUid, change.device}, kDraGuidNetwork);
    if (released) {
      change.guidPoolDir.clear();
    } else {
      fail("release the GUID of " + vfText(change) + " to guidPool " + change.guidPool + ": " + released.error().msg);
    }
  }
  return errors;
}

}  // namespace ibcni::dra
