// SPDX-License-Identifier: Apache-2.0
#include "plugin/sysfs/sysfs_devices.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <charconv>
#include <string_view>
#include <utility>

#include "ibcni/os/unique_fd.h"

namespace ibcni::sysfs {

namespace {

using detail::canonicalPci;
using detail::excerpt;
using detail::lastComponent;
using detail::listDirAt;
using detail::openDirAt;
using detail::parentPath;
using detail::realPath;

/// True for "virtio<N>": the name the kernel gives every virtio device (drivers/virtio/virtio.c
/// "virtio%u"), which sits between a virtio-pci function and the virtio-net netdev.
bool isVirtioDeviceName(std::string_view name) {
  constexpr std::string_view kPrefix = "virtio";
  if (name.size() <= kPrefix.size() || !name.starts_with(kPrefix)) {
    return false;
  }
  return std::all_of(name.begin() + kPrefix.size(), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

/// Appends the netdev names of the "net" directory `rel` below `dirFd` to `out`. A missing
/// directory means no netdev: the kernel creates it with the first netdev of the device.
os::SysResult<void> appendNetdevs(int dirFd, const std::string& rel, const std::string& shown,
                                  std::vector<std::string>& out) {
  auto names = listDirAt(dirFd, rel, shown);
  if (!names) {
    if (names.error().err == ENOENT || names.error().err == ENOTDIR) {
      return {};
    }
    return std::unexpected(names.error());
  }
  for (auto& name : *names) {
    // The kernel only creates valid names here; anything else means this is not the tree we
    // think it is, and such a name must not reach a path or a netlink request.
    if (!net::isValidIfName(name)) {
      return os::sysFail(EINVAL, "list netdevs in " + shown + ": unexpected entry '" + name + "'");
    }
    out.push_back(std::move(name));
  }
  return {};
}

}  // namespace

SysfsDevices::SysfsDevices(std::string root) : root_(std::move(root)) {}

os::SysResult<std::vector<std::string>> SysfsDevices::netdevsOfPci(const net::PciAddress& pci) {
  // PciAddress is a plain struct: make sure its text cannot walk out of bus/pci/devices.
  if (!canonicalPci(pci.text)) {
    return os::sysFail(
        EINVAL, "list netdevs of PCI function '" + pci.text + "': not a canonical PCI address");
  }
  const std::string pciPath = root_ + "/bus/pci/devices/" + pci.text;
  // Every lookup below is relative to this fd, so all of them see the same function even if
  // it is hot-unplugged meanwhile.
  auto pciDir = openDirAt(AT_FDCWD, pciPath, pciPath);
  if (!pciDir) {
    return std::unexpected(pciDir.error());
  }

  std::vector<std::string> netdevs;
  auto plain = appendNetdevs(pciDir->get(), "net", pciPath + "/net", netdevs);
  if (!plain) {
    return std::unexpected(plain.error());
  }
  // virtio-net registers its netdev on the virtio device, a child of the PCI function
  // (<pci>/virtio3/net/eth0 on a VM); CNI host-device globs virtio*/net for the same reason.
  auto entries = listDirAt(pciDir->get(), ".", pciPath);
  if (!entries) {
    return std::unexpected(entries.error());
  }
  for (const auto& entry : *entries) {
    if (!isVirtioDeviceName(entry)) {
      continue;
    }
    auto virtio =
        appendNetdevs(pciDir->get(), entry + "/net", pciPath + "/" + entry + "/net", netdevs);
    if (!virtio) {
      return std::unexpected(virtio.error());
    }
  }
  std::sort(netdevs.begin(), netdevs.end());
  netdevs.erase(std::unique(netdevs.begin(), netdevs.end()), netdevs.end());
  return netdevs;
}

os::SysResult<std::optional<net::PciAddress>> SysfsDevices::pciOfNetdev(const std::string& name,
                                                                        int ifIndex) {
  if (!net::isValidIfName(name)) {
    return os::sysFail(EINVAL,
                       "look up PCI function of netdev '" + name + "': not an interface name");
  }
  const std::string netPath = root_ + "/class/net/" + name;

  auto indexPath = netPath + "/ifindex";
  auto indexText = readSysfsFile(indexPath);
  if (!indexText) {
    if (indexText.error().err == ENOENT || indexText.error().err == ENOTDIR) {
      return std::nullopt;  // no such netdev in the netns this sysfs was mounted in
    }
    return std::unexpected(indexText.error());
  }
  int sysfsIndex = 0;
  const char* first = indexText->data();
  const char* last = first + indexText->size();
  auto [end, ec] = std::from_chars(first, last, sysfsIndex);
  if (ec != std::errc{} || end != last || sysfsIndex <= 0) {
    return os::sysFail(EINVAL,
                       "parse " + indexPath + ": '" + excerpt(*indexText) + "' is not an ifindex");
  }
  // Sysfs shows the netns it was mounted in, and names are per netns: a different ifindex means
  // this entry is some other device that has the same name, so it says nothing about ours.
  if (sysfsIndex != ifIndex) {
    return std::nullopt;
  }

  auto device = realPath(netPath + "/device");
  if (!device) {
    if (device.error().err == ENOENT || device.error().err == ENOTDIR) {
      return std::nullopt;  // virtual netdevs (veth, bridge, lo) have no device
    }
    return std::unexpected(device.error());
  }
  auto devicesDir = realPath(root_ + "/devices");
  if (!devicesDir) {
    return std::unexpected(devicesDir.error());
  }
  std::string_view path = *device;
  // Only components below <root>/devices name devices; the root's own path may contain anything.
  if (!path.starts_with(*devicesDir + "/")) {
    return std::nullopt;
  }

  // The netdev's device is the PCI function itself (mlx5, most NICs), or a virtio<N> device
  // whose parent is the function (virtio-net). Walking further up is wrong: a USB NIC would
  // give its host controller, and an mlx5 SF (an auxiliary device below its PF) the PF.
  std::string_view component = lastComponent(path);
  if (isVirtioDeviceName(component)) {
    path = parentPath(path);
    if (path.size() <= devicesDir->size()) {
      return std::nullopt;
    }
    component = lastComponent(path);
  }
  return canonicalPci(component);
}

namespace {

/// Writes `text` to the sysfs attribute `path` in one write(2), as `echo` does.
os::SysResult<void> writeAttribute(const std::string& path, const std::string& text) {
  // O_APPEND: sysfs ignores the position; a plain file standing in for sysfs keeps every write.
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    return os::sysFail(errno, "open " + path);
  }
  os::UniqueFd owned(fd);
  const std::string line = text + "\n";
  ssize_t n = ::write(fd, line.data(), line.size());
  if (n < 0) {
    return os::sysFail(errno, "write \"" + text + "\" to " + path);
  }
  if (static_cast<std::size_t>(n) != line.size()) {
    return os::sysFail(EIO, "short write of \"" + text + "\" to " + path);
  }
  return {};
}

bool isValidRdmaName(std::string_view name) {
  return !name.empty() && name.size() < 64 && name != "." && name != ".." &&
         name.find('/') == std::string_view::npos;
}

// The virtfnN links of PF directory `pfDir`: N and the PCI address each names (the last component
// of the link's own text, "../0000:3b:01.2": one readlink, not a walk of the whole path, since a
// node's discovery reads them once per VF), by N. Links that cannot be read are left out.
os::SysResult<std::vector<std::pair<std::uint32_t, std::string>>> virtfnLinks(const std::string& pfDir) {
  auto entries = listDirAt(AT_FDCWD, pfDir, pfDir);
  if (!entries) {
    return std::unexpected(entries.error());
  }
  std::vector<std::pair<std::uint32_t, std::string>> out;
  for (const auto& e : *entries) {
    if (!e.starts_with("virtfn")) {
      continue;
    }
    std::uint32_t n = 0;
    auto digits = std::string_view(e).substr(6);
    auto [ptr, err] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (err != std::errc() || ptr != digits.data() + digits.size() || digits.empty()) {
      continue;
    }
    char target[PATH_MAX];
    const ssize_t len = ::readlink((pfDir + "/" + e).c_str(), target, sizeof target - 1);
    if (len > 0) {
      out.emplace_back(n, std::string(lastComponent(std::string_view(target, static_cast<std::size_t>(len)))));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

os::SysResult<PciFunction> SysfsDevices::pciFunction(const net::PciAddress& pci) {
  PciFunction f;
  f.address = pci;
  auto netdevs = netdevsOfPci(pci);
  if (!netdevs) {
    return std::unexpected(netdevs.error());
  }
  f.netdevs = std::move(*netdevs);
  const std::string dir = root_ + "/bus/pci/devices/" + pci.text;

  if (auto pf = realPath(dir + "/physfn"); pf) {
    auto pfPci = canonicalPci(lastComponent(*pf));
    if (!pfPci) {
      return os::sysFail(EINVAL, "read " + dir + "/physfn: not a PCI function: " + *pf);
    }
    f.physfn = *pfPci;
    // The VF's number is N of the PF's virtfnN link that names this function.
    auto siblings = virtfnLinks(root_ + "/bus/pci/devices/" + pfPci->text);
    if (!siblings) {
      return std::unexpected(siblings.error());
    }
    for (const auto& [n, target] : *siblings) {
      if (target == pci.text) {
        f.vfIndex = n;
        break;
      }
    }
    if (!f.vfIndex) {
      return os::sysFail(ENOENT, "find VF " + pci.text + " among the virtfn links of its PF " + pfPci->text);
    }
  } else if (pf.error().err != ENOENT) {
    return std::unexpected(pf.error());
  } else {
    auto vfs = virtfnLinks(dir);
    if (!vfs) {
      return std::unexpected(vfs.error());
    }
    for (const auto& [n, target] : *vfs) {
      if (auto vfPci = canonicalPci(target); vfPci) {
        f.vfs.push_back(VirtFn{n, *vfPci});
      }
    }
  }

  if (auto drv = realPath(dir + "/driver"); drv) {
    f.driver = std::string(lastComponent(*drv));
  } else if (drv.error().err != ENOENT) {
    return std::unexpected(drv.error());
  }

  auto rdma = listDirAt(AT_FDCWD, dir + "/infiniband", dir + "/infiniband");
  if (rdma) {
    for (auto& name : *rdma) {
      if (isValidRdmaName(name)) {
        f.rdmaDevices.push_back(std::move(name));
      }
    }
    std::sort(f.rdmaDevices.begin(), f.rdmaDevices.end());
  } else if (rdma.error().err != ENOENT && rdma.error().err != ENOTDIR) {
    return std::unexpected(rdma.error());
  }
  return f;
}

os::SysResult<std::vector<net::Pkey>> SysfsDevices::pkeys(const std::string& rdmaDevice, std::uint32_t port) {
  if (!isValidRdmaName(rdmaDevice)) {
    return os::sysFail(EINVAL, "read pkeys: invalid RDMA device name '" + excerpt(rdmaDevice) + "'");
  }
  const std::string dir = root_ + "/class/infiniband/" + rdmaDevice + "/ports/" + std::to_string(port) + "/pkeys";
  auto entries = listDirAt(AT_FDCWD, dir, dir);
  if (!entries) {
    return std::unexpected(entries.error());
  }
  std::vector<std::pair<std::uint32_t, std::uint16_t>> table;
  for (const auto& e : *entries) {
    std::uint32_t index = 0;
    auto [p, err] = std::from_chars(e.data(), e.data() + e.size(), index);
    if (err != std::errc() || p != e.data() + e.size()) {
      continue;
    }
    auto text = readSysfsFile(dir + "/" + e);
    if (!text) {
      return std::unexpected(text.error());
    }
    std::string_view v = *text;
    if (v.starts_with("0x")) {
      v.remove_prefix(2);
    }
    std::uint32_t key = 0;
    auto [q, err2] = std::from_chars(v.data(), v.data() + v.size(), key, 16);
    if (err2 != std::errc() || q != v.data() + v.size() || key > 0xffff) {
      return os::sysFail(EINVAL, "read " + dir + "/" + e + ": not a pkey: '" + excerpt(*text) + "'");
    }
    if (net::Pkey::fromWire(static_cast<std::uint16_t>(key)).valid()) {
      table.emplace_back(index, static_cast<std::uint16_t>(key));
    }
  }
  std::sort(table.begin(), table.end());
  std::vector<net::Pkey> out;
  out.reserve(table.size());
  for (const auto& [i, k] : table) {
    out.push_back(net::Pkey::fromWire(k));
  }
  return out;
}

os::SysResult<std::vector<std::string>> SysfsDevices::netdevsOfRdmaPort(const std::string& rdmaDevice,
                                                                        std::uint32_t port) {
  if (!isValidRdmaName(rdmaDevice)) {
    return os::sysFail(EINVAL, "find netdevs: invalid RDMA device name '" + excerpt(rdmaDevice) + "'");
  }
  auto dir = realPath(root_ + "/class/infiniband/" + rdmaDevice);
  if (!dir) {
    return std::unexpected(dir.error());
  }
  // <device>/infiniband/<rdma>: the netdevs are in <device>/net.
  const std::string device(parentPath(parentPath(*dir)));
  std::vector<std::string> all;
  if (auto r = appendNetdevs(AT_FDCWD, device + "/net", device + "/net", all); !r) {
    return std::unexpected(r.error());
  }
  std::vector<std::string> out;
  for (auto& name : all) {
    std::uint32_t devPort = 0;
    if (auto text = readSysfsFile(device + "/net/" + name + "/dev_port"); text) {
      auto [p, err] = std::from_chars(text->data(), text->data() + text->size(), devPort);
      if (err != std::errc() || p != text->data() + text->size()) {
        return os::sysFail(EINVAL, "read " + device + "/net/" + name + "/dev_port: '" + excerpt(*text) + "'");
      }
    }
    if (devPort + 1 == port) {
      out.push_back(std::move(name));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

os::SysResult<std::string> SysfsDevices::driverOf(const net::PciAddress& pci) {
  const std::string dir = root_ + "/bus/pci/devices/" + pci.text;
  auto drv = realPath(dir + "/driver");
  if (drv) {
    return std::string(lastComponent(*drv));
  }
  if (drv.error().err != ENOENT) {
    return std::unexpected(drv.error());
  }
  if (::access(dir.c_str(), F_OK) != 0) {
    return os::sysFail(ENOENT, "no PCI function " + pci.text);
  }
  return std::string();
}

os::SysResult<void> SysfsDevices::rebind(const net::PciAddress& pci) {
  const std::string dir = root_ + "/bus/pci/devices/" + pci.text;
  auto drv = realPath(dir + "/driver");
  if (!drv) {
    if (drv.error().err == ENOENT) {
      return os::sysFail(EINVAL, "rebind " + pci.text + ": it is bound to no driver");
    }
    return std::unexpected(drv.error());
  }
  const std::string driver(lastComponent(*drv));
  const std::string driverDir = root_ + "/bus/pci/drivers/" + driver;
  if (auto r = writeAttribute(driverDir + "/unbind", pci.text); !r) {
    return r;
  }
  return writeAttribute(driverDir + "/bind", pci.text);
}

}  // namespace ibcni::sysfs
