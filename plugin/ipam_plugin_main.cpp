// SPDX-License-Identifier: Apache-2.0
// ibcni-ipam: the embedded IPAM as a standalone CNI IPAM plugin, so that any CNI plugin (macvlan,
// host-device, ipoib-cni, ...) can use it in place of host-local. Wiring only, like main.cpp.
//
//   ibcni-ipam                    a CNI IPAM plugin: CNI_COMMAND and the configuration on stdin
//   ibcni-ipam gc CONFIG_FILE     frees the addresses of pods whose network namespace is gone, for
//                                 the network (or conflist) in CONFIG_FILE; prints what it freed
//   ibcni-ipam version            one line: release and CNI spec versions
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "cluster_backends.h"
#include "dispatch.h"
#include "embedded_ipam.h"
#include "ibcni/config/net_conf.h"
#include "ibcni/os/file_io.h"
#include "process_main.h"
#include "result/result_json.h"
#include "version.h"

namespace {

using nlohmann::json;

int reclaimCommand(const std::string& path) {
  auto text = ibcni::os::readFile(path, std::size_t{1} << 20);
  auto conf = text ? ibcni::config::parseIpamNetworkFile(*text)
                   : ibcni::cni::Result<ibcni::config::NetConf>(ibcni::cni::fail(
                         ibcni::cni::Errc::kDecodingFailure, "is not a readable JSON network configuration"));
  if (!conf && conf.error().code == ibcni::cni::Errc::kDecodingFailure) {
    std::fprintf(stderr, "ibcni-ipam gc: %s %s\n", path.c_str(), conf.error().msg.c_str());
    return 2;
  }
  if (!conf) {
    std::printf("%s\n", ibcni::result::printError(conf.error(), "").c_str());
    return 1;
  }
  ibcni::ipam::EmbeddedIpam ipam(ibcni::plugin::clusterCapable());
  const ibcni::cni::CmdArgs args;
  const ibcni::cni::CniArgs cniArgs;
  auto released = ipam.reclaim(ibcni::ipam::Request{*conf, args, cniArgs, {}});
  if (!released) {
    std::printf("%s\n", ibcni::result::printError(released.error(), "").c_str());
    return 1;
  }
  json out = json::array();
  for (const auto& r : *released) {
    out.push_back({{"containerID", r.containerId}, {"ifname", r.ifName}, {"pod", r.pod}, {"netns", r.netns},
                   {"addresses", r.addresses}});
  }
  std::printf("%s\n", json{{"network", conf->name}, {"released", out}}.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (ibcni::plugin::isVersionRequest(argc, argv)) {
    std::puts(ibcni::plugin::versionLine("ibcni-ipam").c_str());
    return 0;
  }
  if (argc >= 2 && std::string(argv[1]) == "gc") {
    if (argc != 3) {
      std::fputs("usage: ibcni-ipam gc CONFIG_FILE\n", stderr);
      return 2;
    }
    try {
      return reclaimCommand(argv[2]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ibcni-ipam gc: %s\n", e.what());
      return 1;
    }
  }
  return ibcni::plugin::runMain([](const ibcni::plugin::Getenv& getenv, std::string_view input, bool inputOk) {
    ibcni::ipam::EmbeddedIpam ipam(ibcni::plugin::clusterCapable());
    ibcni::plugin::IpamVerbs verbs(ipam);
    return ibcni::plugin::dispatch(getenv, input, inputOk, verbs);
  });
}
