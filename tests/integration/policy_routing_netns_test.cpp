// SPDX-License-Identifier: Apache-2.0
// policyRouting on the kernel (netns tier, root): a pod with two interfaces in one subnet, both
// veth ends standing in for VFs, their peers on one bridge in the test's host namespace with a
// client address. With the key each reply leaves on the interface it was sent to (the kernel's
// own `ip route get ... from ...` and the interfaces' tx counters say so); without it the reply
// from the second rail leaves on the first, which is what the key is for. The built ibcni is run
// as a runtime runs it (tests/conformance/harness.h).
#include <gtest/gtest.h>

#include "conformance/harness.h"
#include "ibcni/sysfs/net_sysctls.h"

namespace ibcni::conformance {
namespace {

constexpr const char* kClient = "10.77.0.200";

// The pod with two rails: net1 and net2 of one network, in 10.77.0.0/24, each on a veth end whose
// peer is on a bridge of the host namespace that holds the client's address.
struct TwoRails {
  TestNetns* pod = nullptr;
  json conf;
  std::string vf1, vf2;
  std::string ip1, ip2;  // without the prefix length
  json result1, result2;
};

std::string addressOf(const json& result) {
  const std::string a = result["ips"][0]["address"];
  return a.substr(0, a.find('/'));
}

// tx_packets of `ifName` in `ns`, as `ip -s -j link` reports it.
std::uint64_t txPackets(const os::Netns& ns, const std::string& ifName) {
  const json j = json::parse(ip(ns, {"-s", "-j", "link", "show", "dev", ifName}), nullptr, false);
  if (!j.is_array() || j.empty()) {
    ADD_FAILURE() << "no link " << ifName;
    return 0;
  }
  return j[0]["stats64"]["tx"]["packets"].get<std::uint64_t>();
}

TwoRails addTwoRails(World& w, bool policy) {
  TwoRails r;
  r.pod = &w.pod();
  // No IPv6 in the pod: its autoconfiguration would send on both rails of its own accord.
  auto sysctls = sysfs::systemNetSysctls();
  for (const char* conf : {"all", "default"}) {
    EXPECT_TRUE(sysctls->set(r.pod->netns(), "ipv6", conf, "disable_ipv6", "1"));
  }
  r.vf1 = w.vf();
  r.vf2 = w.vf();
  ip(w.host(), {"link", "add", "br0", "type", "bridge"});
  for (const auto& vf : {r.vf1, r.vf2}) {
    ip(w.host(), {"link", "set", "dev", w.peerOf(vf), "master", "br0", "up"});
  }
  ip(w.host(), {"addr", "add", std::string(kClient) + "/24", "dev", "br0"});
  ip(w.host(), {"link", "set", "dev", "br0", "up"});
  r.conf = w.conf("1.1.0", r.vf1, w.ipam("10.77.0.0/24"));
  if (policy) {
    r.conf["policyRouting"] = true;
  }
  Exec add1 = w.ibcni(World::env("ADD", "c1", *r.pod, "net1"), r.conf);
  EXPECT_EQ(add1.status, 0) << add1.describe();
  json second = r.conf;
  second["device"] = r.vf2;
  Exec add2 = w.ibcni(World::env("ADD", "c1", *r.pod, "net2"), second);
  EXPECT_EQ(add2.status, 0) << add2.describe();
  r.result1 = add1.parsed();
  r.result2 = add2.parsed();
  r.ip1 = addressOf(r.result1);
  r.ip2 = addressOf(r.result2);
  return r;
}

// What the kernel says of a packet from `from` to the client, in the pod.
std::string routeGet(const TwoRails& r, const std::string& from) {
  return ip(r.pod->netns(), {"route", "get", kClient, "from", from});
}

TEST(PolicyRoutingNetns, EachRailsReplyLeavesOnItsOwnInterfaceAndDelTakesTheRulesAway) {
  CONFORMANCE_WORLD(w);
  TwoRails r = addTwoRails(w, true);
  ASSERT_FALSE(r.ip1.empty());
  ASSERT_FALSE(r.ip2.empty());
  const os::Netns& pod = r.pod->netns();
  const std::string get1 = routeGet(r, r.ip1);
  const std::string get2 = routeGet(r, r.ip2);
  EXPECT_NE(get1.find("dev net1 table 101"), std::string::npos) << get1;
  EXPECT_NE(get2.find("dev net2 table 102"), std::string::npos) << get2;
  const std::string rules = ip(pod, {"rule", "show"});
  EXPECT_NE(rules.find("1000:\tfrom " + r.ip1 + " lookup 101"), std::string::npos) << rules;
  EXPECT_NE(rules.find("1000:\tfrom " + r.ip2 + " lookup 102"), std::string::npos) << rules;
  auto sysctls = sysfs::systemNetSysctls();
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"arp_ignore", "2"}, {"arp_announce", "2"}, {"rp_filter", "2"}, {"accept_local", "1"}}) {
    EXPECT_EQ(sysctls->get(pod, "ipv4", "net2", key).value_or("?"), value) << key;
  }
  EXPECT_EQ(r.result2["routes"][0]["table"], 102) << r.result2.dump();

  // Echo requests to the second rail: the replies, and the ARP answer, leave on net2 alone.
  const auto tx1 = txPackets(pod, "net1");
  const auto tx2 = txPackets(pod, "net2");
  auto ping = testing::runProgram({"/usr/bin/ping", "-c", "3", "-i", "0.2", "-W", "2", r.ip2}, {}, std::nullopt);
  EXPECT_EQ(ping.status, 0) << ping.describe();
  EXPECT_EQ(txPackets(pod, "net1"), tx1) << "net1 sent nothing for net2's address";
  EXPECT_GE(txPackets(pod, "net2"), tx2 + 3) << "net2 sent the three replies";

  // CHECK passes, then catches a rule taken away.
  json check2 = withPrev(r.conf, r.result2);
  check2["device"] = r.vf2;
  Exec ok = w.ibcni(World::env("CHECK", "c1", *r.pod, "net2"), check2);
  EXPECT_EQ(ok.status, 0) << ok.describe();
  ip(pod, {"rule", "del", "from", r.ip2, "lookup", "102", "pref", "1000"});
  Exec caught = w.ibcni(World::env("CHECK", "c1", *r.pod, "net2"), check2);
  expectError(caught, 107, {"from " + r.ip2 + "/32 lookup 102"});
  ip(pod, {"rule", "add", "from", r.ip2, "lookup", "102", "pref", "1000"});

  // DEL of each rail takes its rules away; the pod keeps nothing.
  for (const auto& [ifName, result, vf] :
       {std::tuple{"net1", r.result1, r.vf1}, std::tuple{"net2", r.result2, r.vf2}}) {
    json del = withPrev(r.conf, result);
    del["device"] = vf;
    Exec d = w.ibcni(World::env("DEL", "c1", *r.pod, ifName), del);
    EXPECT_EQ(d.status, 0) << d.describe();
  }
  const std::string after = ip(pod, {"rule", "show"});
  EXPECT_EQ(after.find("lookup 10"), std::string::npos) << after;
  w.expectNothingLeft(*r.pod);
}

// The control: the same pod without the key. The kernel picks net1 for the second rail's reply
// (the first connected route of the subnet), so the assertions above can fail.
TEST(PolicyRoutingNetns, WithoutTheKeyTheSecondRailsReplyLeavesOnTheFirst) {
  CONFORMANCE_WORLD(w);
  TwoRails r = addTwoRails(w, false);
  ASSERT_FALSE(r.ip2.empty());
  const std::string get2 = routeGet(r, r.ip2);
  EXPECT_NE(get2.find("dev net1"), std::string::npos) << get2;
  const auto tx1 = txPackets(r.pod->netns(), "net1");
  auto ping = testing::runProgram({"/usr/bin/ping", "-c", "3", "-i", "0.2", "-W", "2", r.ip2}, {}, std::nullopt);
  EXPECT_EQ(ping.status, 0) << ping.describe();
  EXPECT_GE(txPackets(r.pod->netns(), "net1"), tx1 + 3) << "net1 sent net2's replies";
  EXPECT_EQ(ip(r.pod->netns(), {"rule", "show"}).find("lookup 10"), std::string::npos);
}

}  // namespace
}  // namespace ibcni::conformance
