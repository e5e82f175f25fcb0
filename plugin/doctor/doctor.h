// SPDX-License-Identifier: Apache-2.0
// `ibcni doctor`: a report on a node's RDMA, IPoIB and SR-IOV set-up, run by hand. It replaces the
// manual checks (ibv_devinfo, ibstat, rdma system show, ip link show) one does before the first pod.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/net/pkey.h"
#include "ibcni/netlink/netlink.h"
#include "ibcni/os/netns.h"
#include "ibcni/rdma/rdma_netlink.h"
#include "ibcni/sysfs/devices.h"
#include "ibcni/verbs/verbs_probe.h"

namespace ibcni::doctor {

/// One port of an RDMA device. State and addresses come from the verbs probe (run in the host
/// netns); they are left at their defaults when it could not query the port (`queried` false).
struct PortReport {
  std::uint32_t port = 0;
  bool queried = false;         ///< the verbs probe answered for this port
  std::string state;            ///< "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"; empty when unknown
  std::string physState;        ///< "LinkUp", "Polling", "Disabled", ...; empty when unknown
  std::string linkLayer;        ///< "InfiniBand", "Ethernet", "unspecified"; empty when unknown
  std::uint16_t lid = 0;
  std::uint16_t smLid = 0;
  std::string portGuid;         ///< "xx:xx:xx:xx:xx:xx:xx:xx"; empty when unknown
  std::vector<net::Pkey> pkeys;  ///< the pkey table (verbs, else sysfs), empty slots left out
  std::string netdev;           ///< the port's netdev as RDMA netlink reports it; empty when none
  int netdevIndex = 0;
};

/// One RDMA device and its ports.
struct DeviceReport {
  std::string name;             ///< "mlx5_0", "rxe0"
  std::uint32_t index = 0;      ///< RDMA netlink's device index
  std::string nodeGuid;         ///< from the verbs probe; empty when unknown
  std::vector<PortReport> ports;
};

/// A link of kind "ipoib": a parent (an IB port's netdev) or a child (a pkey interface).
struct IpoibLinkReport {
  std::string name;
  int index = 0;
  net::Pkey pkey;               ///< as the kernel reports it (full-membership bit set)
  std::string mode;             ///< "datagram" or "connected"
  int parentIndex = 0;          ///< 0 for a parent
  std::string parent;           ///< the parent's name, for a child (empty when not found)
  bool adminUp = false;
  std::uint32_t mtu = 0;
};

/// One VF as its PF reports it.
struct VfReport {
  std::uint32_t vf = 0;
  std::string pci;              ///< the VF's PCI function (the PF's virtfnN), empty when unknown
  std::string driver;           ///< its driver ("mlx5_core"; "vfio-pci": a VM's), empty when none or unknown
  std::string linkState;        ///< "auto", "enable", "disable"; empty when not reported
  std::string nodeGuid;         ///< empty when not reported
  std::string portGuid;         ///< empty when not reported
};

/// An SR-IOV PF with VFs enabled.
struct PfReport {
  std::string pci;              ///< "dddd:bb:dd.f"
  std::string netdev;           ///< the PF netdev the VFs were read from
  int ifIndex = 0;
  std::string driver;
  std::vector<std::string> rdmaDevices;
  std::vector<VfReport> vfs;
};

/// Something that needs a hand, and what to do about it.
struct Problem {
  std::string what;
  std::string fix;
  /// true for notes that do not make the node unfit (RDMA netns mode shared); they do not count
  /// for the exit status.
  bool informational = false;
};

/// One device a network config could be given on this node (a VF the device plugin may hand out,
/// or the device or parent the config names), and what ADD would make of it.
struct CandidateReport {
  std::string device;           ///< "0000:3b:00.2 (VF 1 of ib0)", "master ib0", "device vf0"
  bool works = false;
  /// Works only when the pod asks for a GUID (runtimeConfig.infinibandGUID): the VF has none.
  bool needsGuid = false;
  std::string problem;          ///< the error ADD would give; empty when it works
  std::vector<std::string> warnings;  ///< what ADD would only log (verbsCheck warn, pkey before the GUID)
};

/// `ibcni doctor --config FILE` on a config whose ipam is ibcni-ipam with ipam.cluster: whether
/// this node reaches the pool's backend, as whom, and which blocks it holds.
struct ClusterCheckReport {
  std::string pool;
  std::string backend;       ///< "etcd", "kubernetes"
  std::string endpoint;      ///< etcd endpoints, or the kubeconfig's server (empty when unknown)
  std::string node;          ///< the node name ADD uses; empty when none is valid
  std::string nodeSource;    ///< "ipam.cluster.nodeName", the node-name file's path, "hostname"
  std::string libcurl;       ///< "loads", the reason it does not, or "" (not checked)
  std::string kubeconfig;    ///< kubernetes: "reads" or why not; etcd: ""
  bool reachable = false;    ///< one list call of the pool's blocks answered
  std::int64_t listMs = -1;  ///< how long it took (-1: not made)
  std::string error;         ///< why the backend could not be listed
  std::vector<std::string> backendBlocks;  ///< blocks the backend lists as this node's
  std::vector<std::string> ledgerBlocks;   ///< blocks this node's ledger lists as owned
  bool agree = false;        ///< ledger and backend name the same blocks
};

/// One VF of this node attached with a GUID from the network's guidPool, as its record says and as
/// its PF reports it now.
struct GuidVfReport {
  std::string vf;           ///< "VF 2 of PF 0000:3b:00.0"
  std::string attachment;   ///< "containerID/ifname"
  std::string recorded;     ///< the GUID ADD set
  std::string portGuid;     ///< the VF's port GUID now; empty when it cannot be read
  std::string poolHolds;    ///< what the pool's store holds for the attachment ("" none)
  bool ok = false;          ///< port GUID, record and pool agree
};

/// `ibcni doctor --config FILE` on a sriov config with guidPool: the pool, its cluster object as
/// ipam.cluster's is checked, and each VF attached with one of its GUIDs.
struct GuidPoolCheckReport {
  std::string pool;
  std::string range;      ///< "FIRST-LAST"
  std::uint32_t blockSize = 0;
  std::string assign;     ///< "when-unset", "always"
  std::string storeDir;   ///< this node's store of the pool
  std::optional<ClusterCheckReport> cluster;  ///< guidPool.cluster only
  std::vector<GuidVfReport> vfs;
};

/// `ibcni doctor --config FILE`: whether that network config would work on this node, and why not.
struct ConfigReport {
  std::string file;
  std::string name;             ///< the network's name; empty when the config could not be read
  std::string mode;             ///< "sriov", "ipoib"; empty when the config could not be read
  std::string resourceName;     ///< the NAD's k8s.v1.cni.cncf.io/resourceName, if any
  bool works = false;
  std::vector<std::string> ok;  ///< what was checked and holds
  std::vector<CandidateReport> candidates;
  std::vector<Problem> problems;  ///< what stops it; informational ones only warn
  std::optional<ClusterCheckReport> cluster;  ///< ipam.cluster only
  std::optional<GuidPoolCheckReport> guidPool;  ///< sriov mode with guidPool only
};

/// Everything `ibcni doctor` found. Plain data: renderText and doctor/doctor_json print it.
struct DoctorReport {
  std::string rdmaNetnsMode;    ///< "shared", "exclusive", or "unknown" (no RDMA netlink)
  bool verbsAvailable = false;  ///< libibverbs.so.1 could be loaded
  std::string verbsUnavailableReason;
  std::vector<std::string> uverbsDevices;  ///< /dev/infiniband/uverbs* names, sorted
  /// GPUDirect RDMA (NIC DMA straight to GPU memory): "enabled" (nvidia_peermem loaded), "disabled"
  /// (the NVIDIA driver is loaded but nvidia_peermem is not), "no NVIDIA driver", or "unknown".
  std::string gpuDirect = "unknown";
  std::vector<DeviceReport> devices;
  std::vector<IpoibLinkReport> ipoibLinks;
  std::vector<PfReport> sriovPfs;
  std::vector<Problem> problems;
  std::optional<ConfigReport> config;  ///< set by `--config`
};

/// What collect() looks at. The interfaces are those of plugin::Deps; the two listing functions
/// stand in for directory reads so that tests need no real /sys/class/net or /dev/infiniband.
struct DoctorInputs {
  nl::Netlink& netlink;
  sysfs::Devices& devices;
  rdma::RdmaNetlink& rdma;
  verbs::VerbsProbe* verbs = nullptr;  ///< null: libibverbs is reported unavailable
  const os::Netns& hostNetns;          ///< the namespace every netlink query is made in
  std::string verbsNetnsPath = "/proc/self/ns/net";  ///< ProbeRequest::netnsPath for the probes
  std::function<std::vector<std::string>()> listNetdevs;   ///< netdev names of the host netns
  std::function<std::vector<std::string>()> listUverbs;    ///< names of /dev/infiniband/uverbs*
  std::function<bool(const std::string&)> moduleLoaded;   ///< /sys/module/<name> exists; null: unknown
};

/// Queries everything and derives the problems. Never fails: what cannot be read is reported.
[[nodiscard]] DoctorReport collect(const DoctorInputs& in);

/// A human-readable report, one section per topic, problems last.
[[nodiscard]] std::string renderText(const DoctorReport& report);

/// 0 when the report has no problem (informational notes aside), 1 otherwise. With a config
/// report, its verdict alone: 0 when the config would work, 1 when it would not.
[[nodiscard]] int exitStatus(const DoctorReport& report);

/// The entries of `dir` whose names start with `prefix`, sorted; empty when `dir` cannot be read.
[[nodiscard]] std::vector<std::string> listDirectory(const std::string& dir, const std::string& prefix);

}  // namespace ibcni::doctor
