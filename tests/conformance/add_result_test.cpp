// SPDX-License-Identifier: Apache-2.0
// Longer than 600 lines on purpose: one file per checklist section group, as e2e/CONFORMANCE.md maps them.
// Checklist sections E (ADD, items 29-34), F (result format 1.0.0/1.1.0, items 35-42) and G (older
// result formats, items 43-47). Every ADD result is also validated field by field against its
// version's schema by the harness (result_schema.h).
#include <gtest/gtest.h>

#include <set>

#include "conformance/harness.h"

namespace ibcni::conformance {
namespace {

/// A dual-stack embedded IPAM with 1.1.0 route fields (dropped below 1.1.0).
json dualStackIpam(const World& w) {
  json ipam = w.ipam("10.77.0.0/24");
  ipam["ranges"].push_back(json::array({{{"subnet", "fd77::/64"}}}));
  ipam["routes"] = {{{"dst", "10.99.0.0/16"}, {"mtu", 1400}, {"advmss", 1360}, {"priority", 77}},
                    {{"dst", "fd99::/64"}}};
  return ipam;
}

/// IPv6 in the kernel (the dual-stack cases fall back to IPv4 without it).
bool ipv6Usable() { return fs::exists("/proc/sys/net/ipv6/conf/all/disable_ipv6"); }

// ---------------------------------------------------------------------------------------------
// Checklist item 29: ADD creates CNI_IFNAME inside CNI_NETNS and prints a result
TEST(InterfaceCreation, AddCreatesTheInterfaceInTheNetnsAndPrintsAResult) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const std::string v : {"0.3.1", "1.1.0"}) {  // every version: ResultVersion
    SCOPED_TRACE(v);
    const json c = w.conf(v, vf, w.ipam());
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    ASSERT_TRUE(add.parsed().is_object());
    auto inPod = linkState(pod.netns(), "net1");
    ASSERT_TRUE(inPod.has_value()) << ::testing::PrintToString(linkNames(pod.netns()));
    EXPECT_TRUE(inPod->up);
    EXPECT_EQ(inPod->mac, before->mac);
    EXPECT_FALSE(linkState(w.host(), vf).has_value());
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, add.parsed())).status, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 30: Name clash on CNI_IFNAME
TEST(InterfaceNameClash, ExistingIfnameInTheContainerIsAnErrorAndIsLeftAlone) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf(1500, true);
  ip(pod.netns(), {"link", "add", "net1", "type", "veth", "peer", "name", "x0"});
  ip(pod.netns(), {"addr", "add", "192.168.250.1/24", "dev", "net1"});
  const auto theirs = linkState(pod.netns(), "net1");
  Exec add = w.ibcni(World::env("ADD", "c1", pod), w.conf("1.0.0", vf, w.ipam()));
  EXPECT_NE(add.status, 0) << add.describe();
  EXPECT_EQ(linkState(pod.netns(), "net1"), theirs) << "the pod's own net1 was touched";
  EXPECT_EQ(addresses(pod.netns(), "net1"), std::vector<std::string>{"192.168.250.1/24"});
  EXPECT_EQ(linkState(w.host(), vf), before);
  EXPECT_TRUE(w.records().empty());
  EXPECT_TRUE(w.noAllocations());
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), w.conf("1.0.0", vf, w.ipam())).status, 0);
  EXPECT_EQ(linkState(pod.netns(), "net1"), theirs) << "DEL after the failed ADD touched the pod's own net1";
}

// The existing interface is another network's ibcni attachment: neither the failed ADD nor the
// runtime's DEL that follows it may touch it.
// Checklist item 30: Name clash on CNI_IFNAME
TEST(InterfaceNameClash, AnotherNetworksAttachmentOfThatNameIsLeftAlone) {
  CONFORMANCE_WORLD(w);
  TestNetns& pod = w.pod();
  const std::string vfA = w.vf();
  const std::string vfB = w.vf(1500, true);
  const auto beforeB = linkState(w.host(), vfB);
  const json a = w.conf("1.1.0", vfA, w.ipam("10.77.0.0/24"));
  json b = w.conf("1.1.0", vfB, w.ipam("10.76.0.0/24"));
  b["name"] = w.network() + "-b";
  Exec addA = w.ibcni(World::env("ADD", "c1", pod), a);
  ASSERT_EQ(addA.status, 0) << addA.describe();
  const auto theirs = linkState(pod.netns(), "net1");
  Exec addB = w.ibcni(World::env("ADD", "c1", pod), b);
  EXPECT_NE(addB.status, 0) << addB.describe();
  Exec delB = w.ibcni(World::env("DEL", "c1", pod), b);
  EXPECT_EQ(delB.status, 0) << delB.describe();
  EXPECT_EQ(linkState(pod.netns(), "net1"), theirs) << "network b's DEL took network a's interface";
  EXPECT_EQ(linkState(w.host(), vfB), beforeB);
  EXPECT_FALSE(linkState(w.host(), vfA).has_value());
  Exec check = w.ibcni(World::env("CHECK", "c1", pod), withPrev(a, addA.parsed()));
  EXPECT_EQ(check.status, 0) << check.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), a).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 31: Double ADD
TEST(DoubleAdd, SecondAddFailsWithoutDoubleAllocationAndOneDelCleans) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const std::string vf2 = w.vf();
  const auto before2 = linkState(w.host(), vf2);
  const json c = w.conf("1.0.0", vf, w.ipam());
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  Exec again = w.ibcni(World::env("ADD", "c1", pod), c);
  EXPECT_NE(again.status, 0) << again.describe();
  // Also when the second ADD names another device: still no second attachment.
  Exec other = w.ibcni(World::env("ADD", "c1", pod), w.conf("1.0.0", vf2, w.ipam()));
  EXPECT_NE(other.status, 0) << other.describe();
  EXPECT_EQ(linkState(w.host(), vf2), before2);
  EXPECT_EQ(w.allocations().size(), 1U);
  EXPECT_EQ(w.records().size(), 1U);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  w.expectNothingLeft(pod, vf, before);
  EXPECT_TRUE(w.records().empty());
}

// Checklist item 31: Double ADD
TEST(DoubleAdd, IbcniIpamDoubleAddReturnsTheSameAddressOnce) {
  CONFORMANCE_WORLD(w);
  const json ic = w.ipamConf("1.0.0");
  CniEnv e = World::ipamEnv("ADD", "c1", "/var/run/netns/x");
  Exec a = w.ipamPlugin(e, ic);
  Exec b = w.ipamPlugin(e, ic);
  ASSERT_EQ(a.status, 0) << a.describe();
  ASSERT_EQ(b.status, 0) << b.describe();
  EXPECT_EQ(resultAddresses(a.parsed()), resultAddresses(b.parsed()));
  EXPECT_EQ(w.ipamAllocations(), std::vector<std::string>{"c1:net1"});
  e.command = "DEL";
  EXPECT_EQ(w.ipamPlugin(e, ic).status, 0);
  EXPECT_TRUE(w.noAllocations());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 32: A failed ADD leaves nothing behind
TEST(FailedAddCleanup, FailureAfterIpamReleasesTheAddressAndRestoresTheDevice) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf(1480, true);
  // The IPAM returns a route through a gateway the pod cannot reach: adding it fails (ENETUNREACH)
  // after the IPAM allocated an address and the device was moved, configured and addressed.
  json c = w.conf("1.0.0", vf, w.ipam());
  c["ipam"]["routes"] = {{{"dst", "10.99.0.0/16"}, {"gw", "192.0.2.1"}}};
  c["mtu"] = 1400;
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_NE(add.status, 0) << add.describe();
  EXPECT_EQ(linkState(w.host(), vf), before) << "the device is not back as it was";
  EXPECT_EQ(linkNames(pod.netns()), std::vector<std::string>{"lo"});
  EXPECT_TRUE(w.noAllocations()) << ::testing::PrintToString(w.allocations());
  EXPECT_TRUE(w.records().empty());
  Exec del = w.ibcni(World::env("DEL", "c1", pod), c);
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_EQ(linkState(w.host(), vf), before);
}

// Checklist item 32: A failed ADD leaves nothing behind
TEST(FailedAddCleanup, IbcniIpamFailedAddAllocatesNothing) {
  CONFORMANCE_WORLD(w);
  TestNetns& pod = w.pod();
  json ic = w.ipamConf("1.0.0", "10.78.0.0/30");  // one address
  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), ic).status, 0);
  Exec full = w.ipamPlugin(World::env("ADD", "c2", pod), ic);
  EXPECT_NE(full.status, 0) << full.describe();
  json badReq = w.ipamConf("1.0.0");
  badReq["runtimeConfig"] = {{"ips", {"10.78.0.1/24"}}};  // the gateway
  Exec bad = w.ipamPlugin(World::env("ADD", "c3", pod), badReq);
  EXPECT_EQ(bad.code(), 7U) << bad.describe();
  EXPECT_EQ(w.ipamAllocations(), std::vector<std::string>{"c1:net1"});
  EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c2", pod), ic).status, 0);
  EXPECT_EQ(w.ipamAllocations(), std::vector<std::string>{"c1:net1"}) << "DEL of the failed ADD released c1's address";
}

// ---------------------------------------------------------------------------------------------
// 33. Several attachments per container

/// Two attachments of one container, net1 with c1 and net2 with c2; DEL net1 leaves net2 intact.
void expectIndependentAttachments(World& w, TestNetns& pod, const json& c1, const json& c2) {
  Exec a1 = w.ibcni(World::env("ADD", "c1", pod, "net1"), c1);
  ASSERT_EQ(a1.status, 0) << a1.describe();
  Exec a2 = w.ibcni(World::env("ADD", "c1", pod, "net2"), c2);
  if (a2.status != 0) {
    (void)w.ibcni(World::env("DEL", "c1", pod, "net2"), c2);
    (void)w.ibcni(World::env("DEL", "c1", pod, "net1"), c1);
  }
  ASSERT_EQ(a2.status, 0) << a2.describe();
  EXPECT_NE(resultAddresses(a1.parsed()), resultAddresses(a2.parsed()));
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod, "net1"), withPrev(c1, a1.parsed())).status, 0);
  EXPECT_FALSE(linkState(pod.netns(), "net1").has_value());
  Exec check = w.ibcni(World::env("CHECK", "c1", pod, "net2"), withPrev(c2, a2.parsed()));
  EXPECT_EQ(check.status, 0) << check.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod, "net2"), withPrev(c2, a2.parsed())).status, 0);
  w.expectPodEmpty(pod);
}

// The checklist's case: the same network (here with a route from its IPAM) joined twice.
// Checklist item 33: Several attachments per container
TEST(SeveralAttachments, SameNetworkTwiceWithDifferentIfnamesIsIndependent) {
  CONFORMANCE_WORLD(w);
  TestNetns& pod = w.pod();
  const std::string vf1 = w.vf();
  const std::string vf2 = w.vf();
  // The network's device arrives per attachment (Multus' deviceID); here each names its own veth.
  expectIndependentAttachments(w, pod, w.conf("1.1.0", vf1, w.ipam()), w.conf("1.1.0", vf2, w.ipam()));
  EXPECT_TRUE(w.noAllocations());
}

// Checklist item 33: Several attachments per container
TEST(SeveralAttachments, TwoNetworksInOneContainerAreIndependent) {
  CONFORMANCE_WORLD(w);
  TestNetns& pod = w.pod();
  json c1 = w.conf("1.1.0", w.vf(), w.ipam("10.77.0.0/24"));
  json c2 = w.conf("1.1.0", w.vf(), w.ipam("10.76.0.0/24"));
  c2["name"] = w.network() + "-b";
  c2["ipam"]["routes"] = {{{"dst", "10.97.0.0/16"}}};
  expectIndependentAttachments(w, pod, c1, c2);
  EXPECT_TRUE(w.noAllocations());
  EXPECT_TRUE(w.allocations(w.network() + "-b").empty());
}

// Checklist item 33: Several attachments per container
TEST(SeveralAttachments, IbcniIpamTwoIfnamesGetTheirOwnAddresses) {
  CONFORMANCE_WORLD(w);
  const json ic = w.ipamConf("1.1.0");
  Exec a1 = w.ipamPlugin(World::ipamEnv("ADD", "c1", "/var/run/netns/p", "net1"), ic);
  Exec a2 = w.ipamPlugin(World::ipamEnv("ADD", "c1", "/var/run/netns/p", "net2"), ic);
  ASSERT_EQ(a1.status, 0);
  ASSERT_EQ(a2.status, 0);
  EXPECT_NE(resultAddresses(a1.parsed()), resultAddresses(a2.parsed()));
  EXPECT_EQ(w.ipamPlugin(World::ipamEnv("DEL", "c1", "/var/run/netns/p", "net1"), ic).status, 0);
  Exec check = w.ipamPlugin(World::ipamEnv("CHECK", "c1", "/var/run/netns/p", "net2"), withPrev(ic, a2.parsed()));
  EXPECT_EQ(check.status, 0) << check.describe();
  EXPECT_EQ(w.ipamAllocations(), std::vector<std::string>{"c1:net2"});
}

// ---------------------------------------------------------------------------------------------
// Checklist item 34: A result is always printed on ADD success
TEST(AddOutput, EverySuccessfulAddPrintsAResult) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  // Alone, without IPAM, and chained after another plugin.
  const json prev = {{"cniVersion", "1.0.0"}, {"interfaces", {{{"name", "eth0"}, {"sandbox", pod.path()}}}}};
  for (const json& c :
       {w.conf("1.0.0", vf), w.conf("1.0.0", vf, json::object()), withPrev(w.conf("1.0.0", vf), prev)}) {
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    EXPECT_FALSE(add.out.empty());
    EXPECT_TRUE(add.parsed().contains("interfaces")) << add.out;
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  }
  Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), w.ipamConf("1.0.0"));
  ASSERT_EQ(ia.status, 0);
  EXPECT_FALSE(ia.out.empty());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 35: Result version = request version
TEST(ResultVersion, ResultVersionIsTheRequestVersion) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const auto& v : kVersions) {
    SCOPED_TRACE(v);
    const json c = w.conf(v, vf, w.ipam());
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    EXPECT_EQ(add.parsed().value("cniVersion", ""), v);
    if (v >= "0.4.0") {
      EXPECT_EQ(w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, add.parsed())).status, 0);
    }
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, add.parsed())).status, 0);
    Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), w.ipamConf(v));
    ASSERT_EQ(ia.status, 0) << ia.describe();
    EXPECT_EQ(ia.parsed().value("cniVersion", ""), v);
    EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), w.ipamConf(v)).status, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 36: Result interfaces
TEST(ResultInterfaces, InterfaceEntryDescribesThePodInterface) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const std::string v : {"0.3.0", "1.0.0", "1.1.0"}) {
    SCOPED_TRACE(v);
    json c = w.conf(v, vf, w.ipam());
    c["mtu"] = 1450;
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    const json r = add.parsed();
    ASSERT_EQ(r["interfaces"].size(), 1U) << add.out;
    const json& iface = r["interfaces"][0];
    auto link = linkState(pod.netns(), "net1");
    ASSERT_TRUE(link.has_value());
    EXPECT_EQ(iface.value("name", ""), "net1");
    EXPECT_EQ(iface.value("sandbox", ""), pod.path()) << "sandbox must be CNI_NETNS exactly as passed";
    EXPECT_EQ(iface.value("mac", ""), link->mac);
    if (v == "1.1.0") {
      EXPECT_EQ(iface.value("mtu", 0U), link->mtu);
      EXPECT_EQ(link->mtu, 1450U);
    }
    EXPECT_FALSE(iface.contains("pciID")) << "a veth is no PCI function";
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 37: Result ips
TEST(ResultIps, IpsAreCidrOnTheContainerInterface) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const std::string v : {"0.4.0", "1.0.0"}) {
    SCOPED_TRACE(v);
    const json c = w.conf(v, vf, w.ipam());
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    const json r = add.parsed();
    ASSERT_EQ(r["ips"].size(), 1U) << add.out;
    const json& a = r["ips"][0];
    EXPECT_TRUE(isCidr(a.value("address", ""))) << add.out;
    ASSERT_TRUE(a.contains("interface"));
    EXPECT_EQ(r["interfaces"][a["interface"].get<std::size_t>()].value("name", ""), "net1");
    EXPECT_EQ(a.contains("version"), v < "1.0.0") << add.out;
    EXPECT_EQ(addresses(pod.netns(), "net1"), std::vector<std::string>{a.value("address", "")});
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 38: Result routes
TEST(ResultRoutes, RoutesWith110FieldsOnlyIn110) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json ipam = w.ipam();
  ipam["routes"] = {{{"dst", "10.99.0.0/16"}, {"mtu", 1400}, {"advmss", 1360}, {"priority", 77}},
                    {{"dst", "10.98.0.0/16"}, {"gw", "10.77.0.254"}}};
  for (const std::string v : {"1.0.0", "1.1.0"}) {
    SCOPED_TRACE(v);
    const json c = w.conf(v, vf, ipam);
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    const json routes = add.parsed().value("routes", json::array());
    ASSERT_EQ(routes.size(), 2U) << add.out;
    EXPECT_EQ(routes[0].value("dst", ""), "10.99.0.0/16");
    EXPECT_EQ(routes[1].value("gw", ""), "10.77.0.254");
    if (v == "1.1.0") {
      EXPECT_EQ(routes[0].value("mtu", 0U), 1400U);
      EXPECT_EQ(routes[0].value("advmss", 0U), 1360U);
      EXPECT_EQ(routes[0].value("priority", 0U), 77U);
    } else {
      EXPECT_FALSE(routes[0].contains("priority")) << add.out;
    }
    const std::string kernel = ip(pod.netns(), {"route", "show", "10.99.0.0/16"});
    EXPECT_NE(kernel.find("metric 77"), std::string::npos) << kernel;
    EXPECT_NE(kernel.find("mtu 1400"), std::string::npos) << kernel;
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  }
}

// Checklist item 38: Result routes
TEST(ResultRoutes, IbcniIpamReturnsEveryRouteField) {
  CONFORMANCE_WORLD(w);
  for (const auto& v : kVersions) {
    SCOPED_TRACE(v);
    json ic = w.ipamConf(v);
    ic["ipam"]["routes"] = {{{"dst", "0.0.0.0/0"},
                             {"gw", "10.78.0.254"},
                             {"mtu", 1400},
                             {"advmss", 1360},
                             {"priority", 10},
                             {"table", 100},
                             {"scope", 0}}};
    CniEnv e = World::ipamEnv("ADD", "c1", "/var/run/netns/p");
    Exec add = w.ipamPlugin(e, ic);
    ASSERT_EQ(add.status, 0) << add.describe();
    const json rt = add.parsed()["routes"][0];
    EXPECT_EQ(rt.value("dst", ""), "0.0.0.0/0");
    EXPECT_EQ(rt.value("gw", ""), "10.78.0.254");
    EXPECT_EQ(rt.contains("table"), v == "1.1.0") << add.out;
    if (v == "1.1.0") {
      EXPECT_EQ(rt.value("mtu", 0U), 1400U);
      EXPECT_EQ(rt.value("advmss", 0U), 1360U);
      EXPECT_EQ(rt.value("priority", 0U), 10U);
      EXPECT_EQ(rt.value("table", 0U), 100U);
      EXPECT_TRUE(rt.contains("scope"));
    }
    e.command = "DEL";
    EXPECT_EQ(w.ipamPlugin(e, ic).status, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 39: Result dns, omitted when empty
TEST(ResultDns, DnsIsOmittedWhenEmptyAndCompleteWhenGiven) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const std::string v : {"0.4.0", "1.1.0"}) {
    SCOPED_TRACE(v);
    const json c = w.conf(v, vf, w.ipam());
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    const json r = add.parsed();
    EXPECT_TRUE(!r.contains("dns") || r["dns"].empty()) << "no DNS was configured\n" << add.out;
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);

    json withDns = w.ipam();
    withDns["dns"] = {{"nameservers", {"10.0.0.53", "fd00::53"}}, {"domain", "example.org"}};
    const json c2 = w.conf(v, vf, withDns);
    Exec add2 = w.ibcni(World::env("ADD", "c1", pod), c2);
    ASSERT_EQ(add2.status, 0) << add2.describe();
    EXPECT_EQ(add2.parsed().value("dns", json::object()), withDns["dns"]);
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c2).status, 0);

    Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), w.ipamConf(v));
    ASSERT_EQ(ia.status, 0);
    EXPECT_TRUE(!ia.parsed().contains("dns") || ia.parsed()["dns"].empty()) << ia.out;
    EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), w.ipamConf(v)).status, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 40: Only spec fields in results (libcni drops the rest)
TEST(ResultFields, ResultsCarryOnlySpecFieldsAtEveryVersion) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const auto& v : kVersions) {
    SCOPED_TRACE(v);
    // Every option that could leak a non-standard field: mtu, the verbs check, dual stack, routes
    // with 1.1.0 fields, the mac capability. The harness rejects any field outside v's schema.
    json c = w.conf(v, vf, dualStackIpam(w));
    c["mtu"] = 1400;
    c["runtimeConfig"] = {{"mac", "02:11:22:33:44:55"}};
    c["verbsCheck"] = {{"mode", "warn"}};
    if (!ipv6Usable()) {
      c["ipam"] = w.ipam();
    }
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    for (const char* key : {"guid", "pkey", "pciAddress", "rdmaDevice", "hostName"}) {
      EXPECT_EQ(add.out.find(std::string("\"") + key + "\""), std::string::npos) << add.out;
    }
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
    json ic = w.ipamConf(v);
    ic["ipam"]["routes"] = {{{"dst", "10.98.0.0/16"}, {"table", 5}}};
    ic["ipam"]["dns"] = {{"nameservers", {"10.0.0.53"}}};
    Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), ic);
    ASSERT_EQ(ia.status, 0) << ia.describe();
    EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), ic).status, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 41: No-IP results are valid
TEST(NoIpResult, ResultWithoutIpamHasInterfacesOnly) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const std::string v : {"0.3.0", "1.1.0"}) {
    for (const auto& ipam : {std::optional<json>(), std::optional<json>(json::object())}) {
      SCOPED_TRACE(v + (ipam ? " ipam {}" : " no ipam"));
      const json c = w.conf(v, vf, ipam);
      Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
      ASSERT_EQ(add.status, 0) << add.describe();
      const json r = add.parsed();
      EXPECT_TRUE(r.contains("interfaces"));
      EXPECT_FALSE(r.contains("ips")) << add.out;
      for (const auto& a : addresses(pod.netns(), "net1")) {
        EXPECT_TRUE(a.starts_with("fe80:")) << "net1 has an address without IPAM: " << a;  // link-local is the kernel's
      }
      EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 42: Abbreviated IPAM results
TEST(AbbreviatedIpamResult, IbcniIpamReturnsTheAbbreviatedResult) {
  CONFORMANCE_WORLD(w);
  for (const auto& v : kVersions) {
    SCOPED_TRACE(v);
    CniEnv e = World::ipamEnv("ADD", "c1", "/var/run/netns/p");
    Exec add = w.ipamPlugin(e, w.ipamConf(v));  // the harness validates it as an IPAM result
    ASSERT_EQ(add.status, 0) << add.describe();
    // A named copy: parsed() returns a temporary, and a range-for over a reference into it would
    // read freed memory (the temporary dies before the loop runs; AddressSanitizer found it).
    const nlohmann::json result = add.parsed();
    EXPECT_FALSE(result.contains("interfaces")) << add.out;
    for (const auto& a : result.at("ips")) {
      EXPECT_FALSE(a.contains("interface")) << add.out;
    }
    e.command = "DEL";
    EXPECT_EQ(w.ipamPlugin(e, w.ipamConf(v)).status, 0);
  }
}

// Checklist item 42: Abbreviated IPAM results
TEST(AbbreviatedIpamResult, IbcniFillsInTheInterfaceIndex) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  // ibcni-ipam run as a separate binary under another type name: the delegated path.
  const fs::path bin = w.tmp() / "bin";
  fs::create_directories(bin);
  fs::create_symlink(ipamBinary(), bin / "ext-ipam");
  json ipam = w.ipam();
  ipam["type"] = "ext-ipam";
  const json prev = {
      {"cniVersion", "1.0.0"},
      {"interfaces", {{{"name", "eth0"}, {"sandbox", pod.path()}}, {{"name", "eth1"}, {"sandbox", pod.path()}}}}};
  const json c = withPrev(w.conf("1.0.0", vf, ipam), prev);
  CniEnv e = World::env("ADD", "c1", pod);
  e.path = bin.string();
  Exec add = w.ibcni(e, c);
  ASSERT_EQ(add.status, 0) << add.describe();
  const json r = add.parsed();
  ASSERT_EQ(r["ips"].size(), 1U) << add.out;
  EXPECT_EQ(r["ips"][0].value("interface", -1), 2) << "our interface is the third one\n" << add.out;
  EXPECT_EQ(r["interfaces"][2].value("name", ""), "net1");
  e.command = "DEL";
  EXPECT_EQ(w.ibcni(e, c).status, 0);
  EXPECT_TRUE(w.noAllocations());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 43: 0.3.x / 0.4.0 results: ips[].version, no 1.1.0 fields
TEST(OldResultFormats, OldResultsCarryIpVersionPerFamily) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const bool v6 = ipv6Usable();
  for (const std::string v : {"0.3.0", "0.3.1", "0.4.0"}) {
    SCOPED_TRACE(v);
    json c = w.conf(v, vf, v6 ? dualStackIpam(w) : w.ipam());
    c["mtu"] = 1400;
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    const json r = add.parsed();
    std::set<std::string> versions;
    for (const auto& a : r["ips"]) {
      versions.insert(a.value("version", ""));
      EXPECT_EQ(a.value("version", ""),
                std::to_string(ipFamily(a.value("address", "").substr(0, a.value("address", "").find('/')))));
    }
    const std::set<std::string> want = v6 ? std::set<std::string>{"4", "6"} : std::set<std::string>{"4"};
    EXPECT_EQ(versions, want) << add.out;
    EXPECT_FALSE(r["interfaces"][0].contains("mtu")) << add.out;
    for (const auto& rt : r.value("routes", json::array())) {
      EXPECT_FALSE(rt.contains("mtu") || rt.contains("advmss") || rt.contains("priority")) << add.out;
    }
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);

    json ic = w.ipamConf(v);
    ic["ipam"]["ranges"].push_back(json::array({{{"subnet", "fd78::/64"}}}));
    Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), ic);
    ASSERT_EQ(ia.status, 0) << ia.describe();
    ASSERT_EQ(ia.parsed()["ips"].size(), 2U) << ia.out;
    EXPECT_EQ(ia.parsed()["ips"][0].value("version", ""), "4");
    EXPECT_EQ(ia.parsed()["ips"][1].value("version", ""), "6");
    EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), ic).status, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 45: prevResult arrives in the request's version
TEST(PrevResultVersion, PrevResultInTheRequestVersionFormatIsUnderstood) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const std::string v : {"0.4.0", "1.0.0", "1.1.0"}) {
    SCOPED_TRACE(v);
    json ipam = w.ipam();
    ipam["routes"] = {{{"dst", "10.99.0.0/16"}, {"priority", 70}}};
    const json c = w.conf(v, vf, ipam);
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    // As libcni converts a cached result: 0.x gains routes: [] and dns: {} when it had none; the
    // 1.1.0 fields are present at 1.1.0.
    json prev = add.parsed();
    if (v == "0.4.0") {
      prev["dns"] = json::object();
    }
    Exec check = w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, prev));
    EXPECT_EQ(check.status, 0) << check.describe();
    json ic = w.ipamConf(v);
    Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), ic);
    ASSERT_EQ(ia.status, 0);
    json iprev = ia.parsed();
    iprev["routes"] = json::array();
    Exec icheck = w.ipamPlugin(World::env("CHECK", "c1", pod), withPrev(ic, iprev));
    EXPECT_EQ(icheck.status, 0) << icheck.describe();
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, prev)).status, 0);
    EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), withPrev(ic, iprev)).status, 0);
  }
  json emptyRoutes = {{"cniVersion", "0.4.0"},
                      {"interfaces", {{{"name", "net9"}, {"sandbox", pod.path()}}}},
                      {"routes", json::array()},
                      {"dns", json::object()}};
  Exec del = w.ibcni(World::env("DEL", "c9", pod, "net9"), withPrev(w.conf("0.4.0", vf), emptyRoutes));
  EXPECT_EQ(del.status, 0) << del.describe();
}

// ---------------------------------------------------------------------------------------------
// Checklist item 47: 0.1.0 and 0.2.0 are not advertised and are refused
TEST(LegacyVersions, VersionsBelow030AreNotSupported) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const std::string* bin : {&ibcniBinary(), &ipamBinary()}) {
    Exec r = execProgram(*bin, {"CNI_COMMAND=VERSION"}, std::string("{\"cniVersion\":\"0.2.0\"}"));
    ASSERT_EQ(r.status, 0) << r.describe();
    auto list = r.parsed().value("supportedVersions", std::vector<std::string>{});
    for (const char* old : {"0.1.0", "0.2.0"}) {
      EXPECT_EQ(std::find(list.begin(), list.end(), old), list.end()) << r.out;
    }
  }
  for (const std::string v : {"0.1.0", "0.2.0"}) {
    SCOPED_TRACE(v);
    expectError(w.ibcni(World::env("ADD", "c1", pod), w.conf(v, vf, w.ipam())), 1);
    expectError(w.ipamPlugin(World::env("ADD", "c1", pod), w.ipamConf(v)), 1);
  }
  w.expectPodEmpty(pod);
}

}  // namespace
}  // namespace ibcni::conformance
