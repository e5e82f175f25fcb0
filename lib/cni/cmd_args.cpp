// SPDX-License-Identifier: Apache-2.0
#include "ibcni/cni/cmd_args.h"

#include <string>

namespace ibcni::cni {

const char* toString(Command c) {
  switch (c) {
    case Command::kAdd:
      return "ADD";
    case Command::kDel:
      return "DEL";
    case Command::kCheck:
      return "CHECK";
    case Command::kVersion:
      return "VERSION";
    case Command::kGc:
      return "GC";
    case Command::kStatus:
      return "STATUS";
  }
  return "?";
}

bool isValidIdentifier(std::string_view s) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (s.empty() || !alnum(s.front())) {
    return false;
  }
  for (char c : s) {
    if (!alnum(c) && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return true;
}

bool isValidContainerId(std::string_view s) { return s.size() <= kMaxContainerIdLength && isValidIdentifier(s); }

namespace {

// cni::quoted is called qualified here: for a std::string argument, argument-dependent lookup
// would otherwise prefer std::quoted wherever <iomanip> is in the unit.
std::unexpected<Error> argsError(const std::string& what) {
  return fail(Errc::kInvalidEnvironment, "invalid CNI_ARGS: " + what);
}

bool isTrue(std::string_view v) { return v == "1" || v == "true" || v == "True" || v == "TRUE"; }

}  // namespace

Result<CniArgs> parseCniArgs(std::string_view text) {
  CniArgs out;
  std::vector<std::pair<std::string, std::string>> pairs;
  std::size_t pos = 0;
  while (pos <= text.size() && !text.empty()) {
    auto end = text.find(';', pos);
    auto item = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    if (!item.empty()) {
      auto eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        return argsError(cni::quoted(item) + " is not a KEY=VALUE pair; the format is K1=V1;K2=V2");
      }
      // Values end up in records, logs and messages (pod name and namespace, GUID, IPs): printable
      // UTF-8 only, as everything a runtime puts there is.
      if (!isPrintableText(item)) {
        return argsError(cni::quoted(item, 128) +
                         " holds a control character or bytes that are not UTF-8; give printable KEY=VALUE pairs");
      }
      pairs.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
    }
    if (end == std::string_view::npos) {
      break;
    }
    pos = end + 1;
  }
  for (const auto& [k, v] : pairs) {
    if (k == "IgnoreUnknown") {
      out.ignoreUnknown = isTrue(v);
    }
  }
  for (const auto& [k, v] : pairs) {
    if (k == "IgnoreUnknown") {
      continue;
    }
    if (k == "IP") {
      // Multus joins several requested addresses with ','.
      std::string_view rest = v;
      while (!rest.empty()) {
        auto comma = rest.find(',');
        auto one = rest.substr(0, comma);
        auto ip = net::IpPrefix::parse(one, /*allowBare=*/true);
        if (!ip) {
          return argsError("IP=" + cni::quoted(v) + ": " + cni::quoted(one) +
                           " is not an IP address (give IP=10.1.2.3 or IP=10.1.2.3/24, comma-separated)");
        }
        out.ips.push_back(*ip);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    } else if (k == "MAC") {
      auto mac = net::HwAddress::parse(v);
      if (!mac) {
        return argsError("MAC=" + cni::quoted(v) + " is not a hardware address (give colon-separated hex octets)");
      }
      out.mac = mac->text;
    } else if (k == "GUID") {
      out.guid = v;
    } else if (k == "K8S_POD_NAMESPACE") {
      out.podNamespace = v;
    } else if (k == "K8S_POD_NAME") {
      out.podName = v;
    } else if (k == "K8S_POD_UID") {
      out.podUid = v;
    } else if (k == "K8S_POD_INFRA_CONTAINER_ID") {
      out.podInfraContainerId = v;
    } else if (out.ignoreUnknown) {
      out.unknown[k] = v;
    } else {
      return argsError("unknown key " + cni::quoted(k + "=" + v, 128) +
                       "; add IgnoreUnknown=1 to CNI_ARGS to have unknown keys ignored");
    }
  }
  return out;
}

}  // namespace ibcni::cni
