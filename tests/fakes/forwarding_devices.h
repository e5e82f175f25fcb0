// SPDX-License-Identifier: Apache-2.0
// A sysfs::Devices that passes every call to another one: the base of test decorators that change
// one or two calls (what a driver does on a rebind, a netdev listed from netlink, ...).
#pragma once

#include "ibcni/sysfs/devices.h"

namespace ibcni::testing {

class ForwardingDevices : public sysfs::Devices {
 public:
  explicit ForwardingDevices(sysfs::Devices& inner) : inner_(inner) {}

  os::SysResult<std::vector<std::string>> netdevsOfPci(const net::PciAddress& pci) override {
    return inner_.netdevsOfPci(pci);
  }
  os::SysResult<std::optional<net::PciAddress>> pciOfNetdev(const std::string& name, int ifIndex) override {
    return inner_.pciOfNetdev(name, ifIndex);
  }
  os::SysResult<sysfs::PciFunction> pciFunction(const net::PciAddress& pci) override { return inner_.pciFunction(pci); }
  os::SysResult<std::string> driverOf(const net::PciAddress& pci) override { return inner_.driverOf(pci); }
  os::SysResult<std::vector<net::Pkey>> pkeys(const std::string& rdmaDevice, std::uint32_t port) override {
    return inner_.pkeys(rdmaDevice, port);
  }
  os::SysResult<std::vector<std::string>> netdevsOfRdmaPort(const std::string& rdmaDevice,
                                                            std::uint32_t port) override {
    return inner_.netdevsOfRdmaPort(rdmaDevice, port);
  }
  os::SysResult<void> rebind(const net::PciAddress& pci) override { return inner_.rebind(pci); }

 protected:
  sysfs::Devices& inner_;
};

}  // namespace ibcni::testing
