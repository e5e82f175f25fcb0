// SPDX-License-Identifier: Apache-2.0
#include "ibcni/net/ip.h"

#include <arpa/inet.h>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <sys/socket.h>

#include "ibcni/os/text.h"

namespace ibcni::net {

namespace {

int hexValue(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

// Parses "xx:xx:..." (each octet exactly two hex digits) into bytes.
std::optional<std::vector<std::uint8_t>> parseHexOctets(std::string_view text) {
  std::vector<std::uint8_t> out;
  if (text.empty()) {
    return std::nullopt;
  }
  std::size_t i = 0;
  while (true) {
    if (i + 2 > text.size()) {
      return std::nullopt;
    }
    int hi = hexValue(text[i]);
    int lo = hexValue(text[i + 1]);
    if (hi < 0 || lo < 0) {
      return std::nullopt;
    }
    out.push_back(static_cast<std::uint8_t>(hi * 16 + lo));
    i += 2;
    if (i == text.size()) {
      return out;
    }
    if (text[i] != ':') {
      return std::nullopt;
    }
    ++i;
  }
}

std::string hexOctets(const std::uint8_t* data, std::size_t len) {
  std::string out;
  out.reserve(len * 3);
  for (std::size_t i = 0; i < len; ++i) {
    char buf[4];
    std::snprintf(buf, sizeof buf, i == 0 ? "%02x" : ":%02x", data[i]);
    out += buf;
  }
  return out;
}

}  // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  if (text.empty() || text.size() > INET6_ADDRSTRLEN) {
    return std::nullopt;
  }
  std::string s(text);
  IpAddress ip;
  if (s.find(':') == std::string::npos) {
    if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) != 1) {
      return std::nullopt;
    }
    ip.family = AF_INET;
  } else {
    if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) != 1) {
      return std::nullopt;
    }
    ip.family = AF_INET6;
  }
  return ip;
}

static_assert(AF_INET == 2 && AF_INET6 != kFamilyGuid);
#ifdef AF_IB
static_assert(AF_IB == kFamilyGuid);
#endif

IpAddress IpAddress::fromGuid(Guid guid) noexcept {
  IpAddress ip;
  ip.family = kFamilyGuid;
  for (int i = 0; i < 8; ++i) {
    ip.bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(guid.value >> (56 - 8 * i));
  }
  return ip;
}

std::optional<Guid> IpAddress::guid() const noexcept {
  if (!isGuid()) {
    return std::nullopt;
  }
  Guid g;
  for (std::size_t i = 0; i < 8; ++i) {
    g.value = (g.value << 8) | bytes[i];
  }
  return g;
}

std::string IpAddress::toString() const {
  if (family == 0) {
    return {};
  }
  if (auto g = guid()) {
    return g->toString();
  }
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, bytes.data(), buf, sizeof buf);
  return buf;
}

std::optional<IpPrefix> IpPrefix::parse(std::string_view text, bool allowBare) {
  auto slash = text.find('/');
  IpPrefix p;
  auto addr = IpAddress::parse(text.substr(0, slash));
  if (!addr) {
    return std::nullopt;
  }
  p.address = *addr;
  int maxLen = bitsOf(addr->family);
  if (slash == std::string_view::npos) {
    if (!allowBare) {
      return std::nullopt;
    }
    p.prefixLen = maxLen;
    return p;
  }
  auto lenText = text.substr(slash + 1);
  if (lenText.empty() || lenText.size() > 3) {
    return std::nullopt;
  }
  int len = 0;
  auto [end, ec] = std::from_chars(lenText.data(), lenText.data() + lenText.size(), len);
  if (ec != std::errc() || end != lenText.data() + lenText.size() || len < 0 || len > maxLen) {
    return std::nullopt;
  }
  p.prefixLen = len;
  return p;
}

std::string IpPrefix::toString() const { return address.toString() + "/" + std::to_string(prefixLen); }

IpPrefix IpPrefix::network() const {
  IpPrefix n = *this;
  for (std::size_t i = 0; i < n.address.size(); ++i) {
    int bitsHere = prefixLen - static_cast<int>(i * 8);
    if (bitsHere >= 8) {
      continue;
    }
    std::uint8_t mask = bitsHere <= 0 ? 0 : static_cast<std::uint8_t>(0xff << (8 - bitsHere));
    n.address.bytes[i] &= mask;
  }
  return n;
}

bool IpPrefix::contains(const IpAddress& ip) const {
  if (ip.family != address.family) {
    return false;
  }
  IpPrefix other{ip, prefixLen};
  return other.network().address == network().address;
}

std::optional<HwAddress> HwAddress::parse(std::string_view text) {
  auto bytes = parseHexOctets(text);
  if (!bytes) {
    return std::nullopt;
  }
  return fromBytes(bytes->data(), bytes->size());
}

HwAddress HwAddress::fromBytes(const std::uint8_t* data, std::size_t len) {
  return HwAddress{hexOctets(data, len), len};
}

std::optional<Guid> Guid::parse(std::string_view text) {
  auto bytes = parseHexOctets(text);
  if (!bytes || bytes->size() != 8) {
    return std::nullopt;
  }
  Guid g;
  for (auto b : *bytes) {
    g.value = (g.value << 8) | b;
  }
  return g;
}

std::string Guid::toString() const {
  std::uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<std::uint8_t>(value >> (56 - 8 * i));
  }
  return hexOctets(bytes, 8);
}

std::optional<PciAddress> PciAddress::parse(std::string_view text) {
  // dddd:bb:dd.f, where the domain is optional.
  std::string s(text);
  for (auto& c : s) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (s.size() == 7) {
    s = "0000:" + s;
  }
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') {
    return std::nullopt;
  }
  for (std::size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 8u, 9u}) {
    if (hexValue(s[i]) < 0) {
      return std::nullopt;
    }
  }
  if (s[11] < '0' || s[11] > '7' || hexValue(s[8]) > 1) {  // device is 5 bits, function 3 bits
    return std::nullopt;
  }
  return PciAddress{s};
}

bool isValidIfName(std::string_view name) {
  if (name.empty() || name.size() > 15 || name == "." || name == "..") {
    return false;
  }
  for (char c : name) {
    if (c == '/' || c == ':' || std::isspace(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  // The kernel takes any other byte; ibcni also wants names it can print, log and use in file names.
  return os::isPrintableText(name);
}

}  // namespace ibcni::net
