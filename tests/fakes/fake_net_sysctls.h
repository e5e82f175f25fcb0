// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <map>
#include <string>
#include <tuple>

#include "fakes/fake_netlink.h"
#include "ibcni/sysfs/net_sysctls.h"

namespace ibcni::testing {

/// Per-interface sysctls in memory, over a FakeNetlink's links: an interface that is not in the
/// namespace is ENOENT, as its /proc/sys/net directory would be; a value never set reads "0". Values
/// are kept per namespace path and interface name (a link that moves or goes is not followed).
class FakeNetSysctls final : public sysfs::NetSysctls {
 public:
  explicit FakeNetSysctls(FakeNetlink& nl) : nl_(nl) {}

  os::SysResult<std::string> get(const os::Netns& ns, std::string_view family, const std::string& ifName,
                                 const std::string& key) override {
    if (auto r = exists(ns, ifName, "get"); !r) {
      return std::unexpected(r.error());
    }
    auto it = values_.find({ns.path(), std::string(family), ifName, key});
    return it == values_.end() ? std::string("0") : it->second;
  }
  os::SysResult<void> set(const os::Netns& ns, std::string_view family, const std::string& ifName,
                          const std::string& key, const std::string& value) override {
    if (auto r = exists(ns, ifName, "set"); !r) {
      return r;
    }
    ++sets;
    if (failSets > 0 && --failSets == 0) {
      return os::sysFail(EPERM, "set " + key + " (failure injected)");
    }
    values_[{ns.path(), std::string(family), ifName, key}] = value;
    return {};
  }

  int sets = 0;      ///< set() calls so far
  int failSets = 0;  ///< n > 0: the n-th set() from now fails with EPERM, changing nothing

 private:
  os::SysResult<void> exists(const os::Netns& ns, const std::string& ifName, const std::string& op) {
    if (!nl_.linkByName(ns, ifName)) {
      return os::sysFail(ENOENT, op + " sysctl of " + ifName + ": no such interface");
    }
    return {};
  }
  FakeNetlink& nl_;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::string> values_;
};

}  // namespace ibcni::testing
