// SPDX-License-Identifier: Apache-2.0
// The network configuration parsers, fed what a runtime writes on stdin: config::parsePreamble and
// config::parseNetConf for every verb that reads a configuration, as ibcni (kPlugin) and as
// ibcni-ipam (kIpamPlugin), with the embedded IPAM's `ipam` object
// read in the same pass. Besides memory and UB errors (ASan,
// UBSan), it checks what net_conf.h and ipam_conf.h promise of an accepted configuration:
// "Everything downstream trusts it".

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "ibcni/cni/cmd_args.h"
#include "ibcni/config/net_conf.h"
#include "ibcni/config/ipam_conf.h"

namespace {

using ibcni::cni::Command;
using ibcni::config::NetConf;
using ibcni::config::Role;
using ibcni::fuzz::require;

void checkAccepted(const NetConf& c, Command command, Role role) {
  require(ibcni::cni::isValidIdentifier(c.name), "accepted an invalid network name", c.name);
  require(!c.cniVersion.empty(), "accepted a config without cniVersion");
  if (c.mtu) {
    require(*c.mtu >= 68 && *c.mtu <= 65535, "accepted an mtu out of 68..65535");
  }
  if (c.pkey) {
    require(c.pkey->wire() >= 1 && c.pkey->wire() <= 0x7fff, "accepted a pkey outside 0x0001..0x7fff");
  }
  require(c.logFile.empty() || c.logFile.front() == '/', "accepted a relative logFile", c.logFile);
  require(!c.stateDir.empty() && c.stateDir.front() == '/', "accepted a relative stateDir", c.stateDir);
  require(c.ipamType.find('/') == std::string::npos && c.ipamType != "." && c.ipamType != "..",
          "accepted an ipam.type that is a path", c.ipamType);
  if (role == Role::kIpamPlugin) {
    require(!c.ipamType.empty(), "ibcni-ipam accepted a config without ipam.type");
  }
  if (role == Role::kPlugin && c.mode == ibcni::config::Mode::kSriov &&
      (command == Command::kAdd || command == Command::kCheck)) {
    // The device is deviceID or device, or neither when Multus's device-info file names it (read by
    // ADD and CHECK, plugin/commands/device_info.cpp); never both.
    require(c.deviceId.has_value() != !c.device.empty() || !c.runtime.deviceInfoFile.empty(),
            "ADD/CHECK accepted with no device and no device-info file");
  }
  if (c.deviceId) {
    require(c.device.empty(), "accepted both deviceID and device");
  }
  if (!c.device.empty()) {
    require(c.device.size() <= 15 && c.device.find('/') == std::string::npos, "accepted a bad device name", c.device);
  }
}

// The embedded IPAM's ranges: every address of a range of the set's family, start <= end.
void checkIpam(const ibcni::config::IpamConfig& ipam) {
  for (const auto& set : ipam.rangeSets) {
    require(!set.ranges.empty(), "the IPAM accepted an empty range set", set.path);
    for (const auto& r : set.ranges) {
      for (const auto* a : {&r.rangeStart, &r.rangeEnd, &r.subnet.address}) {
        require(a->family == set.family, "a range address of another family than its set", r.path);
      }
      // contains() is rangeStart <= ip <= rangeEnd.
      require(r.contains(r.rangeStart) && r.contains(r.rangeEnd), "a range whose start is after its end", r.path);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  if (auto p = ibcni::config::parsePreamble(text); p) {
    require(p->logFile.empty() || p->logFile.front() == '/', "preamble took a relative logFile", p->logFile);
  }
  for (Command command : {Command::kAdd, Command::kDel, Command::kCheck, Command::kGc, Command::kStatus}) {
    for (Role role : {Role::kPlugin, Role::kIpamPlugin}) {
      auto c = ibcni::config::parseNetConf(text, command, role);
      if (c) {
        checkAccepted(*c, command, role);
        // The embedded IPAM's object, read in the same pass.
        if (c->embeddedIpam && *c->embeddedIpam) {
          require(!c->name.empty(), "the IPAM accepted a config without a name");
          checkIpam(**c->embeddedIpam);
        }
      } else {
        require(!c.error().msg.empty(), "an error without a message");
      }
    }
  }
  (void)ibcni::config::parseResolvConf(text);
  return 0;
}
