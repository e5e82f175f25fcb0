// SPDX-License-Identifier: Apache-2.0
// Turns `ibv_devinfo -v` text (tests/unit/verbs/testdata) into the verbs::PortFacts the probe would have
// reported for the same ports, so that the check's and the doctor's decisions are tested with the
// values of real hardware. Only the fields the probe reports are read; the pkey table is not in
// ibv_devinfo's output (see tests/unit/verbs/testdata/README.md).
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ibcni/verbs/verbs_probe.h"

namespace ibcni::testing {

/// One port of the text, with the device it belongs to.
struct DevinfoPort {
  std::string device;
  verbs::PortFacts facts;
};

namespace devinfo_detail {

inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// "PORT_ACTIVE (4)" → 4: the number in parentheses.
inline int numberInParens(const std::string& v) {
  const auto open = v.rfind('(');
  const auto close = v.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    throw std::runtime_error("no (N) in \"" + v + "\"");
  }
  return std::stoi(v.substr(open + 1, close - open - 1));
}

// "88e9:a4ff:ff25:a462" → 0x88e9a4ffff25a462.
inline std::uint64_t guid(const std::string& v) {
  std::string hex;
  for (char c : v) {
    if (c != ':') {
      hex += c;
    }
  }
  return std::stoull(hex, nullptr, 16);
}

// "fe80:0000:0000:0000:88e9:a4ff:ff25:a462" (the long form ibv_devinfo prints for IB GIDs).
inline std::array<std::uint8_t, 16> gid(const std::string& v) {
  std::array<std::uint8_t, 16> raw{};
  std::stringstream in(v);
  std::string group;
  std::size_t i = 0;
  while (std::getline(in, group, ':')) {
    if (i >= 16 || group.size() != 4) {
      throw std::runtime_error("GID not in the long form: " + v);
    }
    const auto word = static_cast<std::uint16_t>(std::stoul(group, nullptr, 16));
    raw[i++] = static_cast<std::uint8_t>(word >> 8);
    raw[i++] = static_cast<std::uint8_t>(word & 0xff);
  }
  if (i != 16) {
    throw std::runtime_error("short GID: " + v);
  }
  return raw;
}

}  // namespace devinfo_detail

/// Every port of every device in `text`, in order.
inline std::vector<DevinfoPort> parseIbvDevinfo(const std::string& text) {
  using namespace devinfo_detail;
  std::vector<DevinfoPort> ports;
  std::string device;
  std::uint64_t nodeGuid = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) {
      continue;
    }
    const std::string key = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    if (key == "hca_id") {
      device = value;
      nodeGuid = 0;
    } else if (key == "node_guid") {
      nodeGuid = guid(value);
    } else if (key == "port") {
      DevinfoPort p;
      p.device = device;
      p.facts.device = device;
      p.facts.port = static_cast<std::uint32_t>(std::stoul(value));
      p.facts.nodeGuid = nodeGuid;
      ports.push_back(p);
    } else if (ports.empty() || ports.back().device != device) {
      continue;  // a device line before the first port of this device
    } else if (key == "state") {
      ports.back().facts.state = numberInParens(value);
    } else if (key == "phys_state") {
      ports.back().facts.physState = numberInParens(value);
    } else if (key == "sm_lid") {
      ports.back().facts.smLid = static_cast<std::uint16_t>(std::stoul(value));
    } else if (key == "port_lid") {
      ports.back().facts.lid = static_cast<std::uint16_t>(std::stoul(value));
    } else if (key == "link_layer") {
      ports.back().facts.linkLayer = value == "InfiniBand" ? verbs::LinkLayer::kInfiniband
                                     : value == "Ethernet" ? verbs::LinkLayer::kEthernet
                                                           : verbs::LinkLayer::kUnspecified;
    } else if (key.starts_with("GID[")) {
      // "GID[  0]:\t\tfe80:...": the key ends at the first ':' after "]".
      const auto close = line.find("]:");
      const std::string g = trim(line.substr(close + 2));
      verbs::Gid entry;
      entry.index = static_cast<std::uint32_t>(std::stoul(trim(line.substr(line.find('[') + 1))));
      entry.raw = gid(g.substr(0, g.find(',')));
      ports.back().facts.gids.push_back(entry);
      if (entry.index == 0 && ports.back().facts.linkLayer == verbs::LinkLayer::kInfiniband) {
        std::uint64_t id = 0;
        for (std::size_t i = 8; i < 16; ++i) {
          id = id << 8 | entry.raw[i];
        }
        ports.back().facts.portGuid = id;  // the interface id of GID 0, as the probe reports it
      }
    }
  }
  return ports;
}

/// parseIbvDevinfo of a file in tests/unit/verbs/testdata.
inline std::vector<DevinfoPort> loadIbvDevinfo(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    throw std::runtime_error("cannot read " + path);
  }
  std::stringstream s;
  s << f.rdbuf();
  return parseIbvDevinfo(s.str());
}

/// The probe's answer for `port` as seen from a pod namespace where `visible` devices are listed.
inline verbs::ProbeResult probeResultOf(const DevinfoPort& port, const std::vector<std::string>& visible) {
  verbs::ProbeResult r;
  r.devices = visible;
  r.opened = true;
  r.port = port.facts;
  return r;
}

}  // namespace ibcni::testing
