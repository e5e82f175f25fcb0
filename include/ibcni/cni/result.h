// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/net/ip.h"

namespace ibcni::cni {

/// One entry of a result's `interfaces`.
struct Interface {
  std::string name;
  std::string mac;      ///< empty when unknown
  std::string sandbox;  ///< the CNI_NETNS path for in-pod interfaces, empty for host ones
  std::optional<std::uint32_t> mtu;  ///< printed for 1.1.0 only
  std::string pciId;                 ///< printed for 1.1.0 only
  std::string socketPath;            ///< printed for 1.1.0 only
  bool operator==(const Interface&) const = default;
};

/// One entry of a result's `ips`.
struct IpConfig {
  net::IpPrefix address;
  std::optional<net::IpAddress> gateway;
  std::optional<int> interface;  ///< index into `interfaces`
  bool operator==(const IpConfig&) const = default;
};

/// One entry of a result's `routes`. The 1.1.0 fields are printed for 1.1.0 only.
struct Route {
  net::IpPrefix dst;
  std::optional<net::IpAddress> gw;
  std::optional<std::uint32_t> mtu;
  std::optional<std::uint32_t> advmss;
  std::optional<std::uint32_t> priority;
  std::optional<std::uint32_t> table;
  std::optional<std::uint32_t> scope;
  bool operator==(const Route&) const = default;
};

struct Dns {
  std::vector<std::string> nameservers;
  std::string domain;
  std::vector<std::string> search;
  std::vector<std::string> options;
  [[nodiscard]] bool empty() const {
    return nameservers.empty() && domain.empty() && search.empty() && options.empty();
  }
  bool operator==(const Dns&) const = default;
};

/// A CNI ADD result in ibcni's internal form, independent of the spec version it is printed in.
struct AddResult {
  std::vector<Interface> interfaces;
  std::vector<IpConfig> ips;
  std::vector<Route> routes;
  Dns dns;
  bool operator==(const AddResult&) const = default;
};

}  // namespace ibcni::cni
