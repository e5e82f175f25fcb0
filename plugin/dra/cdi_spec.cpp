// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/cdi_spec.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

#include "ibcni/os/file_io.h"

namespace ibcni::dra {

namespace {

using nlohmann::json;

/// "rail-0" -> "RAIL_0"
std::string envName(const std::string& request) {
  std::string out;
  for (char c : request) {
    out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

CdiDevice vfCdiDevice(const std::string& claimUid, const std::string& request, const IbDevice& d,
                      const sysfs::RdmaCharDevices& chars, const std::optional<sysfs::CharDevice>& rdmaCm) {
  CdiDevice out;
  out.name = cdiDeviceName(claimUid, d.name);
  if (chars.uverbs) {
    out.nodes.push_back(*chars.uverbs);
  }
  out.nodes.insert(out.nodes.end(), chars.umad.begin(), chars.umad.end());
  out.nodes.insert(out.nodes.end(), chars.issm.begin(), chars.issm.end());
  if (rdmaCm) {
    out.nodes.push_back(*rdmaCm);
  }
  const std::string prefix = "IBCNI_" + envName(request) + "_";
  if (!d.rdmaDevice.empty()) {
    out.env.push_back(prefix + "RDMA_DEVICE=" + d.rdmaDevice);
  }
  if (!d.ifName.empty()) {
    out.env.push_back(prefix + "NETDEV=" + d.ifName);
  }
  out.env.push_back(prefix + "PCI_ADDRESS=" + d.pci.text);
  return out;
}

json cdiSpec(const std::vector<CdiDevice>& devices) {
  json list = json::array();
  for (const auto& d : devices) {
    json nodes = json::array();
    for (const auto& n : d.nodes) {
      nodes.push_back({{"path", "/dev/infiniband/" + n.name},
                       {"type", "c"},
                       {"major", n.major},
                       {"minor", n.minor},
                       {"permissions", "rw"}});
    }
    list.push_back({{"name", d.name}, {"containerEdits", {{"env", d.env}, {"deviceNodes", std::move(nodes)}}}});
  }
  return {{"cdiVersion", kCdiVersion}, {"kind", kCdiKind}, {"devices", std::move(list)}};
}

std::string cdiDeviceName(const std::string& claimUid, const std::string& deviceName) {
  return claimUid + "-" + deviceName;
}

std::string cdiDeviceId(const std::string& name) { return std::string(kCdiKind) + "=" + name; }

std::string cdiSpecPath(const std::string& dir, const std::string& claimUid) {
  std::string kind = kCdiKind;
  std::replace(kind.begin(), kind.end(), '/', '-');
  return dir + "/" + kind + "-" + claimUid + ".json";
}

os::SysResult<void> writeCdiSpec(const std::string& dir, const std::string& claimUid,
                                 const std::vector<CdiDevice>& devices) {
  return os::writeFileAtomic(cdiSpecPath(dir, claimUid), cdiSpec(devices).dump(2) + "\n");
}

os::SysResult<void> removeCdiSpec(const std::string& dir, const std::string& claimUid) {
  const std::string path = cdiSpecPath(dir, claimUid);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return os::sysFail(errno, "remove " + path);
  }
  return {};
}

}  // namespace ibcni::dra
