// SPDX-License-Identifier: Apache-2.0
#include "plugin/modes/ipoib_child.h"

#include "plugin/modes/record_ahead.h"

#include <cerrno>

#include "lib/log/log.h"

namespace ibcni::plugin {

namespace {

using cni::Errc;

constexpr std::uint32_t kConnectedMaxMtu = 65520;

nl::IpoibMode toNl(config::IpoibMode m) {
  return m == config::IpoibMode::kConnected ? nl::IpoibMode::kConnected : nl::IpoibMode::kDatagram;
}

const char* modeName(nl::IpoibMode m) { return m == nl::IpoibMode::kConnected ? "connected" : "datagram"; }

// What a link is, for an error that says why it cannot be an IPoIB parent.
std::string describeLink(const nl::Link& l) {
  std::string kind = l.kind.empty() ? "physical" : l.kind;
  std::string type = l.arpType == 1 ? "ether" : l.arpType == nl::kArphrdInfiniband ? "infiniband" : std::to_string(l.arpType);
  return "a " + kind + " link of type " + type;
}

// The parent named by the config, in the host.
cni::Result<nl::Link> findParent(const ModeContext& ctx) {
  const auto& conf = ctx.inv.conf;
  auto& nl = ctx.deps.netlink;
  std::string field = "master = \"" + conf.master + "\"";
  std::optional<nl::Link> link;
  if (conf.master.empty()) {
    field = "rdmaDevice = \"" + conf.rdmaDevice + "\", port = " + std::to_string(conf.port);
    // The same lookup as DEL's lock key (commands/common.cpp), so both lock the same parent.
    auto parent = ipoibPortParent(ctx.deps, ctx.host, conf.rdmaDevice, conf.port);
    if (!parent) {
      return std::unexpected(parent.error());
    }
    link = std::move(*parent);
  } else {
    auto found = nl.linkByName(ctx.host, conf.master);
    if (!found) {
      if (found.error().err == ENODEV) {
        return cni::fail(Errc::kDeviceNotFound,
                         field + ": no such network interface in the host namespace (`ip -d link show type ipoib` "
                                 "lists the IPoIB interfaces; rdmaDevice and port find it whatever its name)");
      }
      return std::unexpected(sysError(Errc::kNetlinkFailure, "cannot look up " + field, found.error()));
    }
    link = std::move(*found);
  }
  if (link->arpType != nl::kArphrdInfiniband || link->kind != "ipoib") {
    return cni::fail(Errc::kInvalidConfig, field + ": " + link->name + " is " + describeLink(*link) +
                                               ", not an IPoIB interface; an IPoIB child needs an IPoIB parent "
                                               "(`ip -d link show type ipoib`)");
  }
  if (link->parentIndex != 0) {
    // The kernel refuses children of a child (ipoib_new_child_link: EINVAL, with no text).
    std::string parentName = "link " + std::to_string(link->parentIndex);
    if (auto p = nl.linkByIndex(ctx.host, link->parentIndex); p) {
      parentName = p->name;
    }
    const std::string pkey = link->ipoib ? " (pkey " + link->ipoib->pkey.hex() + ")" : std::string();
    return cni::fail(Errc::kInvalidConfig, field + ": " + link->name + " is an IPoIB child of " + parentName + pkey +
                                               ", and a child cannot have children; use its parent: \"master\": \"" +
                                               parentName + "\" with the \"pkey\" you want");
  }
  return *link;
}

// The child in `ns` called `name`, if it is an IPoIB link.
std::optional<nl::Link> ipoibLink(const ModeContext& ctx, const os::Netns& ns, const std::string& name) {
  auto l = ctx.deps.netlink.linkByName(ns, name);
  if (!l || l->kind != "ipoib") {
    return std::nullopt;
  }
  return *l;
}

// What DEL and CHECK need of the child: its parent, its pkey, mode and umcast, the RDMA device
// behind it.
void recordChild(const ModeContext& ctx, const HostDevice& device, const nl::IpoibChildSpec& spec,
                 state::AttachmentRecord& record) {
  record.deviceKey = device.deviceKey;
  record.hostName = device.link.name;
  record.hostIndex = device.link.index;
  record.pkey = spec.pkey.partition();
  record.ipoibMode = modeName(spec.mode);
  record.umcast = spec.umcast;
  if (device.rdma) {
    record.rdmaDevice = device.rdma->name;
    record.rdmaPort = device.rdma->port;
  }
  if (ctx.deps.bootId) {
    record.bootId = ctx.deps.bootId();
  }
}

// Creates the child `spec` in the host under its temporary name, written ahead; its undo deletes it
// wherever it is then.
cni::Result<void> createChild(const ModeContext& ctx, const HostDevice& device, const os::Netns& pod,
                              nl::IpoibChildSpec& spec, os::Rollback& rollback, state::AttachmentRecord& record) {
  auto& nl = ctx.deps.netlink;
  const os::Netns& host = ctx.host;
  const auto& ifName = ctx.inv.args.ifName;
  // The child's temporary name is written ahead: a process that dies before the child is in the
  // pod under CNI_IFNAME leaves DEL the name to find it by, in the host or in the pod.
  RecordAhead ahead(ctx, record, rollback);
  std::optional<os::SysResult<void>> created;
  // A temporary name another invocation happens to use: draw another (3 times).
  for (int attempt = 0; attempt < 4 && (!created || (!*created && created->error().err == EEXIST)); ++attempt) {
    if (attempt > 0) {
      spec.name = temporaryLinkName();
    }
    record.tempName = spec.name;
    if (auto r = ahead.save(); !r) {
      return std::unexpected(r.error());
    }
    created = nl.addIpoibChild(host, spec);
  }
  if (auto r = *created; !r) {
    return std::unexpected(sysError(Errc::kNetlinkFailure,
                                    "cannot create an IPoIB child of " + device.link.name + " with pkey " +
                                        spec.pkey.hex() + " in " + modeName(spec.mode) + " mode",
                                    r.error()));
  }
  // Until it is in the pod, the child is deleted in the host; after, in the pod (wherever a
  // later undo finds it).
  rollback.add("delete the IPoIB child " + spec.name, [&nl, &host, &pod, tmp = spec.name, ifName]() -> os::SysResult<void> {
    for (const os::Netns* ns : {&host, &pod}) {
      for (const std::string& name : {tmp, ifName}) {
        if (ns == &host && name == ifName) {
          continue;
        }
        if (auto l = nl.linkByName(*ns, name); l && l->kind == "ipoib") {
          return nl.deleteLink(*ns, l->index);
        }
      }
    }
    return {};
  });
  return {};
}

// Moves the child `name` from the host into `pod`, named CNI_IFNAME there.
// @return the child in the pod.
cni::Result<nl::Link> moveChildIntoPod(const ModeContext& ctx, const std::string& name, const os::Netns& pod) {
  auto& nl = ctx.deps.netlink;
  const os::Netns& host = ctx.host;
  const auto& ifName = ctx.inv.args.ifName;
  auto child = nl.linkByName(host, name);
  if (!child) {
    return std::unexpected(sysError(Errc::kNetlinkFailure, "cannot find the new IPoIB child " + name, child.error()));
  }
  if (auto r = nl.moveLink(host, child->index, pod); !r) {
    return std::unexpected(sysError(Errc::kNetlinkFailure,
                                    "cannot move IPoIB child " + name + " into netns " + pod.path(), r.error()));
  }
  auto moved = nl.linkByName(pod, name);
  if (!moved) {
    return std::unexpected(sysError(Errc::kNetlinkFailure, "cannot find " + name + " after moving it", moved.error()));
  }
  if (auto r = nl.renameLink(pod, moved->index, ifName); !r) {
    if (r.error().err == EEXIST) {
      return std::unexpected(sysError(Errc::kIfNameExists,
                                      "netns " + pod.path() + " already has an interface named " + ifName, r.error()));
    }
    return std::unexpected(sysError(Errc::kNetlinkFailure, "cannot rename " + name + " to " + ifName, r.error()));
  }
  return *moved;
}

// In the pod: the configured MTU, and up.
// @return the child as it is then.
cni::Result<nl::Link> configureChild(const ModeContext& ctx, const os::Netns& pod, const nl::Link& moved,
                                     state::AttachmentRecord& record) {
  auto& nl = ctx.deps.netlink;
  const auto& conf = ctx.inv.conf;
  const auto& ifName = ctx.inv.args.ifName;
  const int idx = moved.index;
  if (conf.mtu && *conf.mtu != moved.mtu) {
    if (auto r = nl.setMtu(pod, idx, *conf.mtu); !r) {
      return std::unexpected(sysError(Errc::kNetlinkFailure,
                                      "cannot set mtu = " + std::to_string(*conf.mtu) + " on " + ifName, r.error()));
    }
    record.podMtu = *conf.mtu;
  }
  if (auto r = nl.setLinkUp(pod, idx, true); !r) {
    return std::unexpected(sysError(Errc::kNetlinkFailure, "cannot bring " + ifName + " up", r.error()));
  }
  auto final = nl.linkByIndex(pod, idx);
  if (!final) {
    return std::unexpected(sysError(Errc::kNetlinkFailure, "cannot read " + ifName + " back", final.error()));
  }
  record.podIndex = idx;
  return *final;
}

}  // namespace

cni::Result<HostDevice> IpoibChildMode::resolve(const ModeContext& ctx) {
  const auto& conf = ctx.inv.conf;
  auto parent = findParent(ctx);
  if (!parent) {
    return std::unexpected(parent.error());
  }
  nl::IpoibChildSpec spec;
  spec.parentIndex = parent->index;
  const nl::IpoibInfo parentInfo =
      parent->ipoib.value_or(nl::IpoibInfo{net::Pkey::fromWire(0xffff), nl::IpoibMode::kDatagram, false});
  // The kernel joins the partition as a full member: send the pkey with that bit, as the parent has it.
  spec.pkey = conf.pkey.value_or(parentInfo.pkey).fullMember();
  spec.mode = conf.ipoibMode ? toNl(*conf.ipoibMode) : parentInfo.mode;
  spec.umcast = conf.umcast;
  if (!spec.pkey.valid()) {
    return cni::fail(Errc::kInvalidConfig, "the parent " + parent->name +
                                               " reports no usable pkey to inherit; set \"pkey\" (e.g. \"0x7fff\")");
  }
  if (conf.mtu) {
    const std::uint32_t max = spec.mode == nl::IpoibMode::kConnected ? kConnectedMaxMtu : parent->mtu;
    if (*conf.mtu > max) {
      return cni::fail(Errc::kInvalidConfig,
                       "invalid mtu = " + std::to_string(*conf.mtu) + ": in " + modeName(spec.mode) +
                           " mode an IPoIB child carries at most " + std::to_string(max) +
                           (spec.mode == nl::IpoibMode::kConnected
                                ? std::string()
                                : " (the MTU of its parent " + parent->name + "; connected mode allows up to 65520)"));
    }
  }
  HostDevice dev;
  // The RDMA device and port behind the parent, for the verbs check.
  if (!conf.rdmaDevice.empty()) {
    dev.rdma = RdmaPlace{conf.rdmaDevice, 0, false, conf.port, false};
  } else if (auto pci = ctx.deps.devices.pciOfNetdev(parent->name, parent->index); pci && *pci) {
    if (auto fn = ctx.deps.devices.pciFunction(**pci); fn && !fn->rdmaDevices.empty()) {
      dev.rdma = RdmaPlace{fn->rdmaDevices.front(), 0, false, 1, false};
    }
  }
  dev.deviceKey = "ipoib-" + parent->name;
  dev.link = *parent;
  dev.ipoibChild = spec;
  return dev;
}

cni::Result<nl::Link> IpoibChildMode::setUp(const ModeContext& ctx, const HostDevice& device, const os::Netns& pod,
                                            os::Rollback& rollback, state::AttachmentRecord& record) {
  nl::IpoibChildSpec spec = *device.ipoibChild;
  spec.name = temporaryLinkName();
  recordChild(ctx, device, spec, record);

  log::info("creating IPoIB child {} of {} (pkey {}, {} mode, umcast {})", spec.name, device.link.name, spec.pkey.hex(),
            modeName(spec.mode), spec.umcast ? 1 : 0);
  if (auto r = createChild(ctx, device, pod, spec, rollback, record); !r) {
    return std::unexpected(r.error());
  }
  auto moved = moveChildIntoPod(ctx, spec.name, pod);
  if (!moved) {
    return std::unexpected(moved.error());
  }
  record.tempName.clear();  // ADD's final record names the child by CNI_IFNAME alone
  return configureChild(ctx, pod, *moved, record);
}

// The child is a virtual link, destroyed with the namespace it is in; the parent never leaves the
// host. (The RDMA device, when ADD moved it, is returned by the kernel when the namespace ends.)
bool IpoibChildMode::awaitsReturn(const ModeContext& /*ctx*/, const state::AttachmentRecord& /*record*/) {
  return false;
}

cni::Result<void> IpoibChildMode::tearDown(const ModeContext& ctx, const state::AttachmentRecord& record,
                                           const os::Netns* pod) {
  // An ADD that died between creating the child and moving it left it in the host under its
  // temporary name: the record written ahead names it. Only a child of the recorded parent with
  // the recorded pkey is taken for ADD's.
  if (!record.tempName.empty()) {
    auto l = ipoibLink(ctx, ctx.host, record.tempName);
    if (l && (record.hostIndex == 0 || l->parentIndex == record.hostIndex) &&
        (!record.pkey || (l->ipoib && l->ipoib->pkey.samePartition(*record.pkey)))) {
      log::info("deleting IPoIB child {} an interrupted ADD left in the host", record.tempName);
      if (auto r = ctx.deps.netlink.deleteLink(ctx.host, l->index); !r && r.error().err != ENODEV) {
        return std::unexpected(
            sysError(Errc::kNetlinkFailure, "cannot delete IPoIB child " + record.tempName, r.error()));
      }
    }
  }
  if (pod == nullptr) {
    log::info("the pod's netns is gone, and the IPoIB child {} with it", record.ifName);
    return {};
  }
  auto child = ipoibLink(ctx, *pod, record.ifName);
  if (!child && !record.tempName.empty()) {
    child = ipoibLink(ctx, *pod, record.tempName);  // moved, not yet renamed
  }
  if (!child) {
    log::info("no IPoIB child {} in netns {}: nothing to delete", record.ifName, pod->path());
    return {};
  }
  if (record.pkey && child->ipoib && !child->ipoib->pkey.samePartition(*record.pkey)) {
    log::warn("{} in netns {} has pkey {}, not the {} ibcni created: leaving it alone", child->name, pod->path(),
              child->ipoib->pkey.hex(), record.pkey->hex());
    return {};
  }
  log::info("deleting IPoIB child {} in netns {}", child->name, pod->path());
  if (auto r = ctx.deps.netlink.deleteLink(*pod, child->index); !r && r.error().err != ENODEV) {
    return std::unexpected(sysError(Errc::kNetlinkFailure, "cannot delete IPoIB child " + child->name, r.error()));
  }
  return {};
}

cni::Result<void> IpoibChildMode::check(const ModeContext& ctx, const state::AttachmentRecord& record,
                                        const os::Netns& pod, const nl::Link& podLink) {
  (void)pod;
  const auto& ifName = ctx.inv.args.ifName;
  if (podLink.kind != "ipoib" || !podLink.ipoib) {
    return cni::fail(Errc::kCheckFailed, ifName + " is " + describeLink(podLink) + ", not an IPoIB child");
  }
  if (record.pkey && !podLink.ipoib->pkey.samePartition(*record.pkey)) {
    return cni::fail(Errc::kCheckFailed, ifName + " has pkey " + podLink.ipoib->pkey.hex() + ", expected " +
                                             record.pkey->fullMember().hex());
  }
  if (!record.ipoibMode.empty() && record.ipoibMode != modeName(podLink.ipoib->mode)) {
    return cni::fail(Errc::kCheckFailed, ifName + " is in " + modeName(podLink.ipoib->mode) + " mode, expected " +
                                             record.ipoibMode);
  }
  if (record.podMtu && podLink.mtu != *record.podMtu) {
    return cni::fail(Errc::kCheckFailed, ifName + " has mtu " + std::to_string(podLink.mtu) + ", expected " +
                                             std::to_string(*record.podMtu));
  }
  if (!podLink.adminUp) {
    return cni::fail(Errc::kCheckFailed, ifName + " in the pod is down");
  }
  return {};
}

std::optional<state::AttachmentRecord> IpoibChildMode::recover(const ModeContext& ctx, const nl::Link& podLink) {
  // Without a record, an IPoIB link named CNI_IFNAME in the pod is this attachment's child: the
  // runtime names the interface per network.
  if (podLink.kind != "ipoib") {
    return std::nullopt;
  }
  state::AttachmentRecord r = recordFor(ctx.inv);
  r.podIndex = podLink.index;
  return r;
}

cni::Result<nl::Link> ipoibPortParent(Deps& deps, const os::Netns& host, const std::string& rdmaDevice,
                                      std::uint32_t port) {
  const std::string field = "rdmaDevice = \"" + rdmaDevice + "\", port = " + std::to_string(port);
  auto names = deps.devices.netdevsOfRdmaPort(rdmaDevice, port);
  if (!names) {
    return std::unexpected(sysError(cni::Errc::kDeviceNotFound,
                                    field + ": no such RDMA device on this node (see `rdma dev`)", names.error()));
  }
  for (const auto& n : *names) {
    // A pkey child (an IPoIB link with a parent) shares its parent's device and dev_port in sysfs.
    if (auto l = deps.netlink.linkByName(host, n); l && l->arpType == nl::kArphrdInfiniband && l->parentIndex == 0) {
      return *l;
    }
  }
  return cni::fail(cni::Errc::kDeviceNotFound, field + ": that port has no IPoIB netdev in the host namespace (is "
                                                       "ib_ipoib loaded, and is the port InfiniBand, not Ethernet?)");
}

std::string IpoibChildMode::deviceKeyFromConfig(const ModeContext& ctx) {
  const auto& conf = ctx.inv.conf;
  if (!conf.master.empty()) {
    return "ipoib-" + conf.master;
  }
  if (auto parent = ipoibPortParent(ctx.deps, ctx.host, conf.rdmaDevice, conf.port)) {
    return "ipoib-" + parent->name;
  }
  return "ipoib-" + conf.rdmaDevice + "-" + std::to_string(conf.port);
}

}  // namespace ibcni::plugin
