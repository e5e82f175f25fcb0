// SPDX-License-Identifier: Apache-2.0
// ibcni-ipam: the embedded IPAM as a standalone CNI IPAM plugin, so that any CNI plugin (macvlan,
// host-device, ipoib-cni, ...) can use it in place of host-local. Wiring only, like main.cpp.
//
//   ibcni-ipam                    a CNI IPAM plugin: CNI_COMMAND and the configuration on stdin
//   ibcni-ipam gc CONFIG_FILE     frees the addresses of pods whose network namespace is gone, for
//                                 the network (or conflist) in CONFIG_FILE; prints what it freed
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <unistd.h>

#include "dispatch.h"
#include "ibcni/ipam/embedded.h"
#include "log/log.h"
#include "result/result_json.h"

namespace {

using nlohmann::json;

bool readStdin(std::string& out) {
  char buf[65536];
  while (true) {
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      return true;
    } else if (errno != EINTR) {
      return false;
    }
  }
}

// The network configuration ibcni-ipam serves in a .conf or .conflist file: the plugin object
// whose ipam.type is ibcni-ipam, with the list's name and cniVersion, as a runtime would send it.
std::optional<json> networkConfig(const json& file) {
  if (!file.contains("plugins")) {
    return file;
  }
  for (const auto& plugin : file.value("plugins", json::array())) {
    if (plugin.is_object() && plugin.contains("ipam") && plugin["ipam"].value("type", "") == ibcni::ipam::kEmbeddedIpamType) {
      json conf = plugin;
      conf["name"] = file.value("name", "");
      conf["cniVersion"] = file.value("cniVersion", "1.1.0");
      return conf;
    }
  }
  return std::nullopt;
}

int reclaimCommand(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  json file = json::parse(text.str(), nullptr, false);
  if (!in || file.is_discarded() || !file.is_object()) {
    std::cerr << "ibcni-ipam gc: " << path << " is not a readable JSON network configuration\n";
    return 2;
  }
  auto conf = networkConfig(file);
  if (!conf) {
    std::cerr << "ibcni-ipam gc: " << path << " has no plugin with \"ipam\": {\"type\": \"ibcni-ipam\"}\n";
    return 2;
  }
  ibcni::ipam::EmbeddedIpam ipam;
  ibcni::ipam::Request request;
  request.type = std::string(ibcni::ipam::kEmbeddedIpamType);
  request.rawConfig = conf->dump();
  auto released = ipam.reclaim(request);
  if (!released) {
    std::cout << ibcni::result::printError(released.error(), "") << "\n";
    return 1;
  }
  json out = json::array();
  for (const auto& r : *released) {
    out.push_back({{"containerID", r.containerId}, {"ifname", r.ifName}, {"pod", r.pod}, {"netns", r.netns},
                   {"addresses", r.addresses}});
  }
  std::cout << json{{"network", conf->value("name", "")}, {"released", out}}.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "gc") {
    if (argc != 3) {
      std::cerr << "usage: ibcni-ipam gc CONFIG_FILE\n";
      return 2;
    }
    try {
      return reclaimCommand(argv[2]);
    } catch (const std::exception& e) {
      std::cerr << "ibcni-ipam gc: " << e.what() << "\n";
      return 1;
    }
  }
  std::string input;
  bool stdinOk = readStdin(input);
  ibcni::plugin::Outcome out;
  try {
    ibcni::ipam::EmbeddedIpam ipam;
    ibcni::plugin::IpamVerbs verbs(ipam);
    out = ibcni::plugin::dispatch(
        [](const char* name) -> std::optional<std::string> {
          const char* v = std::getenv(name);
          return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
        },
        input, stdinOk, verbs);
  } catch (const std::exception& e) {  // only bad_alloc or a bug can get here
    out = {ibcni::result::printError({ibcni::cni::Errc::kInternal, "unexpected exception", e.what()}, ""), 1};
  }
  ibcni::log::flush();
  if (!out.stdoutText.empty()) {
    std::fwrite(out.stdoutText.data(), 1, out.stdoutText.size(), stdout);
  }
  if (std::fflush(stdout) != 0) {
    return 1;
  }
  return out.exitCode;
}
