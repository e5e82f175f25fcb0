// SPDX-License-Identifier: Apache-2.0
// policyRouting (plugin/commands/policy_routing.cpp) through the verbs, over the fakes: the table,
// its routes, the rules and the sysctls ADD makes, what DEL and a failed ADD take away, and what
// CHECK catches. The kernel's side of the same is in tests/integration (netns tier) and the lab.
#include "fakes/fake_net_sysctls.h"
#include "plugin/commands/policy_routing.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

class PolicyRoutingTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    deps_.sysctls = &sysctls_;
  }

  json policyConfig(const std::string& version = "1.1.0") const {
    json c = config(version);
    c["policyRouting"] = true;
    return c;
  }

  std::vector<nl::Rule> rules() { return nl_.listRules(pod_).value_or(std::vector<nl::Rule>{}); }

  std::vector<std::string> routesOfTable(std::uint32_t table) {
    std::vector<std::string> out;
    for (const auto& rt : nl_.routes(pod_)) {
      if (rt.table == table) {
        out.push_back(rt.dst.toString() + (rt.gw ? " via " + rt.gw->toString() : ""));
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string sysctl(const std::string& ifName, const std::string& key) {
    return sysctls_.get(pod_, "ipv4", ifName, key).value_or("?");
  }

  /// A second host netdev `name`, up, for a second interface of the pod.
  void addHostNetdev(const std::string& name) {
    nl::Link l;
    l.name = name;
    l.mtu = 1500;
    const int index = nl_.addLink(host_, l);
    ASSERT_TRUE(nl_.setLinkUp(host_, index, true));
  }

  FakeNetSysctls sysctls_{nl_};
};

TEST(PolicyTable, ANameEndingInASmallNumberGetsOneHundredPlusItAnyOtherAStableHash) {
  config::PolicyRouting derived;
  EXPECT_EQ(plugin::policyTable(derived, "net1"), 101u);
  EXPECT_EQ(plugin::policyTable(derived, "ib0"), 100u);
  EXPECT_EQ(plugin::policyTable(derived, "rail99"), 199u);
  for (const char* name : {"net100", "rail-a", "ib", "12"}) {
    const auto table = plugin::policyTable(derived, name);
    EXPECT_GE(table, 1000u) << name;
    EXPECT_LE(table, 65535u) << name;
    EXPECT_EQ(table, plugin::policyTable(derived, name)) << "the same name, the same table";
  }
  EXPECT_NE(plugin::policyTable(derived, "rail-a"), plugin::policyTable(derived, "rail-b"));
  config::PolicyRouting configured;
  configured.table = 4242;
  EXPECT_EQ(plugin::policyTable(configured, "net1"), 4242u);
}

TEST_F(PolicyRoutingTest, AddPutsTheRoutesInTheInterfacesTableWithARulePerAddressAndSetsTheSysctls) {
  auto r = add(policyConfig());
  EXPECT_EQ(rules(), (std::vector<nl::Rule>{{*net::IpPrefix::parse("10.1.2.3/32"), 101, 1000}}));
  EXPECT_EQ(routesOfTable(101), (std::vector<std::string>{"0.0.0.0/0 via 10.1.2.1", "10.1.2.0/24",
                                                          "192.168.0.0/16 via 10.1.2.1"}));
  for (const auto& rt : nl_.routes(pod_)) {
    if (rt.table == 254u) {
      EXPECT_NE(rt.dst.toString(), "192.168.0.0/16") << "the IPAM's route is in table 101 only";
    }
  }
  EXPECT_EQ(sysctl("net1", "arp_ignore"), "2");
  EXPECT_EQ(sysctl("net1", "arp_announce"), "2");
  EXPECT_EQ(sysctl("net1", "rp_filter"), "2");
  EXPECT_EQ(sysctl("net1", "accept_local"), "1");
  ASSERT_EQ(r["routes"].size(), 3u);
  for (const auto& rt : r["routes"]) {
    EXPECT_EQ(rt["table"], 101) << rt.dump();
  }
  EXPECT_EQ(r["routes"][0]["dst"], "10.1.2.0/24");
  EXPECT_EQ(r["routes"][0]["scope"], 253) << "the subnet's route is a link route";
  EXPECT_FALSE(r["routes"][0].contains("gw"));
  auto recs = records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].policyTable, 101u);
  EXPECT_EQ(recs[0].policyPriority, 1000u);
}

TEST_F(PolicyRoutingTest, BeforeOneOneZeroTheResultLeavesOutRoutesItCannotPlaceInTheirTable) {
  auto r = add(policyConfig("1.0.0"));
  EXPECT_TRUE(r["routes"].empty()) << r.dump() << ": a 1.0.0 route would read as one of main";
  EXPECT_EQ(routesOfTable(101).size(), 3u) << "the routes are in the pod all the same";
}

TEST_F(PolicyRoutingTest, AConfiguredTableAndPriorityAreUsedAndAnIpamDefaultRouteIsNotDoubled) {
  cni::Route def;
  def.dst = *net::IpPrefix::parse("0.0.0.0/0");
  ipam_.result.routes = {def};
  json c = config("1.1.0");
  c["policyRouting"] = {{"table", 7000}, {"priority", 300}};
  add(c);
  EXPECT_EQ(rules(), (std::vector<nl::Rule>{{*net::IpPrefix::parse("10.1.2.3/32"), 7000, 300}}));
  EXPECT_EQ(routesOfTable(7000), (std::vector<std::string>{"0.0.0.0/0 via 10.1.2.1", "10.1.2.0/24"}));
}

TEST_F(PolicyRoutingTest, TwoInterfacesOfOnePodInOneSubnetGetATableEachWhicheverComesFirst) {
  addHostNetdev("vf1");
  json second = policyConfig();
  second["name"] = "ibnet2";
  second["device"] = "vf1";
  ipam_.result.ips[0].address = *net::IpPrefix::parse("10.1.2.4/24");
  add(second, {{"CNI_IFNAME", "net2"}});
  ipam_.result.ips[0].address = *net::IpPrefix::parse("10.1.2.3/24");
  add(policyConfig());
  std::vector<nl::Rule> expected = {{*net::IpPrefix::parse("10.1.2.4/32"), 102, 1000},
                                    {*net::IpPrefix::parse("10.1.2.3/32"), 101, 1000}};
  EXPECT_EQ(rules(), expected);
  EXPECT_EQ(routesOfTable(101).size(), 3u);
  EXPECT_EQ(routesOfTable(102).size(), 3u);
  EXPECT_EQ(sysctl("net2", "arp_ignore"), "2");
}

TEST_F(PolicyRoutingTest, ATableAnotherInterfaceUsesIsErrorSevenAndNothingChanges) {
  addHostNetdev("vf1");
  json first = config("1.1.0");
  first["policyRouting"] = {{"table", 200}};
  first["name"] = "ibnet2";
  first["device"] = "vf1";
  add(first, {{"CNI_IFNAME", "net2"}});
  const auto before = snapshot(pod_) + snapshot(host_);
  const auto rulesBefore = rules();
  json clash = config("1.1.0");
  clash["policyRouting"] = {{"table", 200}};
  auto out = run("ADD", clash);
  ASSERT_NE(out.exitCode, 0);
  auto e = errorOf(out);
  EXPECT_EQ(e["code"], 7);
  EXPECT_NE(e["msg"].get<std::string>().find("table 200 (policyRouting.table)"), std::string::npos) << e.dump();
  EXPECT_NE(e["msg"].get<std::string>().find("lookup 200"), std::string::npos) << "names what uses it: " << e.dump();
  EXPECT_EQ(snapshot(pod_) + snapshot(host_), before);
  EXPECT_EQ(rules(), rulesBefore);
}

TEST_F(PolicyRoutingTest, AFailureAfterTheRulesTakesThemAndTheSysctlsBack) {
  // Two addresses: the second rule fails, after the first rule, the routes and the sysctls.
  ipam_.result.ips.push_back({*net::IpPrefix::parse("fd00::3/64"), std::nullopt, std::nullopt});
  nl_.failOn(FakeNetlink::Op::kAddRule, EPERM, 2);
  auto out = run("ADD", policyConfig());
  ASSERT_NE(out.exitCode, 0);
  EXPECT_EQ(errorOf(out)["code"], 102);
  EXPECT_TRUE(rules().empty());
  EXPECT_EQ(sysctls_.sets, 8) << "four set, four put back";
  EXPECT_TRUE(ipam_.allocations.empty());
  EXPECT_FALSE(nl_.findLink(pod_, "net1"));
  EXPECT_TRUE(records().empty());
}

TEST_F(PolicyRoutingTest, ASysctlThatCannotBeSetFailsAddWithTheOnesSetPutBack) {
  sysctls_.failSets = 3;  // rp_filter
  auto out = run("ADD", policyConfig());
  ASSERT_NE(out.exitCode, 0);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("net.ipv4.conf.net1.rp_filter"), std::string::npos);
  EXPECT_EQ(sysctls_.sets, 5) << "arp_ignore, arp_announce, the failed rp_filter, then the two put back";
  EXPECT_FALSE(nl_.findLink(pod_, "net1"));
}

TEST_F(PolicyRoutingTest, DelDeletesTheRulesWithOrWithoutARecordAndSucceedsWhenTheyAreGone) {
  add(policyConfig());
  ASSERT_EQ(rules().size(), 1u);
  ASSERT_EQ(run("DEL", policyConfig()).exitCode, 0);
  EXPECT_TRUE(rules().empty());
  EXPECT_EQ(run("DEL", policyConfig()).exitCode, 0) << "DEL twice";

  // An ADD that died after its rules, before its record: DEL finds the table by the configuration.
  ASSERT_TRUE(nl_.addRule(pod_, nl::Rule{*net::IpPrefix::parse("10.1.2.3/32"), 101, 1000}));
  ASSERT_TRUE(nl_.addRule(pod_, nl::Rule{*net::IpPrefix::parse("10.9.9.9/32"), 555, 1000}));
  ASSERT_EQ(run("DEL", policyConfig()).exitCode, 0);
  EXPECT_EQ(rules(), (std::vector<nl::Rule>{{*net::IpPrefix::parse("10.9.9.9/32"), 555, 1000}}))
      << "another table's rule stays";

  netns_.removeNetns(kPodPath);
  EXPECT_EQ(run("DEL", policyConfig()).exitCode, 0) << "the netns is gone, and its rules with it";
}

TEST_F(PolicyRoutingTest, CheckCatchesARemovedRuleARemovedTableRouteAndAChangedSysctl) {
  auto r = add(policyConfig());
  json c = policyConfig();
  c["prevResult"] = r;
  ASSERT_EQ(run("CHECK", c).exitCode, 0) << run("CHECK", c).stdoutText;

  const nl::Rule rule{*net::IpPrefix::parse("10.1.2.3/32"), 101, 1000};
  ASSERT_TRUE(nl_.deleteRule(pod_, rule));
  auto out = run("CHECK", c);
  EXPECT_EQ(errorOf(out)["code"], 107);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("from 10.1.2.3/32 lookup 101"), std::string::npos)
      << out.stdoutText;
  ASSERT_TRUE(nl_.addRule(pod_, rule));

  ASSERT_TRUE(sysctls_.set(pod_, "ipv4", "net1", "rp_filter", "1"));
  out = run("CHECK", c);
  EXPECT_EQ(errorOf(out)["code"], 107);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("rp_filter is 1"), std::string::npos) << out.stdoutText;
  ASSERT_TRUE(sysctls_.set(pod_, "ipv4", "net1", "rp_filter", "2"));

  nl::Route viaGateway;
  viaGateway.dst = *net::IpPrefix::parse("0.0.0.0/0");
  viaGateway.gw = net::IpAddress::parse("10.1.2.1");
  viaGateway.table = 101;
  ASSERT_TRUE(nl_.deleteRoute(pod_, viaGateway));
  out = run("CHECK", c);
  EXPECT_EQ(errorOf(out)["code"], 107);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("0.0.0.0/0 via 10.1.2.1 table 101"), std::string::npos)
      << out.stdoutText;
}

TEST_F(PolicyRoutingTest, WithoutTheKeyNothingOfItIsMade) {
  add(config("1.1.0"));
  EXPECT_TRUE(rules().empty());
  EXPECT_EQ(sysctls_.sets, 0);
  EXPECT_FALSE(records()[0].policyTable);
}

}  // namespace
}  // namespace ibcni::testing
