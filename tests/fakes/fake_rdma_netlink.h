// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cerrno>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/os/netns.h"
#include "ibcni/os/sys_error.h"
#include "ibcni/rdma/rdma_netlink.h"

namespace ibcni::testing {

/// In-memory rdma::RdmaNetlink for unit tests, keyed on Netns::inode() like FakeNetlink. It
/// answers as Linux 6.x does (drivers/infiniband/core/nldev.c, device.c):
///  * shared mode: every device is visible from every namespace; exclusive mode: only from the
///    namespace it belongs to;
///  * a port's netdev is reported only to the namespace the device was added in (where its netdev
///    lives in these tests), as the kernel reports it only when the netdev is in the asking netns;
///  * moveDevice: ENODEV when `from` does not see the device, EOPNOTSUPP in shared mode or for a
///    device whose driver cannot move (rxe), otherwise the device belongs to `to`;
///  * destroyNetns(): the kernel gives a dying namespace's RDMA devices back to the initial one.
/// Every call is recorded; failOn() makes the next call of an operation fail once. onMoveDevice,
/// when set, is called by every moveDevice that is not made to fail, before it changes anything.
class FakeRdmaNetlink final : public rdma::RdmaNetlink {
 public:
  enum class Op { kNetnsMode, kPorts, kMoveDevice };

  struct Device {
    std::uint32_t index = 0;
    std::string name;
    ino_t home = 0;  ///< the namespace of its netdev (where it was added)
    ino_t ns = 0;    ///< the namespace it belongs to now
    int netdevIndex = 0;
    std::string netdevName;
    bool movable = true;
  };

  /// Adds device `name` with one port whose netdev is `netdevName`/`netdevIndex` (0/"" for
  /// none), belonging to `ns`. `movable` false: the driver cannot change netns (rxe).
  std::uint32_t addDevice(const os::Netns& ns, std::string name, int netdevIndex, std::string netdevName,
                          bool movable = true) {
    Device d;
    d.index = nextIndex_++;
    d.name = std::move(name);
    d.home = d.ns = ns.inode();
    d.netdevIndex = netdevIndex;
    d.netdevName = std::move(netdevName);
    d.movable = movable;
    devices_.push_back(d);
    return d.index;
  }
  /// Removes device `name` wherever it is, as unbinding its driver does. @return false: no such device.
  bool removeDevice(const std::string& name) {
    return std::erase_if(devices_, [&name](const Device& d) { return d.name == name; }) != 0;
  }
  void setMode(rdma::NetnsMode mode) { mode_ = mode; }
  /// false: the kernel has no RDMA netlink (ib_core not loaded).
  void setPresent(bool present) { present_ = present; }
  /// The namespace (inode) device `name` belongs to; 0 when there is no such device.
  [[nodiscard]] ino_t nsOf(const std::string& name) const {
    for (const auto& d : devices_) {
      if (d.name == name) {
        return d.ns;
      }
    }
    return 0;
  }
  /// The kernel's netns teardown: devices of `ns` return to the initial namespace `host`.
  void destroyNetns(const os::Netns& ns, const os::Netns& host) {
    for (auto& d : devices_) {
      if (d.ns == ns.inode()) {
        d.ns = host.inode();
      }
    }
  }
  void failOn(Op op, int err, std::string extAck = {}) { failures_.push_back({op, err, std::move(extAck)}); }
  [[nodiscard]] const std::vector<std::string>& calls() const noexcept { return calls_; }
  void clearCalls() { calls_.clear(); }
  /// Called as moveDevice(from, deviceIndex, to) starts (after failOn() had its chance), e.g. to
  /// look at the other fakes at that moment.
  std::function<void(const os::Netns& from, std::uint32_t deviceIndex, const os::Netns& to)> onMoveDevice;

  os::SysResult<rdma::NetnsMode> netnsMode(const os::Netns& ns) override {
    if (auto e = record(Op::kNetnsMode, "netnsMode(" + ns.path() + ")")) {
      return std::unexpected(*e);
    }
    if (!present_) {
      return os::sysFail(EPROTONOSUPPORT, "open an RDMA netlink socket");
    }
    return mode_;
  }

  os::SysResult<std::vector<rdma::Port>> ports(const os::Netns& ns) override {
    if (auto e = record(Op::kPorts, "ports(" + ns.path() + ")")) {
      return std::unexpected(*e);
    }
    std::vector<rdma::Port> out;
    if (!present_) {
      return out;
    }
    for (const auto& d : devices_) {
      if (mode_ == rdma::NetnsMode::kExclusive && d.ns != ns.inode()) {
        continue;
      }
      rdma::Port p;
      p.deviceIndex = d.index;
      p.deviceName = d.name;
      p.port = 1;
      if (d.home == ns.inode()) {
        p.netdevIndex = d.netdevIndex;
        p.netdevName = d.netdevName;
      }
      out.push_back(p);
    }
    return out;
  }

  os::SysResult<void> moveDevice(const os::Netns& from, std::uint32_t deviceIndex, const os::Netns& to) override {
    const std::string op = "moveDevice(" + from.path() + ", " + std::to_string(deviceIndex) + ", " + to.path() + ")";
    if (auto e = record(Op::kMoveDevice, op)) {
      return std::unexpected(*e);
    }
    if (onMoveDevice) {
      onMoveDevice(from, deviceIndex, to);
    }
    for (auto& d : devices_) {
      if (d.index != deviceIndex) {
        continue;
      }
      if (mode_ == rdma::NetnsMode::kExclusive && d.ns != from.inode()) {
        break;
      }
      if (mode_ == rdma::NetnsMode::kShared || !d.movable) {
        return std::unexpected(os::SysError{EOPNOTSUPP, "move RDMA device " + d.name, {}});
      }
      d.ns = to.inode();
      return {};
    }
    return std::unexpected(os::SysError{ENODEV, "move RDMA device " + std::to_string(deviceIndex), {}});
  }

 private:
  struct Failure {
    Op op;
    int err;
    std::string extAck;
  };
  std::optional<os::SysError> record(Op op, std::string text) {
    calls_.push_back(text);
    for (auto it = failures_.begin(); it != failures_.end(); ++it) {
      if (it->op == op) {
        os::SysError e{it->err, text, it->extAck};
        failures_.erase(it);
        return e;
      }
    }
    return std::nullopt;
  }

  rdma::NetnsMode mode_ = rdma::NetnsMode::kShared;
  bool present_ = true;
  std::vector<Device> devices_;
  std::vector<Failure> failures_;
  std::vector<std::string> calls_;
  std::uint32_t nextIndex_ = 0;  // the kernel's first device index is 0
};

}  // namespace ibcni::testing
