// SPDX-License-Identifier: Apache-2.0
// `ibcni doctor`: wiring only, like production_deps.cpp.
#include "doctor_main.h"

#include <cstdio>
#include <exception>
#include <string>

#include "doctor/doctor.h"
#include "ibcni/os/netns.h"
#include "netlink/libnl_netlink.h"
#include "rdma/mnl_rdma_netlink.h"
#include "result/doctor_json.h"
#include "sysfs/sysfs_devices.h"
#include "verbs/dlopen_verbs_probe.h"

namespace ibcni::plugin {

int runDoctor(int argc, char** argv) {
  bool json = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && !json) {
      json = true;
    } else {
      std::fputs("usage: ibcni doctor [--json]\n", stderr);
      return 2;
    }
  }
  try {
    auto host = os::Netns::open("/proc/self/ns/net");
    if (!host) {
      std::fprintf(stderr, "ibcni doctor: %s\n", host.error().describe().c_str());
      return 1;
    }
    nl::LibnlNetlink netlink;
    sysfs::SysfsDevices devices{"/sys"};
    rdma::MnlRdmaNetlink rdma;
    verbs::DlopenVerbsProbe verbs;
    doctor::DoctorInputs in{netlink, devices, rdma, &verbs, *host, "/proc/self/ns/net", {}, {}};
    in.listNetdevs = [] { return doctor::listDirectory("/sys/class/net", ""); };
    in.listUverbs = [] { return doctor::listDirectory("/dev/infiniband", "uverbs"); };
    const doctor::DoctorReport report = doctor::collect(in);
    const std::string out = json ? result::printDoctorReport(report) + "\n" : doctor::renderText(report);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return doctor::exitStatus(report);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ibcni doctor: %s\n", e.what());
    return 1;
  }
}

}  // namespace ibcni::plugin
