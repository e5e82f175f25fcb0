// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "ibcni/ipam/guid_pool.h"
#include "ibcni/ipam/ipam.h"
#include "ibcni/netlink/netlink.h"
#include "ibcni/os/netns.h"
#include "ibcni/rdma/rdma_netlink.h"
#include "ibcni/state/attachment_store.h"
#include "ibcni/state/call_events.h"
#include "ibcni/state/device_info_file.h"
#include "ibcni/sysfs/devices.h"
#include "ibcni/sysfs/net_sysctls.h"
#include "ibcni/verbs/verbs_probe.h"

namespace ibcni::plugin {

/// Everything the verbs touch outside their own memory. main() wires the real implementations;
/// tests pass fakes.
struct Deps {
  nl::Netlink& netlink;
  os::NetnsProvider& netns;
  sysfs::Devices& devices;
  rdma::RdmaNetlink& rdma;
  ipam::Ipam& ipam;
  /// Opens the attachment store kept under a state directory.
  std::function<std::unique_ptr<state::AttachmentStore>(const std::string& stateDir)> makeStore;
  /// How long ADD/DEL wait for another invocation that holds the same device (then error 11).
  std::chrono::milliseconds lockTimeout = std::chrono::seconds(30);
  /// The current time as RFC 3339 UTC, for records.
  std::function<std::string()> now;
  /// This boot's identity (/proc/sys/kernel/random/boot_id): a record made before a reboot
  /// describes VF settings the reboot already reset.
  std::function<std::string()> bootId;
  /// How long to wait for a VF's netdev to come back after its driver was rebound.
  std::chrono::milliseconds settleTimeout = std::chrono::seconds(10);
  /// Runs the verbs check's probe; null: no verbs check (verbsCheck is ignored).
  verbs::VerbsProbe* verbs = nullptr;
  /// Reads and writes the device-info files of runtimeConfig.CNIDeviceInfoFile; null: ibcni writes
  /// none (the device plugin's copy is still read by config/).
  state::DeviceInfoFiles* deviceInfo = nullptr;
  /// The upkeep of the embedded IPAM's pools on this node (`ibcni reconcile`); null: reconcile
  /// reclaims no pool and says why.
  ipam::IpamUpkeep* ipamUpkeep = nullptr;
  /// sriov mode's guidPool: where VF GUIDs are allocated and released; null: a configuration with
  /// guidPool is refused (and a record naming a pool cannot release its GUID).
  ipam::GuidPools* guids = nullptr;
  /// Where the ibcni executable appends each call's event (<stateDir>/events); null: nowhere. The
  /// verbs never use it: the executable's entry appends once the outcome is known (runPluginMain).
  state::CallEvents* callEvents = nullptr;
  /// The pod interfaces' sysctls policyRouting sets; null: a configuration with policyRouting is
  /// refused.
  sysfs::NetSysctls* sysctls = nullptr;
};

}  // namespace ibcni::plugin
