// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/ib_devices.h"

#include <algorithm>
#include <cerrno>
#include <set>
#include <utility>

namespace ibcni::dra {

namespace {

constexpr std::string_view kInfiniBand = "InfiniBand";
constexpr std::string_view kZeroGuid = "0000:0000:0000:0000";

/// A lookup that found nothing because the device went away meanwhile (a VF removed, a driver
/// rebound): the device is left out of this listing, the next one sees the new state.
template <class T>
bool gone(const os::SysResult<T>& r) {
  return !r && (r.error().err == ENOENT || r.error().err == ENODEV);
}

/// The parts of a device that come from its RDMA device's port.
void takePort(IbDevice& d, const sysfs::RdmaDevice& rdma, const sysfs::RdmaPort& port) {
  d.rdmaDevice = rdma.name;
  d.port = port.number;
  d.linkLayer = port.linkLayer;
  d.portState = port.state;
  d.rateGbps = port.rateGbps;
  d.nodeGuid = rdma.nodeGuid;
  d.portGuid = port.portGuid;
}

os::SysResult<void> takeNetdev(IbDevice& d, sysfs::IbInventory& inventory, std::string netdev) {
  d.ifName = std::move(netdev);
  if (d.ifName.empty()) {
    return {};
  }
  auto mtu = inventory.mtu(d.ifName);
  if (!mtu && !gone(mtu)) {
    return std::unexpected(mtu.error());
  }
  d.mtu = mtu ? std::optional(*mtu) : std::nullopt;
  return {};
}

/// The PF's InfiniBand port a VF inherits its link from: the first.
const sysfs::RdmaPort* firstInfiniBandPort(const sysfs::RdmaDevice& pf) {
  auto it = std::find_if(pf.ports.begin(), pf.ports.end(),
                         [](const sysfs::RdmaPort& p) { return p.linkLayer == kInfiniBand; });
  return it == pf.ports.end() ? nullptr : &*it;
}

/// Port `port` of PF `pf` as an IPoIB port device; nullopt when the port has no netdev.
os::SysResult<std::optional<IbDevice>> portDevice(sysfs::Devices& devices, sysfs::IbInventory& inventory,
                                                  const sysfs::RdmaDevice& pf, const sysfs::PciFunction& fn,
                                                  const sysfs::PciPlacement& placement,
                                                  const sysfs::RdmaPort& port) {
  auto netdevs = devices.netdevsOfRdmaPort(pf.name, port.number);
  if (gone(netdevs) || (netdevs && netdevs->empty())) {
    return std::nullopt;
  }
  if (!netdevs) {
    return std::unexpected(netdevs.error());
  }
  IbDevice d;
  d.kind = DeviceKind::kIpoibPort;
  d.name = deviceName(d.kind, fn.address, port.number);
  d.pci = d.pfPci = fn.address;
  d.driver = fn.driver;
  d.placement = placement;
  takePort(d, pf, port);
  d.pfName = netdevs->front();
  if (auto r = takeNetdev(d, inventory, netdevs->front()); !r) {
    return std::unexpected(r.error());
  }
  d.guidSet = true;
  return d;
}

/// VF `vf` of PF `pf`; nullopt when it went away.
/// `pfLink` holds what a VF inherits from its PF: the PF, its netdev and its port's link.
os::SysResult<std::optional<IbDevice>> vfDevice(sysfs::Devices& devices, sysfs::IbInventory& inventory,
                                                const IbDevice& pfLink, const sysfs::VirtFn& vf) {
  auto fn = devices.pciFunction(vf.address);
  auto placement = fn ? inventory.placement(vf.address) : os::SysResult<sysfs::PciPlacement>();
  if (gone(fn) || gone(placement)) {
    return std::nullopt;
  }
  if (!fn || !placement) {
    return std::unexpected(!fn ? fn.error() : placement.error());
  }
  IbDevice d;
  d.kind = DeviceKind::kVf;
  d.name = deviceName(d.kind, vf.address);
  d.pci = vf.address;
  d.driver = fn->driver;
  d.pfPci = pfLink.pfPci;
  d.pfName = pfLink.pfName;
  d.vfIndex = vf.index;
  d.placement = std::move(*placement);
  // Without an RDMA device of its own (vfio-pci, unbound) the VF's link is its PF port's.
  d.linkLayer = pfLink.linkLayer;
  d.portState = pfLink.portState;
  d.rateGbps = pfLink.rateGbps;
  if (!fn->rdmaDevices.empty()) {
    auto rdma = inventory.rdmaDevice(fn->rdmaDevices.front());
    if (!rdma && !gone(rdma)) {
      return std::unexpected(rdma.error());
    }
    if (rdma && !rdma->ports.empty()) {
      takePort(d, *rdma, rdma->ports.front());
    }
  }
  if (auto r = takeNetdev(d, inventory, fn->netdevs.empty() ? std::string() : fn->netdevs.front()); !r) {
    return std::unexpected(r.error());
  }
  d.guidSet = !d.nodeGuid.empty() && d.nodeGuid != kZeroGuid;
  return d;
}

/// The devices of PF `pf`: its IPoIB ports, then its VFs (which take their link from its first
/// InfiniBand port). Nothing when no port is InfiniBand.
os::SysResult<void> appendPf(sysfs::Devices& devices, sysfs::IbInventory& inventory, const sysfs::RdmaDevice& pf,
                             const sysfs::PciFunction& fn, const std::set<std::string>* only,
                             std::vector<IbDevice>& out) {
  const sysfs::RdmaPort* first = firstInfiniBandPort(pf);
  if (first == nullptr) {
    return {};
  }
  auto placement = inventory.placement(fn.address);
  if (!placement) {
    return gone(placement) ? os::SysResult<void>() : std::unexpected(placement.error());
  }
  IbDevice pfLink;
  pfLink.pfPci = fn.address;
  takePort(pfLink, pf, *first);
  for (const auto& port : pf.ports) {
    if (port.linkLayer != kInfiniBand) {
      continue;
    }
    auto d = portDevice(devices, inventory, pf, fn, *placement, port);
    if (!d) {
      return std::unexpected(d.error());
    }
    if (*d) {
      if (&port == first) {
        pfLink.pfName = (*d)->pfName;
      }
      if (only == nullptr || only->contains((*d)->name)) {
        out.push_back(std::move(**d));
      }
    }
  }
  for (const auto& vf : fn.vfs) {
    if (only != nullptr && !only->contains(deviceName(DeviceKind::kVf, vf.address))) {
      continue;  // not asked for: its sysfs is not read
    }
    auto d = vfDevice(devices, inventory, pfLink, vf);
    if (!d) {
      return std::unexpected(d.error());
    }
    if (*d) {
      out.push_back(std::move(**d));
    }
  }
  return {};
}

}  // namespace

const char* kindName(DeviceKind kind) { return kind == DeviceKind::kVf ? "vf" : "ipoib-port"; }

std::string deviceName(DeviceKind kind, const net::PciAddress& pci, std::uint32_t port) {
  std::string name = kind == DeviceKind::kVf ? "vf-" : "ipoib-";
  for (char c : pci.text) {
    name += (c == ':' || c == '.') ? '-' : c;
  }
  if (kind == DeviceKind::kIpoibPort) {
    name += "-p" + std::to_string(port);
  }
  return name;
}

os::SysResult<std::vector<IbDevice>> discoverDevices(sysfs::Devices& devices, sysfs::IbInventory& inventory) {
  return discoverDevices(devices, inventory, nullptr);
}

os::SysResult<std::vector<IbDevice>> discoverDevices(sysfs::Devices& devices, sysfs::IbInventory& inventory,
                                                     const std::set<std::string>* only) {
  auto names = inventory.rdmaDeviceNames();
  if (!names) {
    return std::unexpected(names.error());
  }
  std::vector<IbDevice> out;
  std::set<std::string> pfsSeen;
  for (const auto& name : *names) {
    auto rdma = inventory.rdmaDevice(name);
    if (gone(rdma)) {
      continue;
    }
    if (!rdma) {
      return std::unexpected(rdma.error());
    }
    if (!rdma->pci) {
      continue;  // a software device (rxe, siw): nothing to hand out
    }
    auto fn = devices.pciFunction(*rdma->pci);
    if (gone(fn)) {
      continue;
    }
    if (!fn) {
      return std::unexpected(fn.error());
    }
    if (fn->physfn || !pfsSeen.insert(fn->address.text).second) {
      continue;  // a VF is listed with its PF
    }
    if (auto r = appendPf(devices, inventory, *rdma, *fn, only, out); !r) {
      return std::unexpected(r.error());
    }
  }
  std::sort(out.begin(), out.end(), [](const IbDevice& a, const IbDevice& b) { return a.name < b.name; });
  return out;
}

}  // namespace ibcni::dra
