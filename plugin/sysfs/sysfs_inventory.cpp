// SPDX-License-Identifier: Apache-2.0
#include "plugin/sysfs/sysfs_inventory.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <utility>

#include "plugin/sysfs/sysfs_paths.h"

namespace ibcni::sysfs {

namespace {

/// An RDMA device's name as the kernel gives them ("mlx5_0", "rxe0", "ibp59s0f1"): what may
/// reach a path.
bool isRdmaName(std::string_view name) {
  return !name.empty() && name.size() < 64 && name != "." && name != ".." &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '-' || c == '.';
         });
}

/// An attribute that a kernel may not show (older drivers, software devices): "" then.
os::SysResult<std::string> optionalAttribute(const std::string& path) {
  auto text = readSysfsFile(path);
  if (!text && (text.error().err == ENOENT || text.error().err == EINVAL)) {
    return std::string();
  }
  return text;
}

/// "fe80:0000:0000:0000:0002:c903:00a1:b2c3" as its prefix and interface halves.
std::pair<std::string, std::string> splitGid(std::string_view gid) {
  constexpr std::size_t kGidText = 39;  // 8 groups of 4 hex digits and 7 colons
  constexpr std::size_t kHalf = 19;
  if (gid.size() != kGidText || gid[kHalf] != ':') {
    return {};
  }
  return {std::string(gid.substr(0, kHalf)), std::string(gid.substr(kHalf + 1))};
}

}  // namespace

std::optional<std::uint32_t> parseRateGbps(std::string_view rate) {
  std::uint32_t whole = 0;
  auto [end, ec] = std::from_chars(rate.data(), rate.data() + rate.size(), whole);
  if (ec != std::errc() || end == rate.data()) {
    return std::nullopt;
  }
  std::string_view rest(end, static_cast<std::size_t>(rate.data() + rate.size() - end));
  if (rest.starts_with('.')) {
    rest.remove_prefix(1);
    while (!rest.empty() && rest.front() >= '0' && rest.front() <= '9') {
      rest.remove_prefix(1);
    }
  }
  if (!rest.starts_with(" Gb/sec")) {
    return std::nullopt;
  }
  return whole;
}

std::string parsePortState(std::string_view state) {
  auto colon = state.find(": ");
  if (colon == std::string_view::npos || colon == 0 ||
      !std::all_of(state.begin(), state.begin() + static_cast<std::ptrdiff_t>(colon),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return std::string(state);
  }
  return std::string(state.substr(colon + 2));
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> parseDevNumbers(std::string_view dev) {
  auto colon = dev.find(':');
  if (colon == std::string_view::npos) {
    return std::nullopt;
  }
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  auto [m, e1] = std::from_chars(dev.data(), dev.data() + colon, major);
  auto [n, e2] = std::from_chars(dev.data() + colon + 1, dev.data() + dev.size(), minor);
  if (e1 != std::errc() || m != dev.data() + colon || e2 != std::errc() || n != dev.data() + dev.size()) {
    return std::nullopt;
  }
  return std::pair(major, minor);
}

SysfsInventory::SysfsInventory(std::string root) : root_(std::move(root)) {}

os::SysResult<std::vector<std::string>> SysfsInventory::rdmaDeviceNames() {
  const std::string dir = root_ + "/class/infiniband";
  auto names = detail::listDirAt(AT_FDCWD, dir, dir);
  if (!names) {
    if (names.error().err == ENOENT) {
      return std::vector<std::string>{};
    }
    return std::unexpected(names.error());
  }
  std::erase_if(*names, [](const std::string& n) { return !isRdmaName(n); });
  std::sort(names->begin(), names->end());
  return names;
}

os::SysResult<RdmaPort> SysfsInventory::port(const std::string& portDir, std::uint32_t number) {
  RdmaPort p;
  p.number = number;
  auto linkLayer = optionalAttribute(portDir + "/link_layer");
  auto state = optionalAttribute(portDir + "/state");
  auto rate = optionalAttribute(portDir + "/rate");
  auto gid = optionalAttribute(portDir + "/gids/0");
  for (const auto* r : {&linkLayer, &state, &rate, &gid}) {
    if (!*r) {
      return std::unexpected(r->error());
    }
  }
  p.linkLayer = std::move(*linkLayer);
  p.state = parsePortState(*state);
  p.rateGbps = parseRateGbps(*rate);
  std::tie(p.subnetPrefix, p.portGuid) = splitGid(*gid);
  return p;
}

os::SysResult<RdmaDevice> SysfsInventory::rdmaDevice(const std::string& name) {
  if (!isRdmaName(name)) {
    return os::sysFail(EINVAL, "read RDMA device: invalid name '" + detail::excerpt(name) + "'");
  }
  const std::string dir = root_ + "/class/infiniband/" + name;
  RdmaDevice d;
  d.name = name;
  auto guid = readSysfsFile(dir + "/node_guid");
  if (!guid) {
    return std::unexpected(guid.error());
  }
  d.nodeGuid = std::move(*guid);
  // <pci>/infiniband/<name> for a device on a PCI function; devices/virtual/infiniband/<name> for
  // rxe and siw.
  if (auto self = detail::realPath(dir); self) {
    d.pci = detail::canonicalPci(detail::lastComponent(detail::parentPath(detail::parentPath(*self))));
  }
  auto entries = detail::listDirAt(AT_FDCWD, dir + "/ports", dir + "/ports");
  if (!entries) {
    return entries.error().err == ENOENT ? os::SysResult<RdmaDevice>(std::move(d))
                                         : std::unexpected(entries.error());
  }
  for (const auto& e : *entries) {
    std::uint32_t number = 0;
    auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), number);
    if (ec != std::errc() || end != e.data() + e.size()) {
      continue;
    }
    auto p = port(dir + "/ports/" + e, number);
    if (!p) {
      return std::unexpected(p.error());
    }
    d.ports.push_back(std::move(*p));
  }
  std::sort(d.ports.begin(), d.ports.end(), [](const auto& a, const auto& b) { return a.number < b.number; });
  return d;
}

os::SysResult<PciPlacement> SysfsInventory::placement(const net::PciAddress& pci) {
  if (!detail::canonicalPci(pci.text)) {
    return os::sysFail(EINVAL, "read placement: not a canonical PCI address '" + detail::excerpt(pci.text) + "'");
  }
  auto path = detail::realPath(root_ + "/bus/pci/devices/" + pci.text);
  if (!path) {
    return std::unexpected(path.error());
  }
  auto devices = detail::realPath(root_ + "/devices");
  if (!devices) {
    return std::unexpected(devices.error());
  }
  PciPlacement p;
  // <devices>/pci0000:3a/0000:3a:00.0/0000:3b:00.2: the first folder below devices/.
  if (path->starts_with(*devices + "/")) {
    std::string_view below = std::string_view(*path).substr(devices->size() + 1);
    std::string_view first = below.substr(0, below.find('/'));
    if (first.starts_with("pci")) {
      p.pcieRoot = std::string(first);
    }
  }
  auto numa = optionalAttribute(*path + "/numa_node");
  if (!numa) {
    return std::unexpected(numa.error());
  }
  std::int32_t node = -1;
  auto [end, ec] = std::from_chars(numa->data(), numa->data() + numa->size(), node);
  if (ec == std::errc() && end == numa->data() + numa->size() && node >= 0) {
    p.numaNode = node;
  }
  return p;
}

os::SysResult<std::uint32_t> SysfsInventory::mtu(const std::string& name) {
  if (!net::isValidIfName(name)) {
    return os::sysFail(EINVAL, "read MTU: invalid netdev name '" + detail::excerpt(name) + "'");
  }
  const std::string path = root_ + "/class/net/" + name + "/mtu";
  auto text = readSysfsFile(path);
  if (!text) {
    return std::unexpected(text.error());
  }
  std::uint32_t mtu = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), mtu);
  if (ec != std::errc() || end != text->data() + text->size()) {
    return os::sysFail(EINVAL, "parse " + path + ": '" + detail::excerpt(*text) + "' is not an MTU");
  }
  return mtu;
}

os::SysResult<std::optional<CharDevice>> SysfsInventory::charDevice(const std::string& cls, const std::string& name) {
  const std::string path = root_ + "/class/" + cls + "/" + name + "/dev";
  auto dev = optionalAttribute(path);
  if (!dev) {
    return std::unexpected(dev.error());
  }
  if (dev->empty()) {
    return std::nullopt;
  }
  auto numbers = parseDevNumbers(*dev);
  if (!numbers) {
    return os::sysFail(EINVAL, "parse " + path + ": '" + detail::excerpt(*dev) + "' is not MAJOR:MINOR");
  }
  return CharDevice{name, numbers->first, numbers->second};
}

os::SysResult<RdmaCharDevices> SysfsInventory::charDevices(const std::string& name) {
  if (!isRdmaName(name)) {
    return os::sysFail(EINVAL, "read RDMA character devices: invalid name '" + detail::excerpt(name) + "'");
  }
  RdmaCharDevices out;
  std::vector<std::pair<std::string, CharDevice>> mad;  // (port, device)
  for (const char* cls : {"infiniband_verbs", "infiniband_mad"}) {
    const std::string dir = root_ + "/class/" + cls;
    auto entries = detail::listDirAt(AT_FDCWD, dir, dir);
    if (!entries) {
      if (entries.error().err == ENOENT) {
        continue;  // ib_uverbs or ib_umad not loaded
      }
      return std::unexpected(entries.error());
    }
    std::sort(entries->begin(), entries->end());
    for (const auto& e : *entries) {
      // Only the devices: the kernel keeps a plain abi_version file beside them.
      if (!e.starts_with("uverbs") && !e.starts_with("umad") && !e.starts_with("issm")) {
        continue;
      }
      auto ibdev = optionalAttribute(dir + "/" + e + "/ibdev");
      if (!ibdev) {
        return std::unexpected(ibdev.error());
      }
      if (*ibdev != name || !isRdmaName(e)) {
        continue;
      }
      auto dev = charDevice(cls, e);
      if (!dev) {
        return std::unexpected(dev.error());
      }
      if (!*dev) {
        continue;
      }
      if (e.starts_with("uverbs")) {
        out.uverbs = **dev;
      } else if (e.starts_with("umad") || e.starts_with("issm")) {
        auto port = optionalAttribute(dir + "/" + e + "/port");
        if (!port) {
          return std::unexpected(port.error());
        }
        mad.emplace_back(*port, **dev);
      }
    }
  }
  std::stable_sort(mad.begin(), mad.end(), [](const auto& a, const auto& b) {
    return a.first.size() != b.first.size() ? a.first.size() < b.first.size() : a.first < b.first;
  });
  for (auto& [port, dev] : mad) {
    (dev.name.starts_with("umad") ? out.umad : out.issm).push_back(std::move(dev));
  }
  return out;
}

os::SysResult<std::optional<CharDevice>> SysfsInventory::rdmaCm() { return charDevice("misc", "rdma_cm"); }

}  // namespace ibcni::sysfs
