// SPDX-License-Identifier: Apache-2.0
// The field readers every section of the configuration parser uses (config/*.cpp only): one way to
// read a JSON field, and one way to say what is wrong with it. Every message names the field path,
// the value (quoted and bounded) and what is accepted.
#pragma once

#include <cstdint>
#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/cni/error.h"
#include "ibcni/cni/result.h"
#include "ibcni/net/ip.h"

namespace ibcni::config {

/// The request's JSON document (ibcni/config/net_conf.h declares it; only config/ looks inside).
struct RequestDocument {
  nlohmann::json json;
};

}  // namespace ibcni::config

namespace ibcni::config::fields {

using nlohmann::json;

inline constexpr cni::Errc kBad = cni::Errc::kInvalidConfig;

/// The request text as one JSON object.
/// @return error 6 when it is not valid JSON (with the byte offset) or not an object.
[[nodiscard]] cni::Result<json> parseObject(std::string_view text);

/// Error 7: "invalid <field> = <value as JSON>: <accepted>".
[[nodiscard]] std::unexpected<cni::Error> invalid(const std::string& field, const json& value,
                                                  const std::string& accepted);
/// Error 7 for a text value, quoted (escaped, cut after `maxShown` bytes): whatever a field holds,
/// the message stays one bounded, printable line.
[[nodiscard]] std::unexpected<cni::Error> invalid(const std::string& field, const std::string& value,
                                                  const std::string& accepted,
                                                  std::size_t maxShown = cni::kQuotedMax);

/// A string member: nullopt when absent or null; any other non-string is error 7.
[[nodiscard]] cni::Result<std::optional<std::string>> stringField(const json& obj, const char* key,
                                                                  const std::string& path);
/// An unsigned 32-bit integer member: nullopt when absent or null.
[[nodiscard]] cni::Result<std::optional<std::uint32_t>> u32Field(const json& obj, const char* key,
                                                                 const std::string& path);
/// An IP address member; `example` shows a valid value in the message.
[[nodiscard]] cni::Result<std::optional<net::IpAddress>> addressField(const json& obj, const char* key,
                                                                      const std::string& path,
                                                                      const std::string& example);
/// A PCI address member ("0000:af:06.1"; "af:06.1" accepted).
[[nodiscard]] cni::Result<std::optional<net::PciAddress>> pciField(const json& obj, const char* key,
                                                                   const std::string& path);
/// A list of strings; a non-string element is named by its index.
[[nodiscard]] cni::Result<std::vector<std::string>> stringList(const json& obj, const char* key,
                                                               const std::string& path);
/// A list of IP addresses, each optionally with a prefix length ("10.1.2.3" or "10.1.2.3/24"):
/// runtimeConfig.ips, args.cni.ips.
[[nodiscard]] cni::Result<std::vector<net::IpPrefix>> ipList(const json& obj, const char* key,
                                                             const std::string& path);
/// A DNS object at `path` ("dns", "ipam.dns"): the fields given (an absent one is left empty).
[[nodiscard]] cni::Result<cni::Dns> dnsObject(const json& j, const std::string& path);
/// GC's list of attachments ({"containerID", "ifname"} objects).
[[nodiscard]] cni::Result<std::vector<cni::AttachmentKey>> attachmentList(const json& j, const std::string& path);

/// Unwraps `r` into `out`, or returns its error from the enclosing function.
#define IBCNI_TRY_ASSIGN(out, expr)             \
  do {                                          \
    auto ibcni_r_ = (expr);                     \
    if (!ibcni_r_) {                            \
      return std::unexpected(ibcni_r_.error()); \
    }                                           \
    (out) = std::move(*ibcni_r_);               \
  } while (0)

}  // namespace ibcni::config::fields
