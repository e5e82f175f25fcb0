// SPDX-License-Identifier: Apache-2.0
// LibnlNetlink's policy routing rules: listing, adding and deleting `from SRC lookup TABLE` rules.
#include <cerrno>
#include <cstdint>
#include <linux/fib_rules.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string>
#include <sys/socket.h>
#include <vector>

#include <netlink/addr.h>
#include <netlink/msg.h>
#include <netlink/route/rule.h>

#include "plugin/netlink/libnl_handles.h"
#include "plugin/netlink/libnl_netlink.h"
#include "plugin/netlink/libnl_parse.h"
#include "plugin/netlink/libnl_socket.h"

namespace ibcni::nl {

namespace {

// The rule as libnl builds its request: family, source, table (FRA_TABLE, and rtm_table below 256),
// priority, action "lookup".
os::SysResult<RtnlRulePtr> libnlRule(const Rule& rule, const std::string& op) {
  const int family = rule.src.address.family;
  if (family != AF_INET && family != AF_INET6) {
    return os::sysFail(EINVAL, op + ": no source prefix");
  }
  if (rule.table == 0) {
    return os::sysFail(EINVAL, op + ": no table");
  }
  RtnlRulePtr r(rtnl_rule_alloc());
  NlAddrPtr src = nlAddrFromIp(rule.src.address, rule.src.prefixLen);
  if (!r || !src) {
    return os::sysFail(ENOMEM, op);
  }
  rtnl_rule_set_family(r.get(), family);
  if (int rc = rtnl_rule_set_src(r.get(), src.get()); rc < 0) {
    return libnlFail(rc, op);
  }
  rtnl_rule_set_table(r.get(), rule.table);
  rtnl_rule_set_prio(r.get(), rule.priority);
  rtnl_rule_set_action(r.get(), FR_ACT_TO_TBL);
  return r;
}

os::SysResult<void> ruleRequest(RtnlSockets& sockets, const os::Netns& ns, const Rule& rule, bool add,
                                const std::string& op) {
  auto r = libnlRule(rule, op);
  if (!r) {
    return std::unexpected(r.error());
  }
  nl_msg* raw = nullptr;
  const int rc = add ? rtnl_rule_build_add_request(r->get(), NLM_F_CREATE | NLM_F_EXCL, &raw)
                     : rtnl_rule_build_delete_request(r->get(), 0, &raw);
  NlMsgPtr msg(raw);
  if (rc < 0) {
    return libnlFail(rc, op);
  }
  return sockets.simple(ns, msg.get(), op);
}

}  // namespace

os::SysResult<std::vector<Rule>> LibnlNetlink::listRules(const os::Netns& ns) {
  const std::string op = "list rules" + inNs(ns);
  std::vector<Rule> out;
  auto build = [] {
    fib_rule_hdr hdr{};
    hdr.family = AF_UNSPEC;
    return dumpRequest(RTM_GETRULE, hdr);
  };
  auto collect = [&out](nl_object* obj) {
    auto* r = reinterpret_cast<rtnl_rule*>(obj);
    auto src = ipFromNlAddr(rtnl_rule_get_src(r));
    if (rtnl_rule_get_action(r) != FR_ACT_TO_TBL || !src || !src->valid()) {
      return;
    }
    out.push_back(Rule{net::IpPrefix{*src, static_cast<int>(nl_addr_get_prefixlen(rtnl_rule_get_src(r)))},
                       rtnl_rule_get_table(r), rtnl_rule_get_prio(r)});
  };
  auto res = sockets_->dump(
      ns, build, "route/rule", collect, [&out] { out.clear(); }, op);
  if (!res) {
    return std::unexpected(res.error());
  }
  return out;
}

os::SysResult<void> LibnlNetlink::addRule(const os::Netns& ns, const Rule& rule) {
  return ruleRequest(*sockets_, ns, rule, true, "add rule " + describe(rule) + inNs(ns));
}

os::SysResult<void> LibnlNetlink::deleteRule(const os::Netns& ns, const Rule& rule) {
  return ruleRequest(*sockets_, ns, rule, false, "delete rule " + describe(rule) + inNs(ns));
}

}  // namespace ibcni::nl
