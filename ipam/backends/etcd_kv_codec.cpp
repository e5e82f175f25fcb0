// SPDX-License-Identifier: Apache-2.0
#include "ipam/backends/etcd_kv_codec.h"

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ipam/backends/backend_support.h"
#include "ipam/backends/etcd_block_backend.h"
#include "ibcni/os/time_text.h"

namespace ibcni::ipam {

namespace etcd_kv {

using backend::excerpt;
using etcd::json;
using etcd::Kv;

std::string nowText() { return os::rfc3339(SysClock::now()); }

std::string claimValue(std::string_view node, const ClaimAttrs& attrs, const std::string& claimedAt) {
  json v{{"node", node}, {"claimedAt", claimedAt}};
  for (auto [key, field] : {std::pair{"owner", &attrs.owner}, std::pair{"pod", &attrs.pod},
                            std::pair{"lender", &attrs.lender}}) {
    if (!field->empty()) {
      v[key] = *field;
    }
  }
  return v.dump();
}

std::string nodeValue(std::string_view node, const char* when) {
  return json{{"node", node}, {when, nowText()}}.dump();
}

/// The holder a claim's value names; identity and version from the key's revisions.
BackendResult<Holder> holderOf(const Kv& kv, const etcd::Call& call) {
  const json doc = json::parse(kv.value, nullptr, false);
  if (!doc.is_object() || !doc.contains("node") || !doc["node"].is_string()) {
    return std::unexpected(call.bad("key " + cni::quoted(kv.key) + " holds " + excerpt(kv.value) +
                                    ", not {\"node\":...}"));
  }
  Holder h;
  h.node = doc["node"].get<std::string>();
  const auto str = [&doc](const char* k) {
    return doc.contains(k) && doc[k].is_string() ? doc[k].get<std::string>() : std::string();
  };
  h.attrs = ClaimAttrs{str("owner"), str("pod"), str("lender")};
  if (auto at = str("claimedAt"); !at.empty()) {
    h.claimedAt = os::parseRfc3339(at);
  }
  h.identity = std::to_string(kv.createRevision);
  h.version = std::to_string(kv.modRevision);
  return h;
}

std::optional<std::int64_t> revisionOf(std::string_view text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v <= 0) {
    return std::nullopt;
  }
  return v;
}

BackendResult<PoolDefinition> definitionOf(const Kv& kv, std::string_view pool, const etcd::Call& call) {
  const json doc = json::parse(kv.value, nullptr, false);
  if (!doc.is_object() || !doc.contains("fields") || !doc["fields"].is_string()) {
    return std::unexpected(call.bad("definition of pool " + cni::quoted(pool) + " is not {\"fields\": ...}: " +
                                    excerpt(kv.value)));
  }
  return PoolDefinition{std::string(pool), doc["fields"].get<std::string>(), doc.value("origin", std::string()),
                        std::to_string(kv.modRevision),
                        doc.contains("closed") && doc["closed"].is_boolean() && doc["closed"].get<bool>()};
}

std::string definitionValue(const PoolDefinition& def) {
  json v{{"fields", def.fields}, {"origin", def.origin}};
  if (def.closed) {
    v["closed"] = true;
  }
  return v.dump();
}

}  // namespace etcd_kv

std::string EtcdBlockBackend::poolPrefix(std::string_view pool) const {
  return options_.prefix + "pools/" + std::string(pool) + "/";
}

std::string EtcdBlockBackend::claimKey(ClaimKind kind, std::string_view pool, std::string_view name) const {
  return poolPrefix(pool) + (kind == ClaimKind::kBlock ? "blocks/" : "addresses/") + std::string(name);
}

std::string EtcdBlockBackend::definitionKey(std::string_view pool) const {
  return options_.prefix + "definitions/" + std::string(pool);
}

std::string EtcdBlockBackend::registryKey() const { return options_.prefix + "registry"; }

std::string EtcdBlockBackend::demandKey(std::string_view pool, std::string_view node) const {
  return poolPrefix(pool) + "demand/" + std::string(node);
}

std::string EtcdBlockBackend::aliveKey(std::string_view node) const {
  return options_.prefix + "nodes/" + std::string(node) + "/alive";
}

std::string EtcdBlockBackend::registeredKey(std::string_view node) const {
  return options_.prefix + "nodes/" + std::string(node) + "/registered";
}

}  // namespace ibcni::ipam
