// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/cni/result.h"
#include "ibcni/net/ip.h"
#include "ibcni/net/pkey.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::state {

/// What ADD did to one attachment, kept so that DEL, CHECK and GC can undo or verify it without the
/// runtime's cache and after a plugin upgrade. Keyed by (network, containerId, ifName).
struct AttachmentRecord {
  /// Format of the stored record; readers accept every version up to kCurrentFormat.
  static constexpr int kCurrentFormat = 1;
  int format = kCurrentFormat;

  std::string network;
  std::string containerId;
  std::string ifName;
  std::string netns;      ///< CNI_NETNS at ADD
  std::uint64_t netnsInode = 0;  ///< the inode of that namespace at ADD (0: unknown): a path reused by a
                                 ///< later namespace is not the pod's (os/netns_checker.h)
  std::string mode;       ///< "sriov"
  std::string deviceKey;  ///< lock name of the device: "pci-<addr>" or "netdev-<ifindex>"

  // The device in the host before ADD.
  std::optional<net::PciAddress> pciAddress;  ///< none for netdevs without a PCI function
  std::string hostName;
  int hostIndex = 0;
  std::uint32_t hostMtu = 0;
  bool hostUp = false;
  std::string hostAlias;
  std::string hostMac;
  std::string bootId;      ///< the boot ADD ran in (/proc/sys/kernel/random/boot_id)

  // SR-IOV VF settings ADD changed on the PF, and how they were (empty/unset: not changed).
  std::optional<net::PciAddress> pfPci;   ///< the VF's PF, when the device is a VF
  std::optional<std::uint32_t> vfIndex;   ///< the VF's number on its PF
  std::string guid;                       ///< the node and port GUID ADD set
  std::string oldNodeGuid;                ///< the GUIDs before, restored by DEL
  std::string oldPortGuid;
  /// guidPool: the pool the VF's GUID was asked from, and its store on this node (ipam::GuidLease),
  /// written ahead of the allocation. DEL, GC and reconcile release the pool's GUID there, whatever
  /// the configuration says by then. Empty: the GUID (if any) did not come from a pool.
  std::string guidPool;
  std::string guidPoolDir;
  std::optional<std::uint32_t> oldLinkState;  ///< IFLA_VF_LINK_STATE before ADD changed it
  std::string rdmaDevice;                 ///< the RDMA device behind the interface, when known
  std::uint32_t rdmaPort = 1;             ///< its port
  bool rdmaMoved = false;                 ///< ADD moved the RDMA device into the pod netns

  // ipoib mode: the child ADD created (hostName/hostIndex name the parent).
  std::optional<net::Pkey> pkey;          ///< the child's pkey, without the membership bit (partition())
  std::string ipoibMode;                  ///< "datagram" or "connected"
  bool umcast = false;
  std::string tempName;                   ///< the child's name from its creation to its rename in the pod

  // What ADD changed in the pod.
  int podIndex = 0;
  std::optional<std::uint32_t> podMtu;  ///< set when ADD changed the MTU
  std::string podMac;                   ///< set when ADD changed the MAC
  std::string ipamType;                 ///< empty: no IPAM
  /// policyRouting: the interface's table and its rules' priority in the pod; DEL deletes the rules
  /// that look it up at that priority. Unset: ADD made no rule.
  std::optional<std::uint32_t> policyTable;
  std::uint32_t policyPriority = 0;
  /// The device-info file ADD wrote (runtimeConfig.CNIDeviceInfoFile), which DEL removes; empty
  /// when ADD wrote none (none asked for, or the device plugin's copy was there). Absent in records
  /// of older ibcni.
  std::string deviceInfoFile;

  // What the runtime gave ADD, so that `ibcni reconcile` can do what the DEL that never came would
  // have done (the IPAM release above all) without the runtime. Empty in records of older ibcni.
  std::string config;                   ///< the network configuration on stdin
  std::string cniArgs;                  ///< CNI_ARGS
  std::vector<std::string> cniPath;     ///< CNI_PATH, where a delegated IPAM plugin is found
  cni::AddResult result;                ///< what ADD printed (in 1.1.0 form)
  std::string createdAt;                ///< RFC 3339 UTC
};

/// Persistence of attachment records. Writes are atomic (write, fsync, rename, fsync dir).
class AttachmentStore {
 public:
  virtual ~AttachmentStore() = default;
  [[nodiscard]] virtual os::SysResult<void> save(const AttachmentRecord& record) = 0;
  /// save() without waiting for the disk (no fsync): still atomic for readers, and kept when the
  /// process dies (SIGKILL, OOM), but not necessarily across a power loss. For the record ADD
  /// writes ahead of its first change, which only a dying process needs (a reboot ends the pod).
  [[nodiscard]] virtual os::SysResult<void> saveVolatile(const AttachmentRecord& record) { return save(record); }
  /// @return nullopt when there is no record; EINVAL when the file exists but cannot be decoded
  ///         or was written by a newer, unknown format.
  [[nodiscard]] virtual os::SysResult<std::optional<AttachmentRecord>> load(const std::string& network,
                                                                            const std::string& containerId,
                                                                            const std::string& ifName) = 0;
  /// Removing a record that is not there succeeds.
  [[nodiscard]] virtual os::SysResult<void> remove(const std::string& network, const std::string& containerId,
                                                   const std::string& ifName) = 0;
  /// Every readable record of `network` (empty: of all networks). Undecodable files are skipped.
  [[nodiscard]] virtual os::SysResult<std::vector<AttachmentRecord>> list(const std::string& network) = 0;
};

}  // namespace ibcni::state
