// SPDX-License-Identifier: Apache-2.0
#include "ipam/store/record_codec.h"

#include <cerrno>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/net/ip.h"

namespace ibcni::ipam::codec {

using nlohmann::json;

namespace {

constexpr const char* kRecordKind = "attachment";

}  // namespace

// CRC-32 (IEEE 802.3): detects truncation and bit rot of store files. zlib's, which reads several
// bytes a step: the free index of a /16 (8 KiB) is checked and framed on every ADD and DEL.
std::uint32_t crc32(const std::string& data) {
  return static_cast<std::uint32_t>(
      ::crc32_z(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<z_size_t>(data.size())));
}

// "ibcni-ipam <kind> <format> <body length> <crc32 hex>\n" + body.
std::string frame(const char* kind, const std::string& body) {
  char head[96];
  std::snprintf(head, sizeof head, "ibcni-ipam %s %d %zu %08x\n", kind, kFormat, body.size(), crc32(body));
  return head + body;
}

std::unexpected<os::SysError> corruptFile(const std::string& path, const std::string& why, const std::string& fix) {
  return os::sysFail(EUCLEAN, "ipam store file " + path + " is corrupt (" + why + "); " + fix);
}

os::SysResult<std::string> unframe(const std::string& text, const char* kind, const std::string& path,
                                   const std::string& fix) {
  auto nl = text.find('\n');
  if (text.empty()) {
    return corruptFile(path, "empty file", fix);
  }
  if (nl == std::string::npos || nl > 90) {
    return corruptFile(path, "no header line", fix);
  }
  char gotKind[32] = {};
  int format = 0;
  unsigned long long len = 0;
  unsigned int crc = 0;
  int consumed = 0;
  std::string head = text.substr(0, nl);
  if (std::sscanf(head.c_str(), "ibcni-ipam %31s %d %llu %8x%n", gotKind, &format, &len, &crc, &consumed) != 4 ||
      static_cast<std::size_t>(consumed) != head.size()) {
    return corruptFile(path, "bad header \"" + head + "\"", fix);
  }
  if (std::string(gotKind) != kind) {
    return corruptFile(path, "holds a " + std::string(gotKind) + ", not an " + kind, fix);
  }
  if (format != kFormat) {
    return corruptFile(path, "format " + std::to_string(format) + " is not " + std::to_string(kFormat), fix);
  }
  std::string body = text.substr(nl + 1);
  if (body.size() != len) {
    return corruptFile(
        path, "truncated or extended: " + std::to_string(body.size()) + " bytes instead of " + std::to_string(len),
        fix);
  }
  if (crc32(body) != crc) {
    return corruptFile(path, "checksum mismatch", fix);
  }
  return body;
}

std::string encodeRecord(const Allocation& a) {
  json addrs = json::array();
  for (const auto& ip : a.addresses) {
    addrs.push_back(ip.toString());
  }
  json j = {
      {"containerID", a.key.containerId},
      {"ifname", a.key.ifName},
      {"pod", {{"namespace", a.pod.podNamespace}, {"name", a.pod.name}, {"uid", a.pod.uid}}},
      {"netns", a.netns},
      {"netnsInode", a.netnsInode},
      {"createdAt", a.createdAt},
      {"addresses", addrs},
  };
  if (!a.network.empty()) {
    j["network"] = a.network;
  }
  if (!a.loanTo.empty()) {
    j["loanTo"] = a.loanTo;
  }
  return frame(kRecordKind, j.dump() + "\n");
}

os::SysResult<Allocation> decodeRecord(const std::string& text, const AttachmentKey& key, const std::string& path,
                                       const IdentSpace& space) {
  const std::string fix = "remove it, then run ibcni-ipam gc to release the addresses it held";
  auto body = unframe(text, kRecordKind, path, fix);
  if (!body) {
    return std::unexpected(body.error());
  }
  json j = json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return corruptFile(path, "not a JSON object", fix);
  }
  auto str = [&](const json& o, const char* k) -> std::optional<std::string> {
    auto it = o.find(k);
    if (it == o.end() || !it->is_string()) {
      return std::nullopt;
    }
    return it->get<std::string>();
  };
  Allocation a;
  auto cid = str(j, "containerID");
  auto ifn = str(j, "ifname");
  auto netns = str(j, "netns");
  auto created = str(j, "createdAt");
  auto pod = j.find("pod");
  auto ino = j.find("netnsInode");
  auto addrs = j.find("addresses");
  if (!cid || !ifn || !netns || !created || pod == j.end() || !pod->is_object() || ino == j.end() ||
      !ino->is_number_unsigned() || addrs == j.end() || !addrs->is_array()) {
    return corruptFile(path, "a field is missing or has the wrong type", fix);
  }
  auto ns = str(*pod, "namespace");
  auto name = str(*pod, "name");
  auto uid = str(*pod, "uid");
  if (!ns || !name || !uid) {
    return corruptFile(path, "a pod field is missing or has the wrong type", fix);
  }
  a.key = {*cid, *ifn};
  if (a.key != key) {
    return corruptFile(path, "it names attachment " + a.key.toString(), fix);
  }
  a.pod = {*ns, *name, *uid};
  a.netns = *netns;
  a.netnsInode = ino->get<std::uint64_t>();
  a.createdAt = *created;
  // Optional: records written before they were kept have neither.
  for (auto [k, field] : {std::pair{"network", &a.network}, std::pair{"loanTo", &a.loanTo}}) {
    if (j.contains(k)) {
      auto v = str(j, k);
      if (!v) {
        return corruptFile(path, std::string("\"") + k + "\" is not a string", fix);
      }
      *field = *v;
    }
  }
  for (const auto& e : *addrs) {
    std::optional<net::IpAddress> ip;
    if (e.is_string()) {
      ip = space.parse(e.get<std::string>());
    }
    if (!ip) {
      return corruptFile(path, "bad " + std::string(space.noun) + " " + e.dump(), fix);
    }
    a.addresses.push_back(*ip);
  }
  return a;
}

bool isValidKey(const AttachmentKey& key) {
  return cni::isValidContainerId(key.containerId) && net::isValidIfName(key.ifName);
}

std::string recordName(const AttachmentKey& key) { return key.containerId + ":" + key.ifName; }

std::optional<AttachmentKey> keyFromRecordName(const std::string& name) {
  auto colon = name.find(':');
  if (colon == std::string::npos) {
    return std::nullopt;
  }
  AttachmentKey key{name.substr(0, colon), name.substr(colon + 1)};
  if (!isValidKey(key)) {
    return std::nullopt;
  }
  return key;
}

}  // namespace ibcni::ipam::codec
