// SPDX-License-Identifier: Apache-2.0
#include "plugin/agent/pod_ports.h"

#include <map>

#include "ibcni/cni/cmd_args.h"

namespace ibcni::plugin {

namespace {

PodPortCounters owner(const state::AttachmentRecord& r) {
  PodPortCounters p;
  p.network = r.network;
  if (auto args = cni::parseCniArgs(r.cniArgs)) {
    p.podNamespace = args->podNamespace;
    p.pod = args->podName;
  }
  return p;
}

}  // namespace

PodPorts readPodPorts(const std::vector<state::AttachmentRecord>& records, const rdma::CounterSource& source) {
  // One batch per netns: at most one child for a pod's devices.
  std::map<std::string, std::vector<const state::AttachmentRecord*>> byNetns;
  for (const auto& r : records) {
    if (!r.rdmaDevice.empty()) {
      byNetns[r.netns].push_back(&r);
    }
  }
  PodPorts out;
  for (const auto& [netns, group] : byNetns) {
    std::vector<rdma::PortRef> refs;
    for (const auto* r : group) {
      refs.push_back({r->rdmaDevice, r->rdmaPort});
    }
    auto read = rdma::readPortCountersBatch(netns, refs, source);
    for (std::size_t i = 0; i < group.size() && i < read.size(); ++i) {
      if (!read[i]) {
        out.errors.push_back(group[i]->network + " " + group[i]->containerId + "/" + group[i]->ifName + ": " +
                             read[i].error().msg);
        continue;
      }
      PodPortCounters p = owner(*group[i]);
      p.port = std::move(*read[i]);
      out.ports.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace ibcni::plugin
