// SPDX-License-Identifier: Apache-2.0
// What decides a cluster pool's addresses (I5 of ipam/README.md "Cluster safety"): its ranges
// (gateways included), blockSize, reservations and exclude, as one canonical text every network of
// the pool must give, recorded once in the backend; and the rules that compare two such texts.
#pragma once

#include <optional>
#include <string>

#include "ibcni/config/ipam_conf.h"

namespace ibcni::ipam {

/// The canonical JSON of what decides the addresses of `config`'s pool: {"ranges": [[{"subnet",
/// "rangeStart", "rangeEnd", "gateway"}...]...], "blockSize": N, "reservations": {pod: [address,
/// ...]}, "exclude": [cidr, ...]} (objects sorted by key, exclude sorted). Equal text = one pool.
/// A GUID pool's: {"kind": "guid", "guidRanges": [[{"first", "last"}...]...], "blockSize": N}, its
/// GUIDs as 16 hex digits; deliberately without "ranges", so that no reader of address pools (an
/// older one included) takes it for an IPv6 pool.
[[nodiscard]] std::string definitionFields(const config::IpamConfig& config);

/// Where two definitions' fields differ first.
struct FieldDifference {
  std::string field;   ///< "ranges", "blockSize", "reservations", "exclude"; "kind", "guidRanges"
  std::string mine;    ///< that field in the first, as JSON
  std::string theirs;  ///< in the second
};

/// The first field (in the order above) where `mine` and `theirs` differ; nullopt when they are the
/// same pool. A text that is not a definition differs in every field ("ranges"). When either is a
/// GUID pool's, its fields are compared ("kind", "guidRanges", "blockSize").
[[nodiscard]] std::optional<FieldDifference> compareDefinitions(const std::string& mine, const std::string& theirs);

/// An address (a GUID) both definitions could hand out (their ranges overlap), as text; nullopt when
/// none, and always for an address pool's and a GUID pool's.
[[nodiscard]] std::optional<std::string> overlapOf(const std::string& a, const std::string& b);

}  // namespace ibcni::ipam
