// SPDX-License-Identifier: Apache-2.0
// guidPool: {"range": "FIRST-LAST", "blockSize": 256, "pool": NAME, "assign": "when-unset"|"always",
// "dataDir": DIR, "cluster": {...}}. The pool name, block size, data directory and the cluster object
// follow ipam.cluster's and ipam.dataDir's rules through the same code (ipam_cluster.cpp,
// ipam_conf.cpp); a range must hold whole blocks and neither the all-zero nor the all-ones GUID.
#include "ipam/config/guid_pool.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ipam/config/ipam_config.h"

namespace ibcni::config {

namespace {

constexpr std::uint64_t kAllOnes = ~std::uint64_t{0};
const char* const kRangeExample = "\"02:00:00:00:00:00:00:00-02:00:00:00:00:ff:ff:ff\"";

std::string guidText(std::uint64_t v) { return net::Guid{v}.toString(); }

// How to make a range whole blocks: `verb` with the GUIDs that would do (those that exist), or a
// smaller blockSize.
std::string fix(const std::string& verb, const std::vector<std::optional<std::uint64_t>>& candidates) {
  std::string out;
  for (const auto& c : candidates) {
    if (c) {
      out += (out.empty() ? verb : " or ") + guidText(*c);
    }
  }
  return out.empty() ? "give a smaller blockSize" : out + ", or give a smaller blockSize";
}

// guidPool.range's text: two GUIDs, the lower first, into g.first and g.last.
cni::Result<void> parseRange(const json& j, GuidPoolConf& g) {
  const json* range = memberGiven(j, "range");
  if (range == nullptr) {
    return cni::fail(kBad, std::string("guidPool.range is missing: give the GUIDs the pool hands out as "
                                       "\"FIRST-LAST\", e.g. ") + kRangeExample);
  }
  const std::string accepted =
      std::string("must be \"FIRST-LAST\", two GUIDs of 8 colon-separated hex octets, e.g. ") + kRangeExample;
  if (!range->is_string()) {
    return invalid("guidPool.range", *range, accepted);
  }
  const auto& text = range->get_ref<const std::string&>();
  const auto dash = text.find('-');
  auto first = dash == std::string::npos ? std::nullopt : net::Guid::parse(std::string_view(text).substr(0, dash));
  auto last = dash == std::string::npos ? std::nullopt : net::Guid::parse(std::string_view(text).substr(dash + 1));
  if (!first || !last) {
    return invalid("guidPool.range", text, accepted);
  }
  if (first->value > last->value) {
    return invalid("guidPool.range", text,
                   "starts above its end: give the lower GUID first, \"" + last->toString() + "-" +
                       first->toString() + "\"");
  }
  g.first = *first;
  g.last = *last;
  return {};
}

// The range against the block size: no all-zero or all-ones GUID (no valid port GUID), whole blocks.
cni::Result<void> checkRangeBlocks(const json& j, const GuidPoolConf& g) {
  const json& text = j["range"];
  const std::uint64_t bs = g.blockSize;
  const std::string blocks = " (guidPool.blockSize " + std::to_string(bs) + ")";
  if (g.first.value == 0) {
    return invalid("guidPool.range", text,
                   "holds the all-zero GUID, which is no valid port GUID: start the range at " + guidText(bs) +
                       blocks + " or above");
  }
  if (g.last.value == kAllOnes) {
    return invalid("guidPool.range", text,
                   "holds the all-ones GUID, which is no valid port GUID: end the range at " +
                       guidText(kAllOnes - bs) + blocks + " or below");
  }
  const std::uint64_t mask = bs - 1;
  const std::string whole = ": the range must hold whole blocks; ";
  if ((g.first.value & mask) != 0) {
    const std::uint64_t down = g.first.value & ~mask;
    const std::uint64_t up = down + bs;  // 0 when it wraps: no block starts there
    return invalid("guidPool.range", text,
                   "does not start on a block boundary" + blocks + whole +
                       fix("start it at ", {down != 0 ? std::optional(down) : std::nullopt,
                                            up != 0 && up <= g.last.value ? std::optional(up) : std::nullopt}));
  }
  if ((g.last.value & mask) != mask) {
    const std::uint64_t blockStart = g.last.value & ~mask;
    const std::uint64_t up = g.last.value | mask;
    return invalid("guidPool.range", text,
                   "does not end on a block boundary" + blocks + whole +
                       fix("end it at ", {blockStart > g.first.value ? std::optional(blockStart - 1) : std::nullopt,
                                          up != kAllOnes ? std::optional(up) : std::nullopt}));
  }
  return {};
}

// guidPool.assign: "when-unset" (the default) or "always".
cni::Result<void> parseAssign(const json& j, GuidPoolConf& g) {
  std::optional<std::string> s;
  IBCNI_TRY_ASSIGN(s, stringField(j, "assign", "guidPool.assign"));
  if (!s) {
    return {};
  }
  for (auto [text, value] :
       {std::pair{"when-unset", GuidAssign::kWhenUnset}, std::pair{"always", GuidAssign::kAlways}}) {
    if (*s == text) {
      g.assign = value;
      return {};
    }
  }
  return invalid("guidPool.assign", *s,
                 "accepted values: \"when-unset\" (a VF whose GUID is all zeros or all ones gets one from the pool), "
                 "\"always\" (every VF gets one from the pool unless a GUID is requested)");
}

// guidPool.pool (the network name by default), guidPool.dataDir and guidPool.cluster, whose pool and
// block size are guidPool's.
cni::Result<void> parsePoolAndCluster(const json& j, const std::string& network, GuidPoolConf& g) {
  std::optional<std::string> pool;
  IBCNI_TRY_ASSIGN(pool, poolNameField(j, "guidPool.pool"));
  if (!pool) {
    IBCNI_TRY_ASSIGN(pool, networkPoolName(network, "guidPool.pool"));
  }
  g.pool = *pool;
  if (const json* dataDir = memberGiven(j, "dataDir")) {
    IBCNI_TRY_ASSIGN(g.dataDir, dataDirValue(*dataDir, "guidPool.dataDir"));
  }
  if (const json* cluster = memberGiven(j, "cluster")) {
    IBCNI_TRY_ASSIGN(g.cluster, clusterObjectAt(*cluster, {.path = "guidPool.cluster", .poolKeysIn = "guidPool",
                                                           .check = {}}));
    g.cluster->pool = g.pool;
    g.cluster->poolPath = memberGiven(j, "pool") != nullptr ? "guidPool.pool" : "the network name";
    g.cluster->blockSize = g.blockSize;
  }
  return {};
}

}  // namespace

cni::Result<GuidPoolConf> guidPoolObject(const json& j, const std::string& network) {
  if (!j.is_object()) {
    return invalid("guidPool", j, std::string("must be an object, e.g. {\"range\": ") + kRangeExample + "}");
  }
  // A misspelt key (a cluster object that is not read) would hand out GUIDs another node hands out too.
  if (auto u = refuseUnknownKeys(j, "guidPool", {"range", "blockSize", "pool", "assign", "dataDir", "cluster"}); !u) {
    return std::unexpected(u.error());
  }
  GuidPoolConf g;
  if (auto r = parseRange(j, g); !r) {
    return std::unexpected(r.error());
  }
  std::optional<std::uint32_t> blockSize;
  IBCNI_TRY_ASSIGN(blockSize, blockSizeField(j, "guidPool.blockSize", 1, 256));
  g.blockSize = blockSize.value_or(g.blockSize);
  if (auto r = checkRangeBlocks(j, g); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = parseAssign(j, g); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = parsePoolAndCluster(j, network, g); !r) {
    return std::unexpected(r.error());
  }
  g.poolFile = j.dump();
  return g;
}

cni::Result<GuidPoolConf> guidPoolFile(std::string_view text, const std::string& pool) {
  auto j = json::parse(text, nullptr, false);
  if (!j.is_object()) {
    return cni::fail(cni::Errc::kIoFailure, "the GUID pool file of pool " + cni::quoted(pool) + " is no JSON object");
  }
  return guidPoolObject(j, pool);
}

IpamConfig guidIpamConfig(const GuidPoolConf& pool) {
  Range r;
  r.rangeStart = net::IpAddress::fromGuid(pool.first);
  r.rangeEnd = net::IpAddress::fromGuid(pool.last);
  r.path = "guidPool.range";
  RangeSet set;
  set.ranges = {r};
  set.path = r.path;
  set.family = net::kFamilyGuid;
  IpamConfig c;
  c.type = std::string(kEmbeddedIpamType);
  c.rangeSets = {set};
  c.dataDir = pool.dataDir;
  c.cluster = pool.cluster;
  return c;
}

}  // namespace ibcni::config
