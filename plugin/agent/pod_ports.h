// SPDX-License-Identifier: Apache-2.0
// The InfiniBand/RDMA port counters of every RDMA device attached to a pod on this node, for the
// node agent's metrics: the attachment records that name an RDMA device (sriov mode's VF, ipoib's
// parent HCA), read where the device lives (rdma/port_counters.h: the host's sysfs, or the pod's
// netns after an rdmaIsolation move), one namespace entry per pod at most.
#pragma once

#include <string>
#include <vector>

#include "ibcni/state/attachment_store.h"
#include "plugin/rdma/port_counters.h"

namespace ibcni::plugin {

/// One port of one attachment's RDMA device, with whose it is.
struct PodPortCounters {
  std::string podNamespace;  ///< K8S_POD_NAMESPACE of the ADD's CNI_ARGS ("" when not given)
  std::string pod;           ///< K8S_POD_NAME
  std::string network;
  rdma::PortCounters port;
};

struct PodPorts {
  std::vector<PodPortCounters> ports;  ///< in the order of the records
  std::vector<std::string> errors;     ///< ports that could not be read, in words
};

/// The counters of the RDMA device (rdmaDevice, rdmaPort) of each record that names one.
[[nodiscard]] PodPorts readPodPorts(const std::vector<state::AttachmentRecord>& records,
                                    const rdma::CounterSource& source = {});

}  // namespace ibcni::plugin
