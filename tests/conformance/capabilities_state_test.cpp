// SPDX-License-Identifier: Apache-2.0
// Checklist sections N (capabilities and runtimeConfig, items 86-92) and O (concurrency, state,
// items 93-94). Items 95 (libcni's cache) and 96 (the runtime's guarantees) are the runtime's.
#include <gtest/gtest.h>

#include <set>

#include "conformance/harness.h"

namespace ibcni::conformance {
namespace {

// ---------------------------------------------------------------------------------------------
// Checklist item 86: runtimeConfig: every key optional, runtimeConfig wins over the static configuration
TEST(RuntimeConfig, RuntimeConfigIsOptionalAndWinsOverStaticConfig) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.1.0", vf, w.ipam());
  c["runtimeConfig"] = json::object();
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  // deviceID: the capability's value is the one used.
  json dev = w.conf("1.1.0", vf, w.ipam());
  dev.erase("device");
  dev["deviceID"] = "0000:ff:1f.6";
  dev["runtimeConfig"] = {{"deviceID", "0000:ff:1f.7"}};
  expectError(w.ibcni(World::env("ADD", "c1", pod), dev), 100, {"0000:ff:1f.7"});
  // ips: runtimeConfig over args.cni.ips over CNI_ARGS IP=.
  json ips = w.conf("1.1.0", vf, w.ipam());
  ips["runtimeConfig"] = {{"ips", {"10.77.0.31/24"}}};
  ips["args"] = {{"cni", {{"ips", {"10.77.0.32"}}}}};
  CniEnv e = World::env("ADD", "c2", pod);
  e.args = "IP=10.77.0.33";
  Exec byCap = w.ibcni(e, ips);
  ASSERT_EQ(byCap.status, 0) << byCap.describe();
  EXPECT_EQ(resultAddresses(byCap.parsed()), std::vector<std::string>{"10.77.0.31/24"});
  e.command = "DEL";
  EXPECT_EQ(w.ibcni(e, ips).status, 0);
  json ic = w.ipamConf("1.1.0");
  ic["runtimeConfig"] = {{"ips", {"10.78.0.31/24"}}};
  ic["args"] = {{"cni", {{"ips", {"10.78.0.32"}}}}};
  CniEnv ie = World::env("ADD", "c3", pod);
  ie.args = "IP=10.78.0.33";
  Exec ia = w.ipamPlugin(ie, ic);
  ASSERT_EQ(ia.status, 0) << ia.describe();
  EXPECT_EQ(resultAddresses(ia.parsed()), std::vector<std::string>{"10.78.0.31/24"});
}

// ---------------------------------------------------------------------------------------------
// Checklist item 87: infinibandGUID capability
TEST(InfinibandGuidCapability, InfinibandGuidIsValidatedAndNeedsAVf) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf(1500, true);
  for (const std::string guid : {"c2:11:22:33:44:55:66", "c2:11:22:33:44:55:66:77:88", "zz:11:22:33:44:55:66:77",
                                 "c2-11-22-33-44-55-66-77", "00:00:00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff:ff:ff"}) {
    SCOPED_TRACE("infinibandGUID " + guid);
    json c = w.conf("1.1.0", vf, w.ipam());
    c["capabilities"] = {{"infinibandGUID", true}};
    c["runtimeConfig"] = {{"infinibandGUID", guid}};
    expectError(w.ibcni(World::env("ADD", "c1", pod), c), 7, {"infinibandGUID"});
  }
  // A well-formed GUID on a device that is no VF cannot be applied: an error, not a silent skip.
  json c = w.conf("1.1.0", vf, w.ipam());
  c["runtimeConfig"] = {{"infinibandGUID", "c2:11:22:33:44:55:66:77"}};
  Exec r = w.ibcni(World::env("ADD", "c1", pod), c);
  EXPECT_EQ(r.code(), 7U) << r.describe();
  w.expectNothingLeft(pod, vf, before);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 88: deviceID capability
TEST(DeviceIdCapability, DeviceIdSelectsThePciFunction) {
  CONFORMANCE_WORLD(w);
  TestNetns& pod = w.pod();
  json c = w.conf("1.1.0", "unused0", w.ipam());
  c.erase("device");
  c["capabilities"] = {{"deviceID", true}};
  c["runtimeConfig"] = {{"deviceID", "0000:ff:1f.7"}};
  expectError(w.ibcni(World::env("ADD", "c1", pod), c), 100, {"0000:ff:1f.7"});
  c["runtimeConfig"] = {{"deviceID", "not-a-pci-address"}};
  expectError(w.ibcni(World::env("ADD", "c1", pod), c), 7, {"deviceID"});
  c.erase("runtimeConfig");
  c["deviceID"] = "ff:1f.7";  // the short form is accepted and means domain 0000
  expectError(w.ibcni(World::env("ADD", "c1", pod), c), 100, {"0000:ff:1f.7"});
  w.expectPodEmpty(pod);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 89: mac capability
TEST(MacCapability, MacCapabilityIsAppliedToAnEthernetDeviceAndRestored) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.1.0", vf, w.ipam());
  c["capabilities"] = {{"mac", true}};
  c["runtimeConfig"] = {{"mac", "02:11:22:33:44:55"}};
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(linkState(pod.netns(), "net1").value_or(LinkState{}).mac, "02:11:22:33:44:55");
  EXPECT_EQ(add.parsed()["interfaces"][0].value("mac", ""), "02:11:22:33:44:55");
  EXPECT_EQ(w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, add.parsed())).status, 0);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  EXPECT_EQ(linkState(w.host(), vf), before) << "the original MAC is not back";
  for (const std::string bad :
       {"02:11:22:33:44", "not-a-mac", "80:00:00:48:fe:80:00:00:00:00:00:00:02:00:00:00:00:00:00:01"}) {
    SCOPED_TRACE("mac " + bad);
    c["runtimeConfig"] = {{"mac", bad}};
    expectError(w.ibcni(World::env("ADD", "c1", pod), c), 7, {"mac"});
  }
  EXPECT_EQ(linkState(w.host(), vf), before);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 90: ips capability
TEST(IpsCapability, IpsCapabilityReachesTheIpam) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  // Embedded IPAM: the requested address is the one given.
  json c = w.conf("1.1.0", vf, w.ipam());
  c["capabilities"] = {{"ips", true}};
  c["runtimeConfig"] = {{"ips", {"10.77.0.99/24"}}};
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(resultAddresses(add.parsed()), std::vector<std::string>{"10.77.0.99/24"});
  EXPECT_EQ(addresses(pod.netns(), "net1"), std::vector<std::string>{"10.77.0.99/24"});
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  // Delegated IPAM: it reads runtimeConfig.ips from the configuration ibcni passes on.
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  rec.setResult({{"cniVersion", "1.1.0"}, {"ips", {{{"address", "10.55.0.99/24"}}}}});
  json d = w.conf("1.1.0", vf, json{{"type", "rec-ipam"}});
  d["runtimeConfig"] = {{"ips", {"10.55.0.99/24"}}};
  CniEnv e = World::env("ADD", "c1", pod);
  e.path = rec.dir().string();
  ASSERT_EQ(w.ibcni(e, d).status, 0);
  auto calls = rec.calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(json::parse(calls[0].stdinText)["runtimeConfig"]["ips"], d["runtimeConfig"]["ips"]);
  e.command = "DEL";
  EXPECT_EQ(w.ibcni(e, d).status, 0);
  // ibcni-ipam: the requested address, and a malformed one refused.
  json ic = w.ipamConf("1.1.0");
  ic["runtimeConfig"] = {{"ips", {"10.78.0.99/24"}}};
  Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), ic);
  ASSERT_EQ(ia.status, 0);
  EXPECT_EQ(resultAddresses(ia.parsed()), std::vector<std::string>{"10.78.0.99/24"});
  ic["runtimeConfig"] = {{"ips", {"10.78.0.300/24"}}};
  expectError(w.ipamPlugin(World::env("ADD", "c2", pod), ic), 7);
}

// ---------------------------------------------------------------------------------------------
// 91-92. Other well-known capabilities and pod annotations are not rejected

json otherCapabilities() {
  return {
      {"portMappings", {{{"hostPort", 8080}, {"containerPort", 80}, {"protocol", "tcp"}}}},
      {"ipRanges", {{{{"subnet", "10.1.0.0/16"}}}}},
      {"bandwidth", {{"ingressRate", 1000000}, {"ingressBurst", 2000}, {"egressRate", 1000000}, {"egressBurst", 2000}}},
      {"dns", {{"servers", {"10.0.0.10"}}, {"searches", {"svc.cluster.local"}}, {"options", {"ndots:5"}}}},
      {"aliases", {{"net1", {"a", "b"}}}},
      {"cgroupPath", "/kubepods/pod1"}};
}

// Checklist item 91: Other well-known capabilities are not rejected
TEST(OtherCapabilities, OtherWellKnownCapabilitiesAreAccepted) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.1.0", vf, w.ipam());
  c["capabilities"] = {{"portMappings", true}, {"bandwidth", true}, {"dns", true}, {"aliases", true}};
  c["runtimeConfig"] = otherCapabilities();
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, add.parsed())).status, 0);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  json ic = w.ipamConf("1.1.0");
  ic["runtimeConfig"] = otherCapabilities();
  EXPECT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), ic).status, 0);
}

// Checklist item 92: Pod annotations (io.kubernetes.cri.pod-annotations) are not rejected
TEST(PodAnnotations, PodAnnotationsAreAccepted) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.1.0", vf, w.ipam());
  c["capabilities"] = {{"io.kubernetes.cri.pod-annotations", true}};
  c["runtimeConfig"] = {{"io.kubernetes.cri.pod-annotations", {{"k", "v"}, {"example.com/pkey", "0x8001"}}}};
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  json ic = w.ipamConf("1.1.0");
  ic["runtimeConfig"] = c["runtimeConfig"];
  EXPECT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), ic).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 93: Concurrency: parallel ADDs and DELs
TEST(Concurrency, ParallelAddsGetDistinctDevicesAndAddressesAndParallelDelsReleaseAll) {
  CONFORMANCE_WORLD(w);
  constexpr int kPods = 8;
  std::vector<std::string> vfs;
  std::vector<std::optional<LinkState>> befores;
  std::vector<TestNetns*> pods;
  std::vector<json> confs;
  for (int i = 0; i < kPods; ++i) {
    vfs.push_back(w.vf());
    befores.push_back(linkState(w.host(), vfs.back()));
    pods.push_back(&w.pod("pod" + std::to_string(i)));
    confs.push_back(w.conf("1.1.0", vfs.back(), w.ipam()));
  }
  auto jobs = [&](const std::string& verb) {
    std::vector<std::function<Exec()>> out;
    for (int i = 0; i < kPods; ++i) {
      out.emplace_back([&, i, verb] {
        const auto u = static_cast<std::size_t>(i);
        return w.ibcni(World::env(verb, "c" + std::to_string(i), *pods[u]), confs[u]);
      });
    }
    return out;
  };
  auto added = runParallel(w.host(), jobs("ADD"));
  std::set<std::string> ips;
  for (int i = 0; i < kPods; ++i) {
    const auto u = static_cast<std::size_t>(i);
    ASSERT_EQ(added[u].status, 0) << added[u].describe();
    for (const auto& a : resultAddresses(added[u].parsed())) {
      ips.insert(a);
    }
    EXPECT_TRUE(linkState(pods[u]->netns(), "net1").has_value());
  }
  EXPECT_EQ(ips.size(), static_cast<std::size_t>(kPods)) << ::testing::PrintToString(ips);
  auto deleted = runParallel(w.host(), jobs("DEL"));
  for (int i = 0; i < kPods; ++i) {
    const auto u = static_cast<std::size_t>(i);
    EXPECT_EQ(deleted[u].status, 0) << deleted[u].describe();
    EXPECT_EQ(linkState(w.host(), vfs[u]), befores[u]);
  }
  EXPECT_TRUE(w.noAllocations());
  EXPECT_TRUE(w.records().empty());
}

// Checklist item 93: Concurrency: parallel ADDs and DELs
TEST(Concurrency, IbcniIpamParallelAddsGetDistinctAddresses) {
  CONFORMANCE_WORLD(w);
  constexpr int kAdds = 16;
  const json ic = w.ipamConf("1.1.0");
  auto jobs = [&](const std::string& verb) {
    std::vector<std::function<Exec()>> out;
    for (int i = 0; i < kAdds; ++i) {
      out.emplace_back(
          [&, i, verb] { return w.ipamPlugin(World::ipamEnv(verb, "c" + std::to_string(i), "/var/run/netns/p"), ic); });
    }
    return out;
  };
  std::set<std::string> ips;
  for (const auto& r : runParallel(w.host(), jobs("ADD"))) {
    ASSERT_EQ(r.status, 0) << r.describe();
    for (const auto& a : resultAddresses(r.parsed())) {
      ips.insert(a);
    }
  }
  EXPECT_EQ(ips.size(), static_cast<std::size_t>(kAdds));
  for (const auto& r : runParallel(w.host(), jobs("DEL"))) {
    EXPECT_EQ(r.status, 0) << r.describe();
  }
  EXPECT_TRUE(w.ipamAllocations().empty());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 94: Per-attachment state keyed by (network, container ID, ifname)
TEST(AttachmentState, StateIsKeptPerNetworkContainerAndIfname) {
  CONFORMANCE_WORLD(w);
  TestNetns& pod = w.pod();
  const std::string vf1 = w.vf();
  const std::string vf2 = w.vf(1480, true);
  const auto before2 = linkState(w.host(), vf2);
  json a = w.conf("1.1.0", vf1, w.ipam("10.77.0.0/24"));
  json b = w.conf("1.1.0", vf2, w.ipam("10.76.0.0/24"));
  b["name"] = w.network() + "-b";
  b["ipam"]["routes"] = json::array();
  ASSERT_EQ(w.ibcni(World::env("ADD", "c1", pod, "net1"), a).status, 0);
  ASSERT_EQ(w.ibcni(World::env("ADD", "c1", pod, "net2"), b).status, 0);
  EXPECT_EQ(w.records().size(), 1U);
  EXPECT_EQ(w.records(w.network() + "-b").size(), 1U);
  // DEL with neither prevResult nor CNI_NETNS: only the record knows where net2 is.
  CniEnv e = World::env("DEL", "c1", pod, "net2");
  e.netns.reset();
  EXPECT_EQ(w.ibcni(e, b).status, 0);
  EXPECT_EQ(linkState(w.host(), vf2), before2) << "the record did not lead DEL to the device";
  EXPECT_TRUE(linkState(pod.netns(), "net1").has_value()) << "network a's attachment was touched";
  EXPECT_EQ(w.allocations(), std::vector<std::string>{"c1:net1"});
  EXPECT_TRUE(w.allocations(w.network() + "-b").empty());
  // A DEL of the same container and ifname on network b leaves network a's attachment alone.
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod, "net1"), b).status, 0);
  EXPECT_TRUE(linkState(pod.netns(), "net1").has_value());
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod, "net1"), a).status, 0);

  // ibcni-ipam: the same container and ifname in two networks hold two addresses.
  json i1 = w.ipamConf("1.1.0");
  json i2 = w.ipamConf("1.1.0", "10.79.0.0/24");
  i2["name"] = w.ipamNetwork() + "-b";
  Exec r1 = w.ipamPlugin(World::env("ADD", "c1", pod), i1);
  Exec r2 = w.ipamPlugin(World::env("ADD", "c1", pod), i2);
  ASSERT_EQ(r1.status, 0);
  ASSERT_EQ(r2.status, 0);
  EXPECT_NE(resultAddresses(r1.parsed()), resultAddresses(r2.parsed()));
  EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), i2).status, 0);
  EXPECT_EQ(w.ipamAllocations(), std::vector<std::string>{"c1:net1"});
}

}  // namespace
}  // namespace ibcni::conformance
