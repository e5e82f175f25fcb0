// SPDX-License-Identifier: Apache-2.0
#include "plugin/cli/production_deps.h"

#include <ctime>
#include <unistd.h>

#include "ipam/backends/production_backends.h"
#include "plugin/cli/production_http.h"
#include "ipam/embedded_ipam.h"
#include "ipam/embedded_ipam_guids.h"
#include "ibcni/os/file_io.h"
#include "ibcni/os/time_text.h"
#include "plugin/delegate/delegate_ipam.h"
#include "plugin/delegate/ipam_router.h"
#include "plugin/netlink/libnl_netlink.h"
#include "lib/os/system_netns.h"
#include "plugin/rdma/mnl_rdma_netlink.h"
#include "plugin/verbs/dlopen_verbs_probe.h"
#include "plugin/state/call_event_ring.h"
#include "plugin/state/file_attachment_store.h"
#include "plugin/state/file_device_info.h"
#include "plugin/sysfs/sysfs_devices.h"
#include "ibcni/sysfs/net_sysctls.h"

extern char** environ;

namespace ibcni::plugin {

namespace {

std::vector<std::string> processEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    env.emplace_back(*e);
  }
  return env;
}

std::string nowRfc3339() { return os::rfc3339(std::chrono::system_clock::now()); }

// The kernel's random identity of this boot.
std::string bootId() {
  auto text = os::readFile("/proc/sys/kernel/random/boot_id", 64);
  if (!text) {
    return {};
  }
  while (!text->empty() && text->back() == '\n') {
    text->pop_back();
  }
  return *text;
}

ipam::EmbeddedIpamOptions ipamOptions(const ProductionDeps::BackendWrap& wrap) {
  ipam::EmbeddedIpamOptions o = clusterCapable(productionHttpClient());
  if (wrap) {
    o.backends = wrap(std::move(o.backends));
  }
  return o;
}

}  // namespace

struct ProductionDeps::Impl {
  explicit Impl(const BackendWrap& wrap) : embedded(ipamOptions(wrap)), guids(ipamOptions(wrap)) {}

  nl::LibnlNetlink netlink;
  os::SystemNetnsProvider netns;
  sysfs::SysfsDevices devices{"/sys"};
  std::unique_ptr<sysfs::NetSysctls> sysctls = sysfs::systemNetSysctls();
  rdma::MnlRdmaNetlink rdma;
  verbs::DlopenVerbsProbe verbs;
  state::FileDeviceInfoFiles deviceInfo;
  state::FileCallEvents callEvents;
  delegate::DelegateIpam delegated{processEnvironment()};
  ipam::EmbeddedIpam embedded;
  ipam::EmbeddedGuidPools guids;
  delegate::IpamRouter ipam{embedded, delegated};
};

ProductionDeps::ProductionDeps(const BackendWrap& wrapBackends) : impl_(std::make_unique<Impl>(wrapBackends)) {
  deps_ = std::make_unique<Deps>(Deps{
      impl_->netlink,
      impl_->netns,
      impl_->devices,
      impl_->rdma,
      impl_->ipam,
      [](const std::string& dir) -> std::unique_ptr<state::AttachmentStore> {
        return std::make_unique<state::FileAttachmentStore>(dir);
      },
      std::chrono::seconds(30),
      nowRfc3339,
      bootId,
  });
  deps_->verbs = &impl_->verbs;
  deps_->deviceInfo = &impl_->deviceInfo;
  deps_->ipamUpkeep = &impl_->embedded;
  deps_->guids = &impl_->guids;
  deps_->sysctls = impl_->sysctls.get();
#ifndef IBCNI_BENCH_NO_CALL_EVENTS  // cni_bench's copy of ibcni without the append (bench/CMakeLists.txt)
  deps_->callEvents = &impl_->callEvents;
#endif
}

ProductionDeps::~ProductionDeps() = default;

}  // namespace ibcni::plugin
