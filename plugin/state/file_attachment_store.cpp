// SPDX-License-Identifier: Apache-2.0
#include "plugin/state/file_attachment_store.h"

#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "ibcni/os/file_io.h"
#include "ibcni/os/unique_fd.h"
#include "lib/result/json_codec.h"

namespace ibcni::state {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr std::size_t kMaxRecordBytes = std::size_t{1} << 20;
}  // namespace

namespace {

// The path is built from the network name (validated by the config parser) and the container ID
// and ifname (validated from the environment): none contains '/', so one directory per container
// keeps every (containerID, ifname) pair apart. (A joined "<cid>_<ifname>" name would not: "a_b"+"c"
// and "a"+"b_c" would share a file.)
std::string relativePath(const std::string& containerId, const std::string& ifName) {
  return containerId + "/" + ifName + ".json";
}

}  // namespace

std::string FileAttachmentStore::pathOf(const std::string& network, const std::string& containerId,
                                        const std::string& ifName) const {
  return dir_ + "/attachments/" + network + "/" + relativePath(containerId, ifName);
}

namespace {

// A PCI address the record keeps as text: none when empty, canonical once read.
os::SysResult<std::optional<net::PciAddress>> pciOf(const std::string& text, const char* field,
                                                    const std::string& origin) {
  if (text.empty()) {
    return std::optional<net::PciAddress>{};
  }
  auto pci = net::PciAddress::parse(text);
  if (!pci) {
    return os::sysFail(EINVAL, "decode attachment record " + origin + ": " + field + " \"" + text +
                                   "\" is not a PCI address");
  }
  return pci;
}

}  // namespace

namespace {

// "vf": the VF settings on the PF (and the RDMA device), present only for what ADD touched.
json encodeVf(const AttachmentRecord& r) {
  json vf = json::object();
  if (r.pfPci) {
    vf["pfPciAddress"] = r.pfPci->text;
  }
  if (r.vfIndex) {
    vf["index"] = *r.vfIndex;
  }
  if (!r.guid.empty()) {
    vf.update(json{{"guid", r.guid}, {"oldNodeGuid", r.oldNodeGuid}, {"oldPortGuid", r.oldPortGuid}});
  }
  if (r.oldLinkState) {
    vf["oldLinkState"] = *r.oldLinkState;
  }
  if (!r.rdmaDevice.empty()) {
    vf.update(json{{"rdmaDevice", r.rdmaDevice}, {"rdmaPort", r.rdmaPort}, {"rdmaMoved", r.rdmaMoved}});
  }
  if (!r.guidPoolDir.empty()) {  // the pool's GUID, written ahead of its allocation (ipam::GuidLease)
    vf["guidPool"] = json{{"pool", r.guidPool}, {"dir", r.guidPoolDir}};
  }
  return vf;
}

}  // namespace

std::string FileAttachmentStore::encode(const AttachmentRecord& r) {
  json j = {
      {"format", r.format},
      {"network", r.network},
      {"containerID", r.containerId},
      {"ifname", r.ifName},
      {"netns", r.netns},
      {"mode", r.mode},
      {"deviceKey", r.deviceKey},
      {"host",
       {{"pciAddress", r.pciAddress ? r.pciAddress->text : ""},
        {"name", r.hostName},
        {"index", r.hostIndex},
        {"mtu", r.hostMtu},
        {"up", r.hostUp},
        {"alias", r.hostAlias},
        {"mac", r.hostMac}}},
      {"pod", {{"index", r.podIndex}, {"mac", r.podMac}}},
      {"ipamType", r.ipamType},
      {"result", result::resultToJson(r.result, cni::SpecVersion::k110)},
      {"createdAt", r.createdAt},
  };
  if (r.podMtu) {
    j["pod"]["mtu"] = *r.podMtu;
  }
  if (!r.bootId.empty()) {
    j["bootID"] = r.bootId;
  }
  if (r.netnsInode != 0) {
    j["netnsInode"] = r.netnsInode;
  }
  if (!r.deviceInfoFile.empty()) {
    j["deviceInfoFile"] = r.deviceInfoFile;
  }
  if (r.policyTable) {
    j["policyRouting"] = {{"table", *r.policyTable}, {"priority", r.policyPriority}};
  }
  if (!r.config.empty()) {
    j["invocation"] = {{"config", r.config}, {"cniArgs", r.cniArgs}, {"cniPath", r.cniPath}};
  }
  if (json vf = encodeVf(r); !vf.empty()) {
    j["vf"] = std::move(vf);
  }
  if (r.pkey) {
    j["ipoib"] = {{"pkey", r.pkey->key()}, {"mode", r.ipoibMode}, {"umcast", r.umcast}};
    if (!r.tempName.empty()) {
      j["ipoib"]["tempName"] = r.tempName;
    }
  }
  return j.dump(2) + "\n";
}

namespace {

// The record's format, refused when newer than this ibcni.
os::SysResult<void> decodeFormat(const json& j, const std::string& origin, AttachmentRecord& r) {
  r.format = j.at("format").get<int>();
  if (r.format < 1 || r.format > AttachmentRecord::kCurrentFormat) {
    return os::sysFail(EINVAL, "decode attachment record " + origin + ": format " + std::to_string(r.format) +
                                   " is newer than this ibcni understands (" +
                                   std::to_string(AttachmentRecord::kCurrentFormat) + ")");
  }
  return {};
}

// "host": the device as it was on the host before ADD.
os::SysResult<void> decodeHost(const json& h, const std::string& origin, AttachmentRecord& r) {
  if (auto pci = pciOf(h.value("pciAddress", ""), "host.pciAddress", origin); pci) {
    r.pciAddress = *pci;
  } else {
    return std::unexpected(pci.error());
  }
  r.hostName = h.at("name").get<std::string>();
  r.hostIndex = h.value("index", 0);
  r.hostMtu = h.value("mtu", 0u);
  r.hostUp = h.value("up", false);
  r.hostAlias = h.value("alias", "");
  r.hostMac = h.value("mac", "");
  return {};
}

// "pod": the interface in the pod.
void decodePod(const json& p, AttachmentRecord& r) {
  r.podIndex = p.value("index", 0);
  r.podMac = p.value("mac", "");
  if (auto m = p.find("mtu"); m != p.end() && m->is_number_unsigned()) {
    r.podMtu = m->get<std::uint32_t>();
  }
}

// "invocation": what ADD was given, for an undo without the runtime's request.
void decodeInvocation(const json& inv, AttachmentRecord& r) {
  r.config = inv.value("config", "");
  r.cniArgs = inv.value("cniArgs", "");
  r.cniPath = inv.value("cniPath", std::vector<std::string>{});
}

// "vf": the VF settings on the PF (and the RDMA device) that ADD touched.
os::SysResult<void> decodeVf(const json& vf, const std::string& origin, AttachmentRecord& r) {
  if (auto pci = pciOf(vf.value("pfPciAddress", ""), "vf.pfPciAddress", origin); pci) {
    r.pfPci = *pci;
  } else {
    return std::unexpected(pci.error());
  }
  if (auto i = vf.find("index"); i != vf.end()) {
    r.vfIndex = i->get<std::uint32_t>();
  }
  r.guid = vf.value("guid", "");
  r.oldNodeGuid = vf.value("oldNodeGuid", "");
  r.oldPortGuid = vf.value("oldPortGuid", "");
  if (auto gp = vf.find("guidPool"); gp != vf.end() && gp->is_object()) {
    r.guidPool = gp->value("pool", "");
    r.guidPoolDir = gp->value("dir", "");
  }
  if (auto ls = vf.find("oldLinkState"); ls != vf.end()) {
    r.oldLinkState = ls->get<std::uint32_t>();
  }
  r.rdmaDevice = vf.value("rdmaDevice", "");
  r.rdmaPort = vf.value("rdmaPort", 1u);
  r.rdmaMoved = vf.value("rdmaMoved", false);
  return {};
}

// "ipoib": the IPoIB child's partition key and settings.
os::SysResult<void> decodeIpoib(const json& ib, const std::string& origin, AttachmentRecord& r) {
  if (auto k = ib.find("pkey"); k != ib.end()) {
    // The key alone, as ADD writes it: a value with the membership bit or beyond 16 bits is
    // no record ibcni wrote.
    const auto key = k->get<std::uint32_t>();
    if (key > net::Pkey::kKeyMask) {
      return os::sysFail(EINVAL, "decode attachment record " + origin + ": ipoib.pkey " + std::to_string(key) +
                                     " is not a partition key without the membership bit");
    }
    r.pkey = net::Pkey::fromWire(static_cast<std::uint16_t>(key));
  }
  r.ipoibMode = ib.value("mode", "");
  r.umcast = ib.value("umcast", false);
  r.tempName = ib.value("tempName", "");
  return {};
}

// The record's fields; nlohmann reports a missing or mistyped field by exception.
os::SysResult<void> decodeFields(const json& j, const std::string& origin, AttachmentRecord& r) {
  if (auto ok = decodeFormat(j, origin, r); !ok) {
    return std::unexpected(ok.error());
  }
  r.network = j.at("network").get<std::string>();
  r.containerId = j.at("containerID").get<std::string>();
  r.ifName = j.at("ifname").get<std::string>();
  r.netns = j.value("netns", "");
  r.mode = j.value("mode", "sriov");
  r.deviceKey = j.value("deviceKey", "");
  if (auto ok = decodeHost(j.at("host"), origin, r); !ok) {
    return std::unexpected(ok.error());
  }
  if (auto p = j.find("pod"); p != j.end() && p->is_object()) {
    decodePod(*p, r);
  }
  r.bootId = j.value("bootID", "");
  r.netnsInode = j.value("netnsInode", std::uint64_t{0});
  if (auto inv = j.find("invocation"); inv != j.end() && inv->is_object()) {
    decodeInvocation(*inv, r);
  }
  if (auto vf = j.find("vf"); vf != j.end() && vf->is_object()) {
    if (auto ok = decodeVf(*vf, origin, r); !ok) {
      return std::unexpected(ok.error());
    }
  }
  if (auto ib = j.find("ipoib"); ib != j.end() && ib->is_object()) {
    if (auto ok = decodeIpoib(*ib, origin, r); !ok) {
      return std::unexpected(ok.error());
    }
  }
  r.ipamType = j.value("ipamType", "");
  r.deviceInfoFile = j.value("deviceInfoFile", "");
  if (auto p = j.find("policyRouting"); p != j.end() && p->is_object()) {
    r.policyTable = p->at("table").get<std::uint32_t>();
    r.policyPriority = p->at("priority").get<std::uint32_t>();
  }
  r.createdAt = j.value("createdAt", "");
  if (auto res = j.find("result"); res != j.end()) {
    auto parsed = result::resultFromJson(*res, cni::Errc::kStateFailure, "record.result");
    if (!parsed) {
      return os::sysFail(EINVAL, "decode attachment record " + origin + ": " + parsed.error().msg);
    }
    r.result = *parsed;
  }
  return {};
}

}  // namespace

os::SysResult<AttachmentRecord> FileAttachmentStore::decode(const std::string& text, const std::string& origin) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return os::sysFail(EINVAL, "decode attachment record " + origin + ": not a JSON object");
  }
  AttachmentRecord r;
  try {
    if (auto decoded = decodeFields(j, origin, r); !decoded) {
      return std::unexpected(decoded.error());
    }
  } catch (const json::exception& e) {
    // nlohmann reports a missing or mistyped field by exception; it stops at this layer.
    return os::sysFail(EINVAL, "decode attachment record " + origin + ": " + e.what());
  }
  return r;
}

os::SysResult<void> FileAttachmentStore::write(const AttachmentRecord& record, bool durable) {
  std::string path = pathOf(record.network, record.containerId, record.ifName);
  std::string dir = fs::path(path).parent_path();
  std::error_code ec;
  // A temporary file next to the record, flushed (when durable), renamed over the record: a reader
  // sees the old record or the new one, never a torn one, even across a crash.
  const std::string data = encode(record);
  os::SysResult<void> written = os::sysFail(ENOENT, "open " + dir);
  // A DEL of another attachment of the same container removes the directory with its last record:
  // when it does so before the rename, make it again.
  for (int attempt = 0; attempt < 3 && !written && written.error().err == ENOENT; ++attempt) {
    fs::create_directories(dir, ec);
    if (ec) {
      return os::sysFail(ec.value(), "create state directory " + dir);
    }
    written = os::writeFileAtomic(path, data, {.durable = durable, .tmpSuffix = ".tmp"});
  }
  return written;
}

os::SysResult<std::optional<AttachmentRecord>> FileAttachmentStore::load(const std::string& network,
                                                                         const std::string& containerId,
                                                                         const std::string& ifName) {
  std::string path = pathOf(network, containerId, ifName);
  auto text = os::readFile(path, kMaxRecordBytes);
  if (!text) {
    if (text.error().err == ENOENT) {
      return std::optional<AttachmentRecord>();
    }
    return std::unexpected(text.error());
  }
  auto rec = decode(*text, path);
  if (!rec) {
    return std::unexpected(rec.error());
  }
  if (rec->network != network || rec->containerId != containerId || rec->ifName != ifName) {
    return os::sysFail(EINVAL, "attachment record " + path + " belongs to " + rec->network + "/" + rec->containerId +
                                   "/" + rec->ifName);
  }
  return std::optional<AttachmentRecord>(std::move(*rec));
}

os::SysResult<void> FileAttachmentStore::remove(const std::string& network, const std::string& containerId,
                                                const std::string& ifName) {
  std::string path = pathOf(network, containerId, ifName);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return os::sysFail(errno, "remove " + path);
  }
  // A save that died before its rename leaves its temporary file: it goes with the record.
  ::unlink((path + ".tmp").c_str());
  // The container's directory goes with its last record (rmdir fails harmlessly otherwise).
  ::rmdir(fs::path(path).parent_path().c_str());
  return {};
}

os::SysResult<std::vector<AttachmentRecord>> FileAttachmentStore::list(const std::string& network) {
  std::vector<AttachmentRecord> out;
  std::string base = dir_ + "/attachments";
  std::vector<fs::path> dirs;
  std::error_code ec;
  if (!network.empty()) {
    dirs.push_back(fs::path(base) / network);
  } else {
    for (auto it = fs::directory_iterator(base, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec)) {
        dirs.push_back(it->path());
      }
      ec.clear();
    }
    ec.clear();
  }
  // Iterated with error codes: a DEL running at the same time removes a container's directory with
  // its last record, and the iterator must not throw when a directory vanishes under it.
  for (const auto& d : dirs) {
    for (auto it = fs::recursive_directory_iterator(d, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const auto& e = *it;
      if (!e.is_regular_file(ec) || e.path().extension() != ".json") {
        ec.clear();
        continue;
      }
      auto text = os::readFile(e.path(), kMaxRecordBytes);
      if (!text) {
        continue;
      }
      auto rec = decode(*text, e.path());
      if (rec) {
        out.push_back(std::move(*rec));
      }
    }
    ec.clear();
  }
  return out;
}

}  // namespace ibcni::state
