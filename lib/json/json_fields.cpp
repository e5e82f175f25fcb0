// SPDX-License-Identifier: Apache-2.0
#include "lib/json/json_fields.h"

#include <limits>

#include "lib/result/json_codec.h"

namespace ibcni::config::fields {

using result::shortDump;

cni::Result<json> parseObject(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    // Where and why: bytes that are not UTF-8 or a raw control character in a string are the usual
    // reasons besides plain syntax errors. The parser's text quotes the input: shown escaped.
    return cni::fail(cni::Errc::kDecodingFailure,
                     "the network configuration on stdin is not valid JSON (at byte " + std::to_string(e.byte) +
                         "): send one UTF-8 JSON object",
                     cni::quoted(e.what(), 300));
  } catch (const json::exception& e) {
    // Valid syntax the parser still refuses: a number beyond a double's range (1e999).
    return cni::fail(cni::Errc::kDecodingFailure,
                     "the network configuration on stdin cannot be read: a number in it is out of range "
                     "(numbers must fit a 64-bit integer or a double): send one UTF-8 JSON object",
                     cni::quoted(e.what(), 300));
  }
  if (!j.is_object()) {
    return cni::fail(cni::Errc::kDecodingFailure,
                     "the network configuration on stdin must be a JSON object, got " + shortDump(j));
  }
  return j;
}

std::unexpected<cni::Error> invalid(const std::string& field, const json& value, const std::string& accepted) {
  return cni::fail(kBad, "invalid " + field + " = " + shortDump(value) + ": " + accepted);
}

std::unexpected<cni::Error> invalid(const std::string& field, const std::string& value, const std::string& accepted,
                                    std::size_t maxShown) {
  return cni::fail(kBad, "invalid " + field + " = " + cni::quoted(value, maxShown) + ": " + accepted);
}

cni::Result<std::optional<std::string>> stringField(const json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::optional<std::string>();
  }
  if (!it->is_string()) {
    return invalid(path, *it, "must be a string");
  }
  return std::optional<std::string>(it->get<std::string>());
}

cni::Result<std::optional<std::uint32_t>> u32Field(const json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::optional<std::uint32_t>();
  }
  if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
      it->get<std::int64_t>() > std::numeric_limits<std::uint32_t>::max()) {
    return invalid(path, *it, "must be an integer from 0 to 4294967295");
  }
  return std::optional<std::uint32_t>(static_cast<std::uint32_t>(it->get<std::int64_t>()));
}

cni::Result<std::optional<net::IpAddress>> addressField(const json& obj, const char* key, const std::string& path,
                                                        const std::string& example) {
  std::optional<std::string> s;
  IBCNI_TRY_ASSIGN(s, stringField(obj, key, path));
  if (!s) {
    return std::optional<net::IpAddress>();
  }
  auto ip = net::IpAddress::parse(*s);
  if (!ip) {
    return invalid(path, *s, "must be an IP address such as \"" + example + "\"");
  }
  return std::optional<net::IpAddress>(*ip);
}

cni::Result<std::optional<net::PciAddress>> pciField(const json& obj, const char* key, const std::string& path) {
  std::optional<std::string> s;
  IBCNI_TRY_ASSIGN(s, stringField(obj, key, path));
  if (!s) {
    return std::optional<net::PciAddress>();
  }
  auto pci = net::PciAddress::parse(*s);
  if (!pci) {
    return invalid(path, *s, "must be a PCI address such as \"0000:af:06.1\"");
  }
  return std::optional<net::PciAddress>(*pci);
}

namespace {

/// The list at `key` of `obj` (absent or null: empty), each element turned into one entry by
/// `parseOne(element, path of the element)`; `accepted` says what is, when it is not a list.
template <class T, class ParseOne>
cni::Result<std::vector<T>> listField(const json& obj, const char* key, const std::string& path,
                                      const std::string& accepted, ParseOne parseOne) {
  std::vector<T> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return out;
  }
  if (!it->is_array()) {
    return invalid(path, *it, accepted);
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    auto one = parseOne((*it)[i], path + "[" + std::to_string(i) + "]");
    if (!one) {
      return std::unexpected(one.error());
    }
    out.push_back(std::move(*one));
  }
  return out;
}

}  // namespace

cni::Result<std::vector<std::string>> stringList(const json& obj, const char* key, const std::string& path) {
  return listField<std::string>(obj, key, path, "must be a list of strings",
                                [](const json& e, const std::string& p) -> cni::Result<std::string> {
                                  if (!e.is_string()) {
                                    return invalid(p, e, "must be a string");
                                  }
                                  return e.get<std::string>();
                                });
}

cni::Result<std::vector<net::IpPrefix>> ipList(const json& obj, const char* key, const std::string& path) {
  return listField<net::IpPrefix>(
      obj, key, path, "must be a list of IP addresses such as [\"10.1.2.3/24\"]",
      [](const json& e, const std::string& p) -> cni::Result<net::IpPrefix> {
        if (!e.is_string()) {
          return invalid(p, e, "must be a string such as \"10.1.2.3/24\"");
        }
        auto ip = net::IpPrefix::parse(e.get<std::string>(), /*allowBare=*/true);
        if (!ip) {
          return invalid(p, e.get<std::string>(), "must be an IP address, optionally with a prefix (10.1.2.3/24)");
        }
        return *ip;
      });
}

cni::Result<cni::Dns> dnsObject(const json& j, const std::string& path) {
  if (!j.is_object()) {
    return invalid(path, j,
                   "must be an object {\"nameservers\": [...], \"domain\": ..., \"search\": [...], "
                   "\"options\": [...]}");
  }
  std::vector<std::string> ns;
  IBCNI_TRY_ASSIGN(ns, stringList(j, "nameservers", path + ".nameservers"));
  for (std::size_t i = 0; i < ns.size(); ++i) {
    if (!net::IpAddress::parse(ns[i])) {
      return invalid(path + ".nameservers[" + std::to_string(i) + "]", ns[i],
                     "must be an IP address such as \"10.96.0.10\"");
    }
  }
  std::optional<std::string> domain;
  IBCNI_TRY_ASSIGN(domain, stringField(j, "domain", path + ".domain"));
  cni::Dns dns{std::move(ns), domain.value_or(""), {}, {}};
  IBCNI_TRY_ASSIGN(dns.search, stringList(j, "search", path + ".search"));
  IBCNI_TRY_ASSIGN(dns.options, stringList(j, "options", path + ".options"));
  return dns;
}

cni::Result<std::vector<cni::AttachmentKey>> attachmentList(const json& j, const std::string& path) {
  if (!j.is_array()) {
    return invalid(path, j, "must be a list of {\"containerID\": ..., \"ifname\": ...}");
  }
  std::vector<cni::AttachmentKey> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    std::string p = path + "[" + std::to_string(i) + "]";
    const auto& e = j[i];
    if (!e.is_object()) {
      return invalid(p, e, "must be an object {\"containerID\": ..., \"ifname\": ...}");
    }
    std::optional<std::string> cid;
    IBCNI_TRY_ASSIGN(cid, stringField(e, "containerID", p + ".containerID"));
    std::optional<std::string> ifn;
    IBCNI_TRY_ASSIGN(ifn, stringField(e, "ifname", p + ".ifname"));
    if (!cid || !ifn) {
      return invalid(p, e, "needs both containerID and ifname");
    }
    out.push_back({*cid, *ifn});
  }
  return out;
}

}  // namespace ibcni::config::fields
