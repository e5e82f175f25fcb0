// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>
#include <iterator>

#include "ibcni/net/ip.h"

namespace ibcni::testing {

/// A sysfs look-alike built as a real directory tree in a fresh temporary directory (removed by
/// the destructor), for production code that takes a sysfs root, in the spirit of libibverbs'
/// SYSFS_PATH and ib-sriov-cni's pkg/utils/testing.go. Layout, as the kernel makes it:
///
///   devices/pci<dddd>:00/<pci>/                   a PCI function (optionally below a bridge)
///     subsystem -> bus/pci, driver -> bus/pci/drivers/<drv>
///     net/<netdev>/{ifindex, device -> <pci>, subsystem -> class/net}
///     virtio<N>/net/<netdev>/...                  virtio-net: the netdev is on the virtio device
///     <aux>/net/<netdev>/...                      auxiliary device (mlx5 SF) below the function
///     infiniband/<rdma>/                          RDMA device of the function
///     sriov_numvfs, sriov_totalvfs, virtfn<N> -> <vf>     on a PF
///     physfn -> <pf>                                      on a VF
///   devices/virtual/net/<netdev>/ifindex          veth, bridge, ...: no device link
///   bus/pci/devices/<pci> -> the function         class/net/<netdev> -> the netdev dir
///   class/infiniband/<rdma> -> its dir            bus/pci/drivers/<drv>/<pci> -> the function
///
/// Every symlink is relative, as in sysfs. The builder methods return *this for chaining. Test
/// code must not throw across into the code under test, so a failed step is recorded instead:
/// the first error is kept in error(), later steps do nothing, and tests check ok() once.
class FakeSysfsTree {
 public:
  /// Pass as ifIndex (to any add*Netdev, addPf, addVf) to let the tree pick an unused index, from
  /// 100 up; ifIndexOf() tells which.
  static constexpr int kAutoIfIndex = 0;

  /// Creates $TMPDIR/ibcni-sysfs-XXXXXX (TMPDIR defaults to /tmp) with an empty sysfs below it.
  FakeSysfsTree() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ibcni-sysfs-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      fail("mkdtemp " + pattern + ": " + std::generic_category().message(errno));
      return;
    }
    base_ = pattern;
    root_ = base_ + "/sys";
    for (const char* dir :
         {"devices/virtual/net", "bus/pci/devices", "bus/pci/drivers", "bus/virtio/drivers",
          "bus/auxiliary/devices", "class/net", "class/infiniband"}) {
      makeDir(dir);
    }
  }

  ~FakeSysfsTree() {
    if (!base_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(base_, ec);  // best effort: a leftover temp dir harms nobody
    }
  }

  FakeSysfsTree(const FakeSysfsTree&) = delete;
  FakeSysfsTree& operator=(const FakeSysfsTree&) = delete;
  FakeSysfsTree(FakeSysfsTree&&) = delete;
  FakeSysfsTree& operator=(FakeSysfsTree&&) = delete;

  /// The sysfs root to hand to production code ("<tmp>/sys").
  [[nodiscard]] const std::string& root() const noexcept { return root_; }
  /// True when every step so far succeeded.
  [[nodiscard]] bool ok() const noexcept { return error_.empty(); }
  /// The first failed step, empty when ok().
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

  /// Adds PCI function `pci` (canonical "dddd:bb:dd.f") with no driver and no netdev. With
  /// `parentPci` it sits below that function (a bridge), otherwise on the host bridge
  /// pci<dddd>:00. Adding an existing function again does nothing.
  FakeSysfsTree& addPciFunction(std::string_view pci, std::string_view parentPci = {}) {
    if (!ok() || pciDirs_.contains(std::string(pci))) {
      return *this;
    }
    if (!isCanonicalPci(pci)) {
      return fail("not a canonical PCI address: '" + std::string(pci) + "'");
    }
    std::string dir;
    if (parentPci.empty()) {
      dir = "devices/pci" + std::string(pci.substr(0, 4)) + ":00/" + std::string(pci);
    } else {
      auto parent = pciDirs_.find(std::string(parentPci));
      if (parent == pciDirs_.end()) {
        return fail("parent PCI function " + std::string(parentPci) + " was not added");
      }
      dir = parent->second + "/" + std::string(pci);
    }
    pciDirs_.emplace(pci, dir);
    return makeDir(dir)
        .link(dir + "/subsystem", "bus/pci")
        .link("bus/pci/devices/" + std::string(pci), dir);
  }

  /// Adds netdev `netdev` to PCI function `pci` (added when missing): <pci>/net/<netdev>.
  FakeSysfsTree& addPciNetdev(std::string_view pci, std::string_view netdev, int ifIndex) {
    addPciFunction(pci);
    return ok() ? addNetdevBelow(pciDirs_.at(std::string(pci)), netdev, ifIndex) : *this;
  }

  /// Adds a virtio-net netdev: virtio device virtio<virtioIndex> below PCI function `pci` (added
  /// when missing, bound to virtio-pci) carrying <netdev>, as QEMU's virtio-net-pci shows.
  FakeSysfsTree& addVirtioNetdev(std::string_view pci, int virtioIndex, std::string_view netdev,
                                 int ifIndex) {
    const std::string name = "virtio" + std::to_string(virtioIndex);
    addPciFunction(pci).setDriver(pci, "virtio-pci");
    if (!ok()) {
      return *this;
    }
    const std::string dir = pciDirs_.at(std::string(pci)) + "/" + name;
    return makeDir(dir)
        .link(dir + "/subsystem", "bus/virtio")
        .makeDir("bus/virtio/drivers/virtio_net")
        .link(dir + "/driver", "bus/virtio/drivers/virtio_net")
        .addNetdevBelow(dir, netdev, ifIndex);
  }

  /// Adds an auxiliary device `auxDevice` (e.g. "mlx5_core.sf.4") below PCI function `pci`
  /// (added when missing) carrying netdev `netdev`: how mlx5 scalable functions appear.
  FakeSysfsTree& addAuxiliaryNetdev(std::string_view pci, std::string_view auxDevice,
                                    std::string_view netdev, int ifIndex) {
    addPciFunction(pci);
    if (!ok()) {
      return *this;
    }
    const std::string dir = pciDirs_.at(std::string(pci)) + "/" + std::string(auxDevice);
    return makeDir(dir)
        .link(dir + "/subsystem", "bus/auxiliary")
        .link("bus/auxiliary/devices/" + std::string(auxDevice), dir)
        .addNetdevBelow(dir, netdev, ifIndex);
  }

  /// Adds a netdev with no device (veth, bridge, lo): devices/virtual/net/<netdev>.
  FakeSysfsTree& addVirtualNetdev(std::string_view netdev, int ifIndex) {
    if (!ok()) {
      return *this;
    }
    const std::string dir = "devices/virtual/net/" + std::string(netdev);
    return registerNetdev(netdev, dir, ifIndex);
  }

  /// Adds RDMA device `rdmaDevice` to PCI function `pci`: <pci>/infiniband/<rdmaDevice> and
  /// class/infiniband/<rdmaDevice>.
  FakeSysfsTree& addRdmaDevice(std::string_view pci, std::string_view rdmaDevice) {
    addPciFunction(pci);
    if (!ok()) {
      return *this;
    }
    const std::string dir =
        pciDirs_.at(std::string(pci)) + "/infiniband/" + std::string(rdmaDevice);
    return makeDir(dir).link("class/infiniband/" + std::string(rdmaDevice), dir);
  }

  /// Removes RDMA device `rdmaDevice` of PCI function `pci` (its directory, its pkey tables and
  /// its class/infiniband link), as unbinding the function's driver does. Missing is fine.
  FakeSysfsTree& removeRdmaDevice(std::string_view pci, std::string_view rdmaDevice) {
    auto it = pciDirs_.find(std::string(pci));
    if (!ok() || it == pciDirs_.end()) {
      return *this;
    }
    removePath("class/infiniband/" + std::string(rdmaDevice));
    return removePath(it->second + "/infiniband/" + std::string(rdmaDevice));
  }

  /// Binds PCI function `pci` to `driver` (<pci>/driver and bus/pci/drivers/<driver>/<pci>),
  /// replacing any previous binding; an empty `driver` leaves it unbound.
  FakeSysfsTree& setDriver(std::string_view pci, std::string_view driver) {
    if (!ok()) {
      return *this;
    }
    auto it = pciDirs_.find(std::string(pci));
    if (it == pciDirs_.end()) {
      return fail("setDriver: PCI function " + std::string(pci) + " was not added");
    }
    const std::string link = it->second + "/driver";
    std::error_code ec;
    auto old = std::filesystem::read_symlink(abs(link), ec);
    if (!ec) {
      removePath("bus/pci/drivers/" + old.filename().string() + "/" + std::string(pci));
      removePath(link);
    }
    if (driver.empty()) {
      return *this;
    }
    const std::string driverDir = "bus/pci/drivers/" + std::string(driver);
    makeDir(driverDir);
    // The driver's bind and unbind attributes: plain files here, so every write stays readable
    // (SysfsDevices appends), and driverWrites() tells what was written.
    for (const char* attr : {"/bind", "/unbind"}) {
      std::error_code exists;
      if (!std::filesystem::exists(abs(driverDir + attr), exists)) {
        writeFile(driverDir + attr, "");
      }
    }
    return this->link(link, driverDir).link(driverDir + "/" + std::string(pci), it->second);
  }

  /// What was written to driver `driver`'s `attr` file ("bind" or "unbind"), empty when nothing.
  [[nodiscard]] std::string driverWrites(std::string_view driver, std::string_view attr) const {
    std::ifstream in(abs("bus/pci/drivers/" + std::string(driver) + "/" + std::string(attr)), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  /// Fills port `port`'s pkey table of RDMA device `rdmaDevice` (added before):
  /// <dev>/ports/<port>/pkeys/<i> = entries[i] ("0xffff", "0x0000" for an empty slot).
  FakeSysfsTree& setPkeys(std::string_view rdmaDevice, int port, const std::vector<std::string>& entries) {
    const std::string dir =
        "class/infiniband/" + std::string(rdmaDevice) + "/ports/" + std::to_string(port) + "/pkeys";
    removePath(dir);
    makeDir(dir);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      writeFile(dir + "/" + std::to_string(i), entries[i] + "\n");
    }
    return *this;
  }

  /// Writes port `port` of RDMA device `rdmaDevice` as the kernel shows it: link_layer, state
  /// ("4: ACTIVE"), rate ("100 Gb/sec (4X EDR)") and GID 0 ("fe80:0000:0000:0000:<port GUID>").
  FakeSysfsTree& setRdmaPort(std::string_view rdmaDevice, int port, std::string_view linkLayer,
                             std::string_view state, std::string_view rate, std::string_view gid0) {
    const std::string dir =
        "class/infiniband/" + std::string(rdmaDevice) + "/ports/" + std::to_string(port);
    return writeFile(dir + "/link_layer", std::string(linkLayer) + "\n")
        .writeFile(dir + "/state", std::string(state) + "\n")
        .writeFile(dir + "/rate", std::string(rate) + "\n")
        .writeFile(dir + "/gids/0", std::string(gid0) + "\n");
  }

  /// Writes RDMA device `rdmaDevice`'s node_guid ("0002:c903:00a1:b2c2").
  FakeSysfsTree& setNodeGuid(std::string_view rdmaDevice, std::string_view guid) {
    return writeFile("class/infiniband/" + std::string(rdmaDevice) + "/node_guid", std::string(guid) + "\n");
  }

  /// Writes PCI function `pci`'s numa_node (-1: none, as the kernel says on one-node machines).
  FakeSysfsTree& setNumaNode(std::string_view pci, int node) {
    auto it = pciDirs_.find(std::string(pci));
    if (!ok() || it == pciDirs_.end()) {
      return ok() ? fail("setNumaNode: PCI function " + std::string(pci) + " was not added") : *this;
    }
    return writeFile(it->second + "/numa_node", std::to_string(node) + "\n");
  }

  /// Writes netdev `netdev`'s mtu.
  FakeSysfsTree& setMtu(std::string_view netdev, int mtu) {
    auto it = netdevDirs_.find(std::string(netdev));
    if (!ok() || it == netdevDirs_.end()) {
      return ok() ? fail("setMtu: netdev " + std::string(netdev) + " was not added") : *this;
    }
    return writeFile(it->second + "/mtu", std::to_string(mtu) + "\n");
  }

  /// Adds character device <class>/<name> ("infiniband_verbs", "uverbs3") with dev MAJOR:MINOR, of
  /// RDMA device `ibdev` (empty: none, as misc/rdma_cm) and port `port` (0: no port file).
  FakeSysfsTree& addCharDevice(std::string_view cls, std::string_view name, std::string_view ibdev, int port,
                               int major, int minor) {
    const std::string dir = "class/" + std::string(cls) + "/" + std::string(name);
    if (cls.starts_with("infiniband_")) {  // as the kernel has it beside the devices
      writeFile("class/" + std::string(cls) + "/abi_version", "6\n");
    }
    writeFile(dir + "/dev", std::to_string(major) + ":" + std::to_string(minor) + "\n");
    if (!ibdev.empty()) {
      writeFile(dir + "/ibdev", std::string(ibdev) + "\n");
    }
    return port > 0 ? writeFile(dir + "/port", std::to_string(port) + "\n") : *this;
  }

  /// Adds an SR-IOV physical function bound to mlx5_core with sriov_numvfs = sriov_totalvfs =
  /// `numVfs`, netdev `netdev` and RDMA device `rdmaDevice` (each skipped when empty).
  FakeSysfsTree& addPf(std::string_view pci, std::string_view netdev, std::string_view rdmaDevice,
                       int numVfs, int ifIndex = kAutoIfIndex) {
    addPciFunction(pci).setDriver(pci, "mlx5_core");
    if (!ok()) {
      return *this;
    }
    const std::string dir = pciDirs_.at(std::string(pci));
    writeFile(dir + "/sriov_numvfs", std::to_string(numVfs) + "\n")
        .writeFile(dir + "/sriov_totalvfs", std::to_string(numVfs) + "\n");
    if (!netdev.empty()) {
      addPciNetdev(pci, netdev, ifIndex);
    }
    if (!rdmaDevice.empty()) {
      addRdmaDevice(pci, rdmaDevice);
    }
    return *this;
  }

  /// Adds VF number `vfIndex` of PF `pfPci` (added before) at `vfPci`, beside its PF as in sysfs,
  /// bound to mlx5_core: <pf>/virtfn<vfIndex> -> VF, <vf>/physfn -> PF, plus netdev and RDMA
  /// device when not empty. Use setDriver(vfPci, "vfio-pci") for a VF without netdev.
  FakeSysfsTree& addVf(std::string_view pfPci, int vfIndex, std::string_view vfPci,
                       std::string_view netdev, std::string_view rdmaDevice,
                       int ifIndex = kAutoIfIndex) {
    if (!ok()) {
      return *this;
    }
    auto pf = pciDirs_.find(std::string(pfPci));
    if (pf == pciDirs_.end()) {
      return fail("addVf: PF " + std::string(pfPci) + " was not added");
    }
    const std::string pfDir = pf->second;
    if (!isCanonicalPci(vfPci)) {
      return fail("not a canonical PCI address: '" + std::string(vfPci) + "'");
    }
    const std::string vfDir =
        std::filesystem::path(pfDir).parent_path().string() + "/" + std::string(vfPci);
    pciDirs_.emplace(vfPci, vfDir);
    makeDir(vfDir)
        .link(vfDir + "/subsystem", "bus/pci")
        .link("bus/pci/devices/" + std::string(vfPci), vfDir)
        .link(pfDir + "/virtfn" + std::to_string(vfIndex), vfDir)
        .link(vfDir + "/physfn", pfDir)
        .setDriver(vfPci, "mlx5_core");
    if (!netdev.empty()) {
      addPciNetdev(vfPci, netdev, ifIndex);
    }
    if (!rdmaDevice.empty()) {
      addRdmaDevice(vfPci, rdmaDevice);
    }
    return *this;
  }

  /// Removes netdev `netdev` (its directory and class/net link), as when it moves to another
  /// network namespace.
  FakeSysfsTree& removeNetdev(std::string_view netdev) {
    auto it = netdevDirs_.find(std::string(netdev));
    if (!ok() || it == netdevDirs_.end()) {
      return *this;
    }
    removePath("class/net/" + std::string(netdev));
    removePath(it->second);
    netdevDirs_.erase(it);
    ifIndexes_.erase(std::string(netdev));
    return *this;
  }

  /// Writes file `rel` (relative to root(), parents created) with exactly `content`.
  FakeSysfsTree& writeFile(const std::string& rel, std::string_view content) {
    if (!ok()) {
      return *this;
    }
    std::error_code ec;
    std::filesystem::create_directories(abs(rel).parent_path(), ec);
    std::ofstream out(abs(rel), std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) {
      return fail("write " + abs(rel).string());
    }
    return *this;
  }

  /// Creates directory `rel` (relative to root()) and its parents.
  FakeSysfsTree& makeDir(const std::string& rel) {
    if (!ok()) {
      return *this;
    }
    std::error_code ec;
    std::filesystem::create_directories(abs(rel), ec);
    if (ec) {
      return fail("mkdir " + abs(rel).string() + ": " + ec.message());
    }
    return *this;
  }

  /// Creates symlink `rel` to `target` exactly as given (may be dangling or absolute).
  FakeSysfsTree& makeSymlink(const std::string& rel, const std::string& target) {
    if (!ok()) {
      return *this;
    }
    std::error_code ec;
    std::filesystem::create_directories(abs(rel).parent_path(), ec);
    std::filesystem::create_symlink(target, abs(rel), ec);
    if (ec) {
      return fail("symlink " + abs(rel).string() + " -> " + target + ": " + ec.message());
    }
    return *this;
  }

  /// Removes `rel` (relative to root()) and everything below it; missing is fine.
  FakeSysfsTree& removePath(const std::string& rel) {
    if (!ok()) {
      return *this;
    }
    std::error_code ec;
    std::filesystem::remove_all(abs(rel), ec);
    if (ec) {
      return fail("remove " + abs(rel).string() + ": " + ec.message());
    }
    return *this;
  }

  /// Directory of PCI function `pci` relative to root() ("devices/pci0000:00/0000:00:06.0"),
  /// empty when it was not added.
  [[nodiscard]] std::string pciDirOrEmpty(std::string_view pci) const {
    auto it = pciDirs_.find(std::string(pci));
    return it == pciDirs_.end() ? std::string() : it->second;
  }

  /// Directory of netdev `netdev` relative to root(), empty when unknown.
  [[nodiscard]] std::string netdevDirOrEmpty(std::string_view netdev) const {
    auto it = netdevDirs_.find(std::string(netdev));
    return it == netdevDirs_.end() ? std::string() : it->second;
  }

  /// The ifindex given to `netdev` (useful with kAutoIfIndex), -1 when unknown.
  [[nodiscard]] int ifIndexOf(std::string_view netdev) const {
    auto it = ifIndexes_.find(std::string(netdev));
    return it == ifIndexes_.end() ? -1 : it->second;
  }

 private:
  FakeSysfsTree& fail(std::string what) {
    if (error_.empty()) {
      error_ = "FakeSysfsTree: " + std::move(what);
    }
    return *this;
  }

  [[nodiscard]] std::filesystem::path abs(const std::string& rel) const {
    return std::filesystem::path(root_) / rel;
  }

  [[nodiscard]] static bool isCanonicalPci(std::string_view pci) {
    auto parsed = net::PciAddress::parse(pci);
    return parsed && parsed->text == pci;
  }

  /// Symlink `rel` -> `targetRel` (both relative to root()), written relative to the link's
  /// directory as sysfs does ("../../devices/..."); an existing link is replaced.
  FakeSysfsTree& link(const std::string& rel, const std::string& targetRel) {
    if (!ok()) {
      return *this;
    }
    auto relTarget = std::filesystem::path(targetRel).lexically_relative(
        std::filesystem::path(rel).parent_path());
    std::error_code ec;
    std::filesystem::remove(abs(rel), ec);
    return makeSymlink(rel, relTarget.string());
  }

  /// <deviceDir>/net/<netdev> with ifindex, device and subsystem, plus class/net/<netdev>.
  FakeSysfsTree& addNetdevBelow(const std::string& deviceDir, std::string_view netdev,
                                int ifIndex) {
    if (!ok()) {
      return *this;
    }
    const std::string dir = deviceDir + "/net/" + std::string(netdev);
    return registerNetdev(netdev, dir, ifIndex).link(dir + "/device", deviceDir);
  }

  FakeSysfsTree& registerNetdev(std::string_view netdev, const std::string& dir, int ifIndex) {
    const std::string name(netdev);
    if (netdevDirs_.contains(name)) {
      return fail("netdev " + name + " added twice");
    }
    if (ifIndex == kAutoIfIndex) {
      ifIndex = nextAutoIfIndex();
    }
    netdevDirs_.emplace(name, dir);
    ifIndexes_.emplace(name, ifIndex);
    return makeDir(dir)
        .writeFile(dir + "/ifindex", std::to_string(ifIndex) + "\n")
        .link(dir + "/subsystem", "class/net")
        .link("class/net/" + name, dir);
  }

  int nextAutoIfIndex() {
    std::set<int> used;
    for (const auto& [name, index] : ifIndexes_) {
      used.insert(index);
    }
    while (used.contains(nextIfIndex_)) {
      ++nextIfIndex_;
    }
    return nextIfIndex_++;
  }

  std::string base_;                               // the temp dir; removed by the destructor
  std::string root_;                               // base_ + "/sys"
  std::string error_;                              // first failure
  std::map<std::string, std::string> pciDirs_;     // pci -> dir relative to root_
  std::map<std::string, std::string> netdevDirs_;  // netdev -> dir relative to root_
  std::map<std::string, int> ifIndexes_;           // netdev -> ifindex
  int nextIfIndex_ = 100;
};

}  // namespace ibcni::testing
