// SPDX-License-Identifier: Apache-2.0
// Links and addresses of a network namespace as `ip -j` reports them, for tests that run the built
// plugins and look at what they left behind.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ibcni/os/netns.h"

namespace ibcni::testing {

/// A link as `ip -j link show` reports it: what DEL must restore on the host side.
struct LinkState {
  std::string name;
  unsigned mtu = 0;
  bool up = false;  ///< IFF_UP (administrative state)
  std::string alias;
  std::string mac;
  bool operator==(const LinkState&) const = default;
};
std::ostream& operator<<(std::ostream& os, const LinkState& s);

/// Parses `text` as exactly one JSON document (surrounding whitespace allowed, nothing else).
[[nodiscard]] std::optional<nlohmann::json> oneJsonDocument(const std::string& text);
/// What `ip -j <args>` prints in `ns`, when it succeeds with a JSON array.
[[nodiscard]] std::optional<nlohmann::json> ipJson(const os::Netns& ns, std::vector<std::string> args);

[[nodiscard]] std::optional<LinkState> linkState(const os::Netns& ns, const std::string& name);
/// The names of the links in `ns`, sorted.
[[nodiscard]] std::vector<std::string> linkNames(const os::Netns& ns);
/// "10.1.2.3/24" for each IPv4/IPv6 address of `dev` in `ns`.
[[nodiscard]] std::vector<std::string> addresses(const os::Netns& ns, const std::string& dev);

}  // namespace ibcni::testing
