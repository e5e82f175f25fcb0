// SPDX-License-Identifier: Apache-2.0
#include "support/ip_links.h"

#include <algorithm>

#include "support/test_netns.h"

namespace ibcni::testing {

using nlohmann::json;

std::ostream& operator<<(std::ostream& os, const LinkState& s) {
  return os << "{" << s.name << " mtu " << s.mtu << (s.up ? " UP" : " down") << " alias \"" << s.alias << "\" mac "
            << s.mac << "}";
}

std::optional<json> oneJsonDocument(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return std::nullopt;
  }
  return j;
}

std::optional<json> ipJson(const os::Netns& ns, std::vector<std::string> args) {
  args.insert(args.begin(), "-j");
  auto out = runIp(ns, args);
  if (!out) {
    return std::nullopt;
  }
  auto j = oneJsonDocument(*out);
  if (!j || !j->is_array()) {
    return std::nullopt;
  }
  return j;
}

std::optional<LinkState> linkState(const os::Netns& ns, const std::string& name) {
  auto j = ipJson(ns, {"link", "show", "dev", name});
  if (!j || j->empty()) {
    return std::nullopt;
  }
  const json& l = (*j)[0];
  LinkState s;
  s.name = l.value("ifname", "");
  s.mtu = l.value("mtu", 0U);
  for (const auto& f : l.value("flags", json::array())) {
    s.up = s.up || f == "UP";
  }
  s.alias = l.value("ifalias", "");
  s.mac = l.value("address", "");
  return s;
}

std::vector<std::string> linkNames(const os::Netns& ns) {
  std::vector<std::string> names;
  if (auto j = ipJson(ns, {"link", "show"})) {
    for (const auto& l : *j) {
      names.push_back(l.value("ifname", ""));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> addresses(const os::Netns& ns, const std::string& dev) {
  std::vector<std::string> out;
  if (auto j = ipJson(ns, {"addr", "show", "dev", dev}); j && !j->empty()) {
    for (const auto& a : (*j)[0].value("addr_info", json::array())) {
      out.push_back(a.value("local", "") + "/" + std::to_string(a.value("prefixlen", 0)));
    }
  }
  return out;
}

}  // namespace ibcni::testing
