// SPDX-License-Identifier: Apache-2.0
// The VF's look-ups (sriov_vf_lookup.h), and the two sriov_vf.h exports that only read the host:
// the GUID inside an IPoIB address and the wait for a VF's netdev to come back.
#include "plugin/modes/sriov_vf_lookup.h"

#include <cerrno>
#include <chrono>
#include <thread>

#include "lib/log/log.h"
#include "plugin/modes/sriov_vf.h"

namespace ibcni::plugin {

nl::VfLinkState toNl(config::VfLinkState s) {
  switch (s) {
    case config::VfLinkState::kEnable:
      return nl::VfLinkState::kEnable;
    case config::VfLinkState::kDisable:
      return nl::VfLinkState::kDisable;
    case config::VfLinkState::kAuto:
      break;
  }
  return nl::VfLinkState::kAuto;
}

namespace {

using cni::Errc;
using Clock = std::chrono::steady_clock;

}  // namespace

std::string vfName(const net::PciAddress& pfPci, std::uint32_t vf, const std::string& pfName) {
  return "VF " + std::to_string(vf) + " of PF " + pfPci.text + (pfName.empty() ? "" : " (" + pfName + ")");
}

VfGuids currentGuids(const HostDevice& d) {
  VfGuids g;
  if (d.vf && d.vf->info) {
    g.node = d.vf->info->nodeGuid;
    g.port = d.vf->info->portGuid;
  }
  if (!g.port) {
    g.port = guidOfIpoibAddress(d.link.mac);
  }
  if (!g.node) {
    g.node = g.port;
  }
  return g;
}

std::optional<RdmaPlace> findRdma(const ModeContext& ctx, const sysfs::PciFunction* fn, const nl::Link& link) {
  auto ports = ctx.deps.rdma.ports(ctx.host);
  if (!ports) {
    log::debug("RDMA netlink: {}", ports.error().describe());
  }
  if (ports && link.index != 0) {
    for (const auto& p : *ports) {
      if (p.netdevIndex == link.index) {
        return RdmaPlace{p.deviceName, p.deviceIndex, true, p.port, false};
      }
    }
  }
  if (fn == nullptr || fn->rdmaDevices.empty()) {
    return std::nullopt;
  }
  if (fn->rdmaDevices.size() > 1) {
    log::warn("PCI function {} has several RDMA devices; using {}", fn->address.text, fn->rdmaDevices.front());
  }
  RdmaPlace place{fn->rdmaDevices.front(), 0, false, 1, false};
  if (ports) {
    for (const auto& p : *ports) {
      if (p.deviceName == place.name) {
        place.index = p.deviceIndex;
        place.visible = true;
        place.port = p.port;
        break;
      }
    }
  }
  return place;
}

cni::Result<sysfs::PciFunction> deviceIdFunction(const ModeContext& ctx, const net::PciAddress& deviceId) {
  const std::string subject = "deviceID = \"" + deviceId.text + "\"";
  auto found = ctx.deps.devices.pciFunction(deviceId);
  if (!found) {
    if (found.error().err == ENOENT) {
      return cni::fail(cni::Errc::kDeviceNotFound,
                       subject + ": no such PCI function on this node; check the device plugin resource "
                                 "(resourceName) that handed it out",
                       found.error().describe());
    }
    return std::unexpected(sysError(cni::Errc::kDeviceNotFound, subject + ": cannot read sysfs", found.error()));
  }
  return std::move(*found);
}

std::optional<nl::Link> pfLinkOf(const ModeContext& ctx, const net::PciAddress& pfPci) {
  auto names = ctx.deps.devices.netdevsOfPci(pfPci);
  if (!names) {
    return std::nullopt;
  }
  for (const auto& n : *names) {
    if (auto l = ctx.deps.netlink.linkByName(ctx.host, n); l) {
      return *l;
    }
  }
  return std::nullopt;
}

std::optional<net::Guid> guidOfIpoibAddress(const net::HwAddress& mac) {
  // "aa:bb:...": 20 octets of 3 characters (the last without ':'); the GUID is the last 8.
  if (mac.length != 20 || mac.text.size() != 59) {
    return std::nullopt;
  }
  return net::Guid::parse(std::string_view(mac.text).substr(12 * 3));
}

cni::Result<nl::Link> waitForNetdev(const ModeContext& ctx, const net::PciAddress& pci, const std::string& preferName) {
  // A new netdev may be renamed by udev right after it appears: take it once it has the name it
  // had before, or once its name has stayed the same for a while.
  constexpr auto kStable = std::chrono::milliseconds(300);
  const auto deadline = Clock::now() + ctx.deps.settleTimeout;
  std::optional<nl::Link> seen;
  auto seenSince = Clock::now();
  for (;;) {
    if (auto names = ctx.deps.devices.netdevsOfPci(pci); names && !names->empty()) {
      if (auto l = ctx.deps.netlink.linkByName(ctx.host, names->front()); l) {
        if (l->name == preferName || preferName.empty()) {
          return *l;
        }
        if (!seen || seen->name != l->name || seen->index != l->index) {
          seen = *l;
          seenSince = Clock::now();
        } else if (Clock::now() - seenSince >= kStable) {
          return *l;
        }
      }
    }
    if (Clock::now() >= deadline) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (seen) {
    return *seen;
  }
  return cni::fail(Errc::kDeviceNotFound,
                   "PCI function " + pci.text + " has no netdev " +
                       std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(ctx.deps.settleTimeout).count()) +
                       " ms after its driver was rebound or its RDMA device moved");
}

}  // namespace ibcni::plugin
