// SPDX-License-Identifier: Apache-2.0
#include "plugin/doctor/doctor.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <utility>

#include "ibcni/net/ip.h"
#include "plugin/modes/sriov_vfio.h"

namespace ibcni::doctor {

namespace {

// doctor runs by hand, not inside a runtime's deadline: give a slow node (or an emulated one) time
// to load libibverbs and open each device, rather than report a port's state as unknown.
constexpr std::chrono::milliseconds kProbeTimeout{10000};

// enum ibv_port_state
std::string portStateName(int state) {
  switch (state) {
    case 1: return "DOWN";
    case 2: return "INIT";
    case 3: return "ARMED";
    case 4: return "ACTIVE";
    case 5: return "ACTIVE_DEFER";
    default: return "NOP(" + std::to_string(state) + ")";
  }
}

// ibv_port_attr.phys_state (IBTA 14.2.5.6), as ibstat names them.
std::string physStateName(int state) {
  switch (state) {
    case 1: return "Sleep";
    case 2: return "Polling";
    case 3: return "Disabled";
    case 4: return "PortConfigurationTraining";
    case 5: return "LinkUp";
    case 6: return "LinkErrorRecovery";
    case 7: return "PhyTest";
    default: return "unknown(" + std::to_string(state) + ")";
  }
}

std::string linkLayerName(verbs::LinkLayer l) {
  switch (l) {
    case verbs::LinkLayer::kInfiniband: return "InfiniBand";
    case verbs::LinkLayer::kEthernet: return "Ethernet";
    case verbs::LinkLayer::kUnspecified: break;
  }
  return "unspecified";
}

std::string vfLinkStateName(nl::VfLinkState s) {
  switch (s) {
    case nl::VfLinkState::kAuto: return "auto";
    case nl::VfLinkState::kEnable: return "enable";
    case nl::VfLinkState::kDisable: return "disable";
  }
  return "unknown";
}

void problem(DoctorReport& r, std::string what, std::string fix, bool informational = false) {
  r.problems.push_back(Problem{std::move(what), std::move(fix), informational});
}

// The verbs probe of one port in the host netns, folded into `port` and `device`.
void probePort(const DoctorInputs& in, DoctorReport& r, DeviceReport& device, PortReport& port) {
  verbs::ProbeRequest req;
  req.netnsPath = in.verbsNetnsPath;
  req.device = device.name;
  req.port = port.port;
  req.timeout = kProbeTimeout;
  auto res = in.verbs->probe(req);
  if (!res) {
    problem(r, "the verbs probe of " + device.name + " port " + std::to_string(port.port) + " failed: " +
                   res.error().describe(),
            "run ibv_devinfo -d " + device.name + " to see what libibverbs says");
    return;
  }
  if (!res->available) {
    r.verbsAvailable = false;
    r.verbsUnavailableReason = res->unavailableReason;
    return;
  }
  if (!res->opened) {
    const std::string why = res->openError.empty() ? "libibverbs does not list it" : res->openError;
    problem(r, "libibverbs cannot open " + device.name + ": " + why,
            "load ib_uverbs (modprobe ib_uverbs) and the device's rdma-core provider (e.g. libmlx5, librxe); "
            "check /dev/infiniband/uverbs* permissions");
    return;
  }
  if (!res->port) {
    return;
  }
  const verbs::PortFacts& f = *res->port;
  port.queried = true;
  port.state = portStateName(f.state);
  port.physState = physStateName(f.physState);
  port.linkLayer = linkLayerName(f.linkLayer);
  port.lid = f.lid;
  port.smLid = f.smLid;
  port.portGuid = net::Guid{f.portGuid}.toString();
  port.pkeys = f.pkeys;
  if (device.nodeGuid.empty() && f.nodeGuid != 0) {
    device.nodeGuid = net::Guid{f.nodeGuid}.toString();
  }
}

// Problems of one queried port.
void checkPort(DoctorReport& r, const DeviceReport& device, const PortReport& port) {
  if (!port.queried) {
    return;
  }
  const std::string name = device.name + " port " + std::to_string(port.port);
  const bool ib = port.linkLayer == "InfiniBand";
  if (port.state == "INIT" && ib) {
    problem(r, name + " is INIT, not ACTIVE: no subnet manager has configured it (LID " + std::to_string(port.lid) +
                   ", SM LID " + std::to_string(port.smLid) + ")",
            "run a subnet manager on the fabric (opensm on one node: systemctl start opensm, or the switch's / "
            "UFM's SM); sminfo and ibstat show when it has swept the port");
  } else if (port.state == "DOWN") {
    problem(r, name + " is DOWN (physical state " + port.physState + ")",
            port.physState == "Disabled"
                ? "the port is administratively disabled: enable it (ibportstate ... enable, or the switch side)"
                : "check the cable and the switch port (Polling: no peer seen)");
  } else if (port.state != "ACTIVE" && port.state != "ACTIVE_DEFER") {
    problem(r, name + " is " + port.state + ", not ACTIVE",
            ib ? "wait for the subnet manager's next sweep, then check sminfo / the SM's log"
               : "check the netdev behind the port (ip link) and its carrier");
  }
  // INIT says the same, and a port that is DOWN has no SM to know of yet.
  if (ib && port.state != "INIT" && port.state != "DOWN" && port.smLid == 0) {
    problem(r, name + " is an InfiniBand port with SM LID 0: it knows no subnet manager",
            "run a subnet manager on the fabric (opensm, or the switch's / UFM's SM) and check sminfo");
  }
}

// Netdev names and their links in the host netns, in name order.
std::vector<nl::Link> hostLinks(const DoctorInputs& in) {
  std::vector<nl::Link> links;
  if (!in.listNetdevs) {
    return links;
  }
  for (const auto& name : in.listNetdevs()) {
    if (auto link = in.netlink.linkByName(in.hostNetns, name); link) {
      links.push_back(*link);
    }
  }
  return links;
}

void collectIpoib(const std::vector<nl::Link>& links, DoctorReport& r) {
  std::map<int, std::string> names;
  for (const auto& l : links) {
    names[l.index] = l.name;
  }
  for (const auto& l : links) {
    if (l.kind != "ipoib") {
      continue;
    }
    IpoibLinkReport x;
    x.name = l.name;
    x.index = l.index;
    x.adminUp = l.adminUp;
    x.mtu = l.mtu;
    x.parentIndex = l.parentIndex;
    if (l.parentIndex != 0) {
      auto it = names.find(l.parentIndex);
      x.parent = it == names.end() ? std::string() : it->second;
    }
    if (l.ipoib) {
      x.pkey = l.ipoib->pkey;
      x.mode = l.ipoib->mode == nl::IpoibMode::kConnected ? "connected" : "datagram";
    }
    r.ipoibLinks.push_back(std::move(x));
  }
}

// The most VFs read from one PF: more than any NIC supports, a guard against a looping driver.
constexpr std::uint32_t kMaxVfs = 4096;

void collectSriov(const DoctorInputs& in, const std::vector<nl::Link>& links, DoctorReport& r) {
  std::set<std::string> seen;
  for (const auto& l : links) {
    auto pci = in.devices.pciOfNetdev(l.name, l.index);
    if (!pci || !*pci || seen.contains((*pci)->text)) {
      continue;
    }
    auto fn = in.devices.pciFunction(**pci);
    if (!fn || fn->physfn) {
      continue;  // unreadable, or a VF itself
    }
    PfReport pf;
    for (std::uint32_t vf = 0; vf < kMaxVfs; ++vf) {
      auto info = in.netlink.vfInfo(in.hostNetns, l.index, vf);
      if (!info) {
        break;  // ENOENT: no more VFs (or none at all)
      }
      VfReport v;
      v.vf = info->vf;
      for (const auto& vfn : fn->vfs) {
        if (vfn.index == info->vf) {
          v.pci = vfn.address.text;
          v.driver = in.devices.driverOf(vfn.address).value_or("");
        }
      }
      if (info->linkState) {
        v.linkState = vfLinkStateName(*info->linkState);
      }
      if (info->nodeGuid) {
        v.nodeGuid = info->nodeGuid->toString();
      }
      if (info->portGuid) {
        v.portGuid = info->portGuid->toString();
      }
      const bool zeroNode = info->nodeGuid && info->nodeGuid->value == 0;
      const bool zeroPort = info->portGuid && info->portGuid->value == 0;
      if (zeroNode || zeroPort) {
        const std::string which = zeroNode && zeroPort ? "node and port GUIDs are" : zeroNode ? "node GUID is" : "port GUID is";
        r.problems.push_back(Problem{
            "VF " + std::to_string(v.vf) + " of " + l.name + " (" + (*pci)->text + "): its " + which +
                " all zero, so its IB port stays down",
            "assign unique GUIDs: ip link set " + l.name + " vf " + std::to_string(v.vf) + " node_guid G, then ip link set " +
                l.name + " vf " + std::to_string(v.vf) +
                " port_guid G (separate commands: iproute2 applies only the first GUID of one), then unbind "
                "and bind the VF's driver; or pass runtimeConfig.infinibandGUID and let ibcni set them",
            false});
      }
      pf.vfs.push_back(std::move(v));
    }
    if (pf.vfs.empty()) {
      continue;
    }
    seen.insert((*pci)->text);
    pf.pci = (*pci)->text;
    pf.netdev = l.name;
    pf.ifIndex = l.index;
    pf.driver = fn->driver;
    pf.rdmaDevices = fn->rdmaDevices;
    r.sriovPfs.push_back(std::move(pf));
  }
}

// The RDMA netns mode; false when the kernel has no RDMA netlink to ask.
bool readRdmaNetnsMode(const DoctorInputs& in, DoctorReport& r) {
  auto mode = in.rdma.netnsMode(in.hostNetns);
  if (mode) {
    r.rdmaNetnsMode = *mode == rdma::NetnsMode::kExclusive ? "exclusive" : "shared";
  } else {
    r.rdmaNetnsMode = "unknown";
  }
  return static_cast<bool>(mode);
}

// libibverbs: one probe without a device tells whether it loads at all.
void probeVerbsLibrary(const DoctorInputs& in, DoctorReport& r) {
  if (in.verbs == nullptr) {
    r.verbsUnavailableReason = "no verbs probe";
    return;
  }
  verbs::ProbeRequest req;
  req.timeout = kProbeTimeout;
  req.netnsPath = in.verbsNetnsPath;
  auto res = in.verbs->probe(req);
  if (res) {
    r.verbsAvailable = res->available;
    r.verbsUnavailableReason = res->unavailableReason;
  } else {
    r.verbsUnavailableReason = res.error().describe();
  }
}

// GPUDirect RDMA: whether the NVIDIA driver has its peer-memory module beside it.
std::string gpuDirectState(const std::function<bool(const std::string&)>& moduleLoaded) {
  return !moduleLoaded("nvidia")          ? "no NVIDIA driver"
         : moduleLoaded("nvidia_peermem") ? "enabled"
                                          : "disabled";
}

// Devices and ports, in the kernel's order.
void listDevicesAndPorts(const DoctorInputs& in, DoctorReport& r) {
  auto ports = in.rdma.ports(in.hostNetns);
  if (!ports) {
    problem(r, "cannot list RDMA ports: " + ports.error().describe(), "run rdma link show to compare");
    return;
  }
  for (const auto& p : *ports) {
    auto dev = std::find_if(r.devices.begin(), r.devices.end(),
                            [&](const DeviceReport& d) { return d.index == p.deviceIndex && d.name == p.deviceName; });
    if (dev == r.devices.end()) {
      r.devices.push_back(DeviceReport{p.deviceName, p.deviceIndex, {}, {}});
      dev = r.devices.end() - 1;
    }
    PortReport port;
    port.port = p.port;
    port.netdev = p.netdevName;
    port.netdevIndex = p.netdevIndex;
    dev->ports.push_back(std::move(port));
  }
}

// Each port: its verbs probe, its P_Key table (from sysfs when verbs gave none), its problems.
void examinePorts(const DoctorInputs& in, DoctorReport& r) {
  for (auto& dev : r.devices) {
    for (auto& port : dev.ports) {
      if (in.verbs != nullptr && r.verbsAvailable) {
        probePort(in, r, dev, port);
      }
      if (port.pkeys.empty()) {
        if (auto pk = in.devices.pkeys(dev.name, port.port); pk) {
          port.pkeys = *pk;
        }
      }
      checkPort(r, dev, port);
    }
  }
}

// The problems of the node as a whole: no devices, no libibverbs, no uverbs, GPUDirect, netns mode.
std::vector<Problem> nodeProblems(const DoctorReport& r, bool rdmaNetlink) {
  std::vector<Problem> node;
  if (r.devices.empty()) {
    node.push_back({rdmaNetlink ? "no RDMA devices: RDMA netlink lists none"
                                : "no RDMA devices: the kernel has no RDMA netlink (ib_core is not loaded)",
                    "load the NIC's RDMA driver (mlx5_ib for ConnectX, or rdma_rxe for a test: rdma link add "
                    "rxe0 type rxe netdev eth0) and check rdma link show",
                    false});
  }
  if (!r.verbsAvailable) {
    node.push_back({"libibverbs is not loadable: " + r.verbsUnavailableReason,
                    "install rdma-core's libibverbs1 and the provider of your NIC (ibverbs-providers), so that "
                    "libibverbs.so.1 loads",
                    false});
  }
  if (!r.devices.empty() && r.uverbsDevices.empty()) {
    node.push_back({"no /dev/infiniband/uverbs*: user-space verbs cannot open any device",
                    "modprobe ib_uverbs (and check that udev made /dev/infiniband)", false});
  }
  if (r.gpuDirect == "disabled" && !r.devices.empty()) {
    node.push_back({"GPUDirect RDMA is off: the NVIDIA driver is loaded but nvidia_peermem is not, so RDMA goes "
                    "through host memory (NCCL over InfiniBand runs at a fraction of its bandwidth)",
                    "modprobe nvidia-peermem (load it after the NIC driver; GPU Operator: driver.rdma.enabled=true; "
                    "reload it after an OFED/DOCA driver upgrade, which unloads it)",
                    false});
  }
  if (r.rdmaNetnsMode == "shared") {
    node.push_back({"RDMA netns mode is shared: every namespace sees every RDMA device",
                    "rdmaIsolation needs exclusive mode: rdma system set netns exclusive (persist it with "
                    "options ib_core netns_mode=0)",
                    true});
  }
  return node;
}

std::string renderConfig(const ConfigReport& c) {
  std::string s = "\nNetwork config " + c.file + ": ";
  if (!c.name.empty()) {
    s += c.name + " (mode " + c.mode + ")";
    if (!c.resourceName.empty()) {
      s += " resource " + c.resourceName;
    }
  }
  s += c.works ? " would work on this node\n" : " would NOT work on this node\n";
  for (const auto& o : c.ok) {
    s += "  ok: " + o + "\n";
  }
  for (const auto& d : c.candidates) {
    s += "  " + d.device + ": ";
    if (d.works) {
      s += d.needsGuid ? "works when the pod asks for a GUID (runtimeConfig.infinibandGUID): it has none\n"
                       : "works\n";
    } else {
      s += "refused: " + d.problem + "\n";
    }
    for (const auto& w : d.warnings) {
      s += "      warning: " + w + "\n";
    }
  }
  for (const auto& p : c.problems) {
    s += std::string(p.informational ? "  note: " : "  - ") + p.what + "\n      fix: " + p.fix + "\n";
  }
  return s;
}

// " driver vfio-pci (a VM's VF)" for the VF listing; nothing when the driver is unknown.
std::string vfDriverText(const std::string& driver) {
  if (driver.empty()) {
    return "";
  }
  return " driver " + driver +
         (plugin::SriovVfioMode::isVfioDriver(driver) ? " (for a VM: ADD sets its GUID through the PF, no netdev)"
                                                      : "");
}

}  // namespace

std::vector<std::string> listDirectory(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.starts_with(prefix)) {
      out.push_back(std::move(name));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

DoctorReport collect(const DoctorInputs& in) {
  DoctorReport r;
  const bool rdmaNetlink = readRdmaNetnsMode(in, r);
  probeVerbsLibrary(in, r);
  if (in.listUverbs) {
    r.uverbsDevices = in.listUverbs();
  }
  if (in.moduleLoaded) {
    r.gpuDirect = gpuDirectState(in.moduleLoaded);
  }
  if (rdmaNetlink) {
    listDevicesAndPorts(in, r);
  }
  examinePorts(in, r);

  auto links = hostLinks(in);
  collectIpoib(links, r);
  collectSriov(in, links, r);

  // Node-wide problems, first in the list.
  const std::vector<Problem> node = nodeProblems(r, rdmaNetlink);
  r.problems.insert(r.problems.begin(), node.begin(), node.end());
  return r;
}

int exitStatus(const DoctorReport& report) {
  if (report.config) {
    return report.config->works ? 0 : 1;
  }
  return std::any_of(report.problems.begin(), report.problems.end(),
                     [](const Problem& p) { return !p.informational; })
             ? 1
             : 0;
}

std::string renderText(const DoctorReport& r) {
  std::string s;
  s += "RDMA netns mode: " + r.rdmaNetnsMode + "\n";
  s += "libibverbs: " + std::string(r.verbsAvailable ? "loadable" : "NOT loadable (" + r.verbsUnavailableReason + ")") +
       "\n";
  s += "GPUDirect RDMA: " + r.gpuDirect + "\n";
  s += "/dev/infiniband: ";
  if (r.uverbsDevices.empty()) {
    s += "no uverbs devices\n";
  } else {
    for (std::size_t i = 0; i < r.uverbsDevices.size(); ++i) {
      s += (i ? " " : "") + r.uverbsDevices[i];
    }
    s += "\n";
  }

  s += "\nRDMA devices:" + std::string(r.devices.empty() ? " none\n" : "\n");
  for (const auto& d : r.devices) {
    s += "  " + d.name + " (index " + std::to_string(d.index) + ")";
    if (!d.nodeGuid.empty()) {
      s += " node GUID " + d.nodeGuid;
    }
    s += "\n";
    for (const auto& p : d.ports) {
      s += "    port " + std::to_string(p.port) + ":";
      if (p.queried) {
        s += " " + p.state + " (" + p.physState + ") " + p.linkLayer + " LID " + std::to_string(p.lid) + " SM LID " +
             std::to_string(p.smLid) + " port GUID " + p.portGuid;
      } else {
        s += " state unknown (libibverbs did not answer)";
      }
      s += " netdev " + (p.netdev.empty() ? std::string("-") : p.netdev);
      if (!p.pkeys.empty()) {
        s += " pkeys";
        for (auto k : p.pkeys) {
          s += " " + k.hex();
        }
      }
      s += "\n";
    }
  }

  s += "\nIPoIB links:" + std::string(r.ipoibLinks.empty() ? " none\n" : "\n");
  for (const auto& l : r.ipoibLinks) {
    s += "  " + l.name + " (index " + std::to_string(l.index) + ") ";
    s += l.parentIndex == 0 ? std::string("parent")
                            : "child of " + (l.parent.empty() ? "index " + std::to_string(l.parentIndex) : l.parent);
    s += " pkey " + l.pkey.hex() + " mode " + l.mode + " mtu " + std::to_string(l.mtu) + (l.adminUp ? " up" : " down") +
         "\n";
  }

  s += "\nSR-IOV PFs:" + std::string(r.sriovPfs.empty() ? " none\n" : "\n");
  for (const auto& pf : r.sriovPfs) {
    s += "  " + pf.pci + " " + pf.netdev + " driver " + (pf.driver.empty() ? "-" : pf.driver);
    for (const auto& d : pf.rdmaDevices) {
      s += " rdma " + d;
    }
    s += ", " + std::to_string(pf.vfs.size()) + " VFs\n";
    for (const auto& v : pf.vfs) {
      s += "    vf " + std::to_string(v.vf) + (v.pci.empty() ? "" : " " + v.pci) + vfDriverText(v.driver) + " state " +
           (v.linkState.empty() ? "-" : v.linkState) + " node GUID " + (v.nodeGuid.empty() ? "-" : v.nodeGuid) +
           " port GUID " + (v.portGuid.empty() ? "-" : v.portGuid) + "\n";
    }
  }

  s += "\nProblems:" + std::string(r.problems.empty() ? " none\n" : "\n");
  for (const auto& p : r.problems) {
    s += std::string(p.informational ? "  note: " : "  - ") + p.what + "\n      fix: " + p.fix + "\n";
  }
  if (r.config) {
    s += renderConfig(*r.config);
  }
  return s;
}

}  // namespace ibcni::doctor
