// SPDX-License-Identifier: Apache-2.0
// An independent checker of what a CNI plugin prints, written from the spec (SPEC.md 0.3.0-1.1.0,
// §5 "Result Types") and not from ibcni's own result code, so that the conformance suite cannot
// agree with the plugin's bugs. Every function returns the list of problems found, each naming the
// JSON path; an empty list means the document conforms.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ibcni::conformance {

/// Who printed an ADD result.
enum class ResultKind {
  kPlugin,  ///< an interface plugin: interfaces listed, ips[].interface set
  kIpam,    ///< an IPAM plugin: the abbreviated result (no interfaces, no ips[].interface)
};

/// What the request said, for the checks that relate the result to it.
struct ResultContext {
  std::string version;  ///< the request's cniVersion; the result's must equal it
  ResultKind kind = ResultKind::kPlugin;
  std::optional<std::string> ifName;   ///< CNI_IFNAME: an interface of that name must be listed
  std::optional<std::string> sandbox;  ///< CNI_NETNS: that interface's sandbox must be exactly this
};

/// Checks an ADD result against the schema of ctx.version:
/// - top level: cniVersion (required, == ctx.version), interfaces, ips, routes, dns; nothing else;
/// - interfaces[]: name (required, a valid interface name), mac (6-byte Ethernet or 20-byte IPoIB
///   address), sandbox (an absolute path); 1.1.0 adds mtu (uint), socketPath (string), pciID (a
///   PCI address); those are unknown fields before 1.1.0;
/// - ips[]: address (required, CIDR), gateway (an IP of the same family), interface (a uint index
///   into interfaces, pointing at an interface with a sandbox); version ("4"/"6", matching the
///   address) is required below 1.0.0 and absent from 1.0.0 on;
/// - routes[]: dst (required, CIDR), gw (an IP of dst's family); 1.1.0 adds mtu, advmss, priority,
///   table, scope (uints);
/// - dns: nameservers (IPs), domain (string), search, options (strings); nothing else.
/// For ResultKind::kIpam, interfaces and ips[].interface must be absent (§5 "Delegated plugins").
[[nodiscard]] std::vector<std::string> validateAddResult(const nlohmann::json& result, const ResultContext& ctx);

/// Checks an error object (§5 "Error"): code (required, unsigned, not 0, and not one of the
/// reserved codes 9-99 that the spec leaves undefined: 1-8, 11, 50, 51 or >= 100), msg (required,
/// non-empty string), details (string), cniVersion (string); nothing else.
[[nodiscard]] std::vector<std::string> validateError(const nlohmann::json& error);

/// Checks a VERSION answer: cniVersion (non-empty string) and supportedVersions (non-empty list of
/// version strings x.y.z); nothing else.
[[nodiscard]] std::vector<std::string> validateVersion(const nlohmann::json& answer);

/// The problems as one line each, for failure messages.
[[nodiscard]] std::string describeProblems(const std::vector<std::string>& problems);

/// True for "a.b.c/n" with a valid IPv4 or IPv6 address and 0 <= n <= 32 or 128.
[[nodiscard]] bool isCidr(const std::string& text);

/// 4 or 6 for an IP address (no prefix), 0 otherwise.
[[nodiscard]] int ipFamily(const std::string& text);

}  // namespace ibcni::conformance
