// SPDX-License-Identifier: Apache-2.0
// Longer than 600 lines on purpose: one file per checklist section group, as e2e/CONFORMANCE.md maps them.
// Checklist sections H (prevResult and chaining, items 48-52), I (DEL, items 53-60) and J (CHECK,
// items 61-67).
#include <gtest/gtest.h>

#include "conformance/harness.h"

namespace ibcni::conformance {
namespace {

/// What a plugin before ibcni in the chain returned: its interface eth0 in the pod, an address, a
/// route and DNS.
json earlierResult(const std::string& version, const TestNetns& pod) {
  json ip = {{"address", "10.200.0.5/24"}, {"gateway", "10.200.0.1"}, {"interface", 0}};
  if (version < "1.0.0") {
    ip["version"] = "4";
  }
  return {{"cniVersion", version},
          {"interfaces", {{{"name", "eth0"}, {"mac", "0a:58:0a:c8:00:05"}, {"sandbox", pod.path()}}}},
          {"ips", {ip}},
          {"routes", {{{"dst", "10.201.0.0/16"}, {"gw", "10.200.0.1"}}}},
          {"dns", {{"nameservers", {"10.200.0.53"}}}}};
}

// ---------------------------------------------------------------------------------------------
// Checklist item 48: ADD with prevResult: pass it through, append ours
TEST(PrevResultPassThrough, PrevResultIsPassedThroughWithOurInterfaceAppended) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const std::string v : {"0.4.0", "1.1.0"}) {
    SCOPED_TRACE(v);
    const json prev = earlierResult(v, pod);
    const json c = withPrev(w.conf(v, vf, w.ipam()), prev);
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    const json r = add.parsed();
    ASSERT_EQ(r["interfaces"].size(), 2U) << add.out;
    EXPECT_EQ(r["interfaces"][0], prev["interfaces"][0]) << "the earlier plugin's interface changed";
    EXPECT_EQ(r["interfaces"][1].value("name", ""), "net1");
    ASSERT_EQ(r["ips"].size(), 2U) << add.out;
    EXPECT_EQ(r["ips"][0], prev["ips"][0]);
    EXPECT_EQ(r["ips"][1].value("interface", -1), 1) << "our address must point at our interface";
    EXPECT_EQ(r["routes"][0], prev["routes"][0]);
    EXPECT_EQ(r["dns"], prev["dns"]);
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, r)).status, 0);
  }
}

// Checklist item 48: ADD with prevResult: pass it through, append ours
TEST(PrevResultPassThrough, OurResultFeedsTheNextPlugin) {
  CONFORMANCE_WORLD(w);
  const std::string tuning = "/usr/lib/cni/tuning";
  if (!fs::exists(tuning)) {
    GTEST_SKIP() << tuning << " is not installed (Debian package containernetworking-plugins)";
  }
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.0.0", vf, w.ipam());
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  json t = {{"cniVersion", "1.0.0"},
            {"name", w.network()},
            {"type", "tuning"},
            {"sysctl", {{"net.ipv4.conf.net1.arp_notify", "1"}}},
            {"dataDir", (w.tmp() / "tuning").string()},
            {"prevResult", add.parsed()}};
  CniEnv te = World::env("ADD", "c1", pod);
  Exec tuned = execProgram(tuning, te.toVector(), t.dump());
  ASSERT_EQ(tuned.status, 0) << "the Go reference plugin rejected ibcni's result\n" << tuned.describe();
  auto final = oneJsonDocument(tuned.out);
  ASSERT_TRUE(final.has_value());
  Exec check = w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, *final));
  EXPECT_EQ(check.status, 0) << check.describe();
  te.command = "DEL";
  t["prevResult"] = *final;
  EXPECT_EQ(execProgram(tuning, te.toVector(), t.dump()).status, 0);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, *final)).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 49: No prevResult on the first ADD
TEST(FirstInChain, FirstInTheChainNeedsNoPrevResult) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  ASSERT_FALSE(c.contains("prevResult"));
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(add.parsed()["interfaces"].size(), 1U);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), w.ipamConf("1.1.0"));
  EXPECT_EQ(ia.status, 0) << ia.describe();
}

// ---------------------------------------------------------------------------------------------
// Checklist item 50: CHECK and DEL see the whole chain's final result
TEST(ChainFinalResult, CheckAndDelFindOurInterfaceByNameAndSandbox) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  // What the earlier plugin made, for real: eth0 with its address and route.
  ip(pod.netns(), {"link", "add", "eth0", "type", "veth", "peer", "name", "eth0p"});
  ip(pod.netns(), {"link", "set", "dev", "eth0p", "up"});
  ip(pod.netns(), {"link", "set", "dev", "eth0", "up"});
  ip(pod.netns(), {"addr", "add", "10.200.0.5/24", "dev", "eth0"});
  ip(pod.netns(), {"route", "add", "10.201.0.0/16", "via", "10.200.0.1"});
  const json earlier = earlierResult("1.1.0", pod);
  const json c = withPrev(w.conf("1.1.0", vf, w.ipam()), earlier);
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  // What the runtime caches after later plugins ran: one added an interface, one (tuning-like)
  // changed our MAC.
  json final = add.parsed();
  const std::string newMac = "02:aa:bb:cc:dd:ee";
  ip(pod.netns(), {"link", "set", "dev", "net1", "address", newMac});
  final["interfaces"][1]["mac"] = newMac;
  final["interfaces"].push_back({{"name", "later0"}, {"sandbox", pod.path()}});
  const json conf = w.conf("1.1.0", vf, w.ipam());
  Exec check = w.ibcni(World::env("CHECK", "c1", pod), withPrev(conf, final));
  EXPECT_EQ(check.status, 0) << check.describe();

  // An interface of our name in another sandbox is not ours.
  json elsewhere = final;
  elsewhere["interfaces"][1]["sandbox"] = "/var/run/netns/other";
  Exec wrong = w.ibcni(World::env("CHECK", "c1", pod), withPrev(conf, elsewhere));
  EXPECT_NE(wrong.status, 0) << wrong.describe();

  Exec del = w.ibcni(World::env("DEL", "c1", pod), withPrev(conf, final));
  EXPECT_EQ(del.status, 0) << del.describe();
  // (The MAC is the later plugin's to restore, on its own DEL.)
  EXPECT_TRUE(linkState(w.host(), vf).has_value()) << "DEL did not bring the device home";
  EXPECT_FALSE(linkState(pod.netns(), "net1").has_value());
  EXPECT_TRUE(linkState(pod.netns(), "eth0").has_value()) << "DEL took the earlier plugin's interface";
  EXPECT_TRUE(w.noAllocations());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 51: DEL without prevResult still releases everything
TEST(PrevResultOnDel, DelWithoutPrevResultReleasesEverything) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf(1500, true);
  json c = w.conf("1.0.0", vf, w.ipam());
  c["mtu"] = 1400;
  ASSERT_EQ(w.ibcni(World::env("ADD", "c1", pod), c).status, 0);
  Exec del = w.ibcni(World::env("DEL", "c1", pod), c);
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_EQ(linkState(w.host(), vf), before);
  w.expectPodEmpty(pod);
  EXPECT_TRUE(w.records().empty());
  EXPECT_TRUE(w.noAllocations());
  const json ic = w.ipamConf("1.0.0");
  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), ic).status, 0);
  EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), ic).status, 0);
  EXPECT_TRUE(w.noAllocations());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 52: Chained mode: an interface plugin creates its interface, first or later in a chain
TEST(ChainedMode, CreatesItsInterfaceWhetherChainedOrNot) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  // The earlier plugin really created eth0 in the pod.
  ip(pod.netns(), {"link", "add", "eth0", "type", "veth", "peer", "name", "eth0p"});
  const auto eth0 = linkState(pod.netns(), "eth0");
  const json c = withPrev(w.conf("1.0.0", vf), earlierResult("1.0.0", pod));
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_TRUE(linkState(pod.netns(), "net1").has_value());
  EXPECT_EQ(linkState(pod.netns(), "eth0"), eth0) << "the earlier plugin's interface was touched";
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, add.parsed())).status, 0);
  EXPECT_EQ(linkState(pod.netns(), "eth0"), eth0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 53: Repeated DEL succeeds
TEST(RepeatedDel, RepeatedDelSucceeds) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.0.0", vf, w.ipam());
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("DEL #" + std::to_string(i + 1));
    Exec del = w.ibcni(World::env("DEL", "c1", pod), withPrev(c, add.parsed()));
    EXPECT_EQ(del.status, 0) << del.describe();
    EXPECT_EQ(linkState(w.host(), vf), before);
  }
  const json ic = w.ipamConf("1.0.0");
  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), ic).status, 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), ic).status, 0);
  }
  EXPECT_TRUE(w.noAllocations());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 54: DEL with the netns gone
TEST(DeletedNetns, DelAfterTheNetnsWasDeletedReleasesEverything) {
  CONFORMANCE_WORLD(w);
  const std::string vf = w.vf();
  const std::string peer = w.peerOf(vf);
  auto doomed = w.ownPod();
  const std::string path = doomed->path();
  const json c = w.conf("1.0.0", vf, w.ipam());
  Exec add = w.ibcni(World::env("ADD", "c1", *doomed), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  ASSERT_EQ(w.allocations().size(), 1U);
  doomed.reset();  // the veth dies with its namespace (a VF would return to the host)
  ASSERT_FALSE(fs::exists(path));
  CniEnv e;
  e.command = "DEL";
  e.containerId = "c1";
  e.netns = path;
  e.ifName = "net1";
  Exec del = w.ibcni(e, withPrev(c, add.parsed()));
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_TRUE(w.noAllocations()) << "the address leaked";
  EXPECT_TRUE(w.records().empty());
  EXPECT_EQ(w.ibcni(e, withPrev(c, add.parsed())).status, 0) << "second DEL";

  const json ic = w.ipamConf("1.0.0");
  auto gone = w.ownPod();
  CniEnv ie = World::env("ADD", "c2", *gone);
  ASSERT_EQ(w.ipamPlugin(ie, ic).status, 0);
  gone.reset();
  ie.command = "DEL";
  EXPECT_EQ(w.ipamPlugin(ie, ic).status, 0);
  EXPECT_TRUE(w.noAllocations());
}

// Checklist item 54: DEL with the netns gone
TEST(DeletedNetns, DelWithEmptyNetnsStillBringsTheDeviceHome) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf(1480, true);
  const json c = w.conf("1.0.0", vf, w.ipam());
  ASSERT_EQ(w.ibcni(World::env("ADD", "c1", pod), c).status, 0);
  CniEnv e = World::env("DEL", "c1", pod);
  e.netns = "";
  Exec del = w.ibcni(e, c);
  EXPECT_EQ(del.status, 0) << del.describe();
  w.expectNothingLeft(pod, vf, before);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 55: DEL without any ADD, and after a failed ADD
TEST(UnmatchedDel, DelWithoutAddAndAfterAFailedAddSucceeds) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf(1500, true);
  json c = w.conf("1.0.0", vf, w.ipam());
  EXPECT_EQ(w.ibcni(World::env("DEL", "never", pod), c).status, 0);
  EXPECT_EQ(w.ipamPlugin(World::env("DEL", "never", pod), w.ipamConf("1.0.0")).status, 0);
  // ADD fails after the device moved: the IPAM's route goes through an unreachable gateway.
  c["ipam"]["routes"] = {{{"dst", "10.99.0.0/16"}, {"gw", "192.0.2.1"}}};
  ASSERT_NE(w.ibcni(World::env("ADD", "c1", pod), c).status, 0);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  EXPECT_EQ(linkState(w.host(), vf), before);
  EXPECT_EQ(linkNames(pod.netns()), std::vector<std::string>{"lo"});
  EXPECT_TRUE(w.noAllocations());
  // ADD fails before anything moved: no such device.
  const json missing = w.conf("1.0.0", "nosuchdev0", w.ipam());
  ASSERT_NE(w.ibcni(World::env("ADD", "c2", pod), missing).status, 0);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c2", pod), missing).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 56: DEL also DELs the delegated IPAM, even when the netns is missing
TEST(IpamDel, DelRunsTheIpamDelEvenWithTheNetnsGone) {
  CONFORMANCE_WORLD(w);
  const std::string vf = w.vf();
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  rec.setResult({{"cniVersion", "1.0.0"}, {"ips", {{{"address", "10.55.0.5/24"}}}}});
  auto doomed = w.ownPod();
  const std::string path = doomed->path();
  const json c = w.conf("1.0.0", vf, json{{"type", "rec-ipam"}});
  CniEnv e = World::env("ADD", "c1", *doomed);
  e.path = rec.dir().string();
  ASSERT_EQ(w.ibcni(e, c).status, 0);
  doomed.reset();
  e.command = "DEL";
  e.netns = path;
  // An IPAM error is returned, after ibcni's own cleanup; a retry then succeeds.
  rec.failVerb("DEL", {{"code", 11}, {"msg", "rec: store busy"}});
  Exec failed = w.ibcni(e, c);
  expectError(failed, 11, {"rec: store busy"});
  rec.clearFailure("DEL");
  Exec del = w.ibcni(e, c);
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_EQ(rec.verbs(), (std::vector<std::string>{"ADD", "DEL", "DEL"}));
  EXPECT_TRUE(w.records().empty());
}

// Checklist item 56: DEL also DELs the delegated IPAM, even when the netns is missing
TEST(IpamDel, IpamErrorOnDelComesAfterTheDeviceIsHome) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf(1500, true);
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  rec.setResult({{"cniVersion", "1.0.0"}, {"ips", {{{"address", "10.55.0.5/24"}}}}});
  const json c = w.conf("1.0.0", vf, json{{"type", "rec-ipam"}});
  CniEnv e = World::env("ADD", "c1", pod);
  e.path = rec.dir().string();
  ASSERT_EQ(w.ibcni(e, c).status, 0);
  rec.failVerb("DEL", {{"code", 11}, {"msg", "rec: store busy"}});
  e.command = "DEL";
  Exec failed = w.ibcni(e, c);
  expectError(failed, 11, {"rec: store busy"});
  EXPECT_EQ(linkState(w.host(), vf), before) << "the device must be home even when the IPAM DEL fails";
  w.expectPodEmpty(pod);
  rec.clearFailure("DEL");
  EXPECT_EQ(w.ibcni(e, c).status, 0);
  EXPECT_TRUE(w.records().empty());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 57: DEL env: CNI_NETNS optional
TEST(DelEnvironment, DelWithoutCniNetnsSucceeds) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.0.0", vf, w.ipam());
  ASSERT_EQ(w.ibcni(World::env("ADD", "c1", pod), c).status, 0);
  CniEnv e = World::env("DEL", "c1", pod);
  e.netns.reset();
  Exec del = w.ibcni(e, c);
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_TRUE(linkState(w.host(), vf).has_value());
  EXPECT_TRUE(w.noAllocations());
  const json ic = w.ipamConf("1.0.0");
  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), ic).status, 0);
  EXPECT_EQ(w.ipamPlugin(e, ic).status, 0);
  EXPECT_TRUE(w.noAllocations());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 58: DEL prints nothing on success
TEST(DelOutput, SuccessfulDelPrintsNothing) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  ASSERT_EQ(w.ibcni(World::env("ADD", "c1", pod), c).status, 0);
  for (int i = 0; i < 2; ++i) {
    Exec del = w.ibcni(World::env("DEL", "c1", pod), c);
    EXPECT_EQ(del.status, 0);
    EXPECT_EQ(del.out, "");
  }
  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), w.ipamConf("1.1.0")).status, 0);
  Exec idel = w.ipamPlugin(World::env("DEL", "c1", pod), w.ipamConf("1.1.0"));
  EXPECT_EQ(idel.status, 0);
  EXPECT_EQ(idel.out, "");
}

// ---------------------------------------------------------------------------------------------
// Checklist item 59: DEL errors only for real failures
TEST(DelErrors, DelSucceedsWhenThereIsNothingLeftToUndo) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  // The IPAM plugin is no longer installed: it can hold nothing, DEL must not block on it.
  const json gone = w.conf("1.0.0", vf, json{{"type", "uninstalled-ipam"}});
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), gone).status, 0);
  // An unreadable record.
  const json c = w.conf("1.0.0", vf, w.ipam());
  ASSERT_EQ(w.ibcni(World::env("ADD", "c2", pod), c).status, 0);
  auto recs = w.records();
  ASSERT_EQ(recs.size(), 1U);
  writeFile(recs[0], "{ garbled");
  Exec del = w.ibcni(World::env("DEL", "c2", pod), c);
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_TRUE(linkState(w.host(), vf).has_value()) << "the device was not found by its mark";
  EXPECT_TRUE(w.noAllocations());
  // ibcni-ipam: DEL of an attachment it never saw.
  EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c3", pod), w.ipamConf("1.0.0")).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 60: DEL: the VF comes back as it was
TEST(DeviceRestore, DelRestoresTheDeviceExactly) {
  CONFORMANCE_WORLD(w);
  TestNetns& pod = w.pod();
  for (bool up : {false, true}) {
    SCOPED_TRACE(up ? "device up" : "device down");
    const std::string vf = w.vf(1480, up);
    ip(w.host(), {"link", "set", "dev", vf, "alias", "original alias"});
    const auto before = linkState(w.host(), vf);
    json c = w.conf("1.1.0", vf, w.ipam());
    c["mtu"] = 1300;
    c["runtimeConfig"] = {{"mac", "02:12:34:56:78:9a"}};
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    ASSERT_EQ(linkState(pod.netns(), "net1").value_or(LinkState{}).mtu, 1300U);
    Exec del = w.ibcni(World::env("DEL", "c1", pod), c);
    EXPECT_EQ(del.status, 0) << del.describe();
    EXPECT_EQ(linkState(w.host(), vf), before) << "name, MTU, MAC, alias or up/down state not restored";
    w.expectPodEmpty(pod);
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 61: CHECK verifies against prevResult
TEST(CheckAgainstPrevResult, CheckPassesAfterAddAndFailsOnEachBreakage) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  struct Breakage {
    const char* what;
    std::vector<std::vector<std::string>> ipCommands;
  };
  const std::vector<Breakage> breakages = {
      {"address flushed", {{"addr", "flush", "dev", "net1"}}},
      {"link down", {{"link", "set", "dev", "net1", "down"}}},
      {"mac changed", {{"link", "set", "dev", "net1", "address", "02:de:ad:be:ef:01"}}},
      {"route deleted", {{"route", "del", "10.99.0.0/16"}}},
      {"mtu changed", {{"link", "set", "dev", "net1", "mtu", "1280"}}},
      {"interface renamed",
       {{"link", "set", "dev", "net1", "down"},
        {"link", "set", "dev", "net1", "name", "other1"},
        {"link", "set", "dev", "other1", "up"}}},
  };
  for (const auto& b : breakages) {
    SCOPED_TRACE(b.what);
    json conf = c;
    conf["mtu"] = 1400;
    Exec add = w.ibcni(World::env("ADD", "c1", pod), conf);
    ASSERT_EQ(add.status, 0) << add.describe();
    const json withResult = withPrev(conf, add.parsed());
    Exec ok = w.ibcni(World::env("CHECK", "c1", pod), withResult);
    EXPECT_EQ(ok.status, 0) << ok.describe();
    for (const auto& cmd : b.ipCommands) {
      ip(pod.netns(), cmd);
    }
    Exec broken = w.ibcni(World::env("CHECK", "c1", pod), withResult);
    EXPECT_NE(broken.status, 0) << "CHECK did not notice: " << b.what << "\n" << broken.describe();
    if (linkState(pod.netns(), "other1")) {
      ip(pod.netns(), {"link", "set", "dev", "other1", "down"});
      ip(pod.netns(), {"link", "set", "dev", "other1", "name", "net1"});
    }
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withResult).status, 0);
    EXPECT_TRUE(linkState(w.host(), vf).has_value());
  }
}

// Checklist item 61: CHECK verifies against prevResult
TEST(CheckAgainstPrevResult, IbcniIpamCheckComparesPrevResultWithWhatItHolds) {
  CONFORMANCE_WORLD(w);
  TestNetns& pod = w.pod();
  const json ic = w.ipamConf("1.1.0");
  Exec add = w.ipamPlugin(World::env("ADD", "c1", pod), ic);
  ASSERT_EQ(add.status, 0);
  EXPECT_EQ(w.ipamPlugin(World::env("CHECK", "c1", pod), withPrev(ic, add.parsed())).status, 0);
  json wrong = add.parsed();
  wrong["ips"][0]["address"] = "10.78.0.250/24";
  Exec bad = w.ipamPlugin(World::env("CHECK", "c1", pod), withPrev(ic, wrong));
  EXPECT_NE(bad.status, 0) << bad.describe();
  Exec none = w.ipamPlugin(World::env("CHECK", "c2", pod), withPrev(ic, add.parsed()));
  EXPECT_NE(none.status, 0) << "c2 holds nothing\n" << none.describe();
}

// ---------------------------------------------------------------------------------------------
// Checklist item 62: CHECK tolerates later plugins' changes
TEST(CheckTolerance, LaterPluginsChangesAreTolerated) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.1.0", vf, w.ipam());
  c["mtu"] = 1400;
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  json final = add.parsed();
  // Later plugins: a route, a second address on our interface, an interface of their own.
  ip(pod.netns(), {"route", "add", "10.123.0.0/16", "via", "10.77.0.1", "dev", "net1"});
  ip(pod.netns(), {"addr", "add", "192.168.77.7/24", "dev", "net1"});
  final["routes"].push_back({{"dst", "10.123.0.0/16"}, {"gw", "10.77.0.1"}});
  final["ips"].push_back({{"address", "192.168.77.7/24"}, {"interface", 0}});
  final["interfaces"].push_back({{"name", "later0"}, {"sandbox", pod.path()}});
  Exec check = w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, final));
  EXPECT_EQ(check.status, 0) << check.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, final)).status, 0);

  const json ic = w.ipamConf("1.1.0");
  Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), ic);
  ASSERT_EQ(ia.status, 0);
  json iprev = ia.parsed();
  iprev["ips"].push_back({{"address", "fd00::7/64"}});
  EXPECT_EQ(w.ipamPlugin(World::env("CHECK", "c1", pod), withPrev(ic, iprev)).status, 0);
}

// A later plugin (tuning's "mtu") changes the MTU ibcni set and reports it in the 1.1.0 result.
// Checklist item 62: CHECK tolerates later plugins' changes
TEST(CheckTolerance, MtuChangedByALaterPluginIsTolerated) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.1.0", vf, w.ipam());
  c["mtu"] = 1400;
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  json final = add.parsed();
  ip(pod.netns(), {"link", "set", "dev", "net1", "mtu", "1300"});
  final["interfaces"][0]["mtu"] = 1300;
  Exec check = w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, final));
  EXPECT_EQ(check.status, 0) << check.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, final)).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 63: CHECK looks beyond the Result: the record and the IPAM reservation
TEST(CheckBeyondResult, CheckNoticesALostRecordOrReservation) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.0.0", vf, w.ipam());
  {
    SCOPED_TRACE("record removed");
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0);
    for (const auto& r : w.records()) {
      fs::remove(r);
    }
    Exec check = w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, add.parsed()));
    EXPECT_NE(check.status, 0) << check.describe();
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, add.parsed())).status, 0);
  }
  {
    SCOPED_TRACE("reservation released behind ibcni's back");
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0);
    json asIpam = c;
    Exec released = w.ipamPlugin(World::env("DEL", "c1", pod), asIpam);  // same dataDir and network
    ASSERT_EQ(released.status, 0) << released.describe();
    ASSERT_TRUE(w.allocations().empty());
    Exec check = w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, add.parsed()));
    EXPECT_NE(check.status, 0) << check.describe();
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, add.parsed())).status, 0);
  }
  Exec none = w.ipamPlugin(World::env("CHECK", "c9", pod), w.ipamConf("1.0.0"));
  EXPECT_NE(none.status, 0) << none.describe();
}

// ---------------------------------------------------------------------------------------------
// Checklist item 64: CHECK right after ADD
TEST(CheckAfterAdd, CheckRightAfterAddPassesTwentyTimes) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.0.0", vf, w.ipam());
  const json ic = w.ipamConf("1.0.0");
  for (int i = 0; i < 20; ++i) {
    SCOPED_TRACE("round " + std::to_string(i));
    Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    Exec check = w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, add.parsed()));
    ASSERT_EQ(check.status, 0) << check.describe();
    ASSERT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, add.parsed())).status, 0);
    Exec ia = w.ipamPlugin(World::env("ADD", "c2", pod), ic);
    ASSERT_EQ(ia.status, 0);
    ASSERT_EQ(w.ipamPlugin(World::env("CHECK", "c2", pod), withPrev(ic, ia.parsed())).status, 0);
    ASSERT_EQ(w.ipamPlugin(World::env("DEL", "c2", pod), ic).status, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 65: CHECK is delegated to the IPAM
TEST(IpamCheck, CheckAsksTheIpamAndPassesItsError) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  rec.setResult({{"cniVersion", "1.0.0"}, {"ips", {{{"address", "10.55.0.5/24"}}}}});
  const json c = w.conf("1.0.0", vf, json{{"type", "rec-ipam"}});
  CniEnv e = World::env("ADD", "c1", pod);
  e.path = rec.dir().string();
  Exec add = w.ibcni(e, c);
  ASSERT_EQ(add.status, 0) << add.describe();
  e.command = "CHECK";
  EXPECT_EQ(w.ibcni(e, withPrev(c, add.parsed())).status, 0);
  EXPECT_EQ(rec.verbs(), (std::vector<std::string>{"ADD", "CHECK"}));
  rec.failVerb("CHECK", {{"code", 107}, {"msg", "rec: lost the reservation"}});
  Exec failed = w.ibcni(e, withPrev(c, add.parsed()));
  expectError(failed, 107, {"rec: lost the reservation"});
  e.command = "DEL";
  EXPECT_EQ(w.ibcni(e, c).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 66: CHECK without prevResult
TEST(PrevResultOnCheck, CheckWithoutPrevResultFails) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.0.0", vf, w.ipam());
  ASSERT_EQ(w.ibcni(World::env("ADD", "c1", pod), c).status, 0);
  Exec check = w.ibcni(World::env("CHECK", "c1", pod), c);
  EXPECT_NE(check.status, 0) << check.describe();
  EXPECT_NE(check.msg().find("prevResult"), std::string::npos) << check.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 67: CHECK success: exit 0, nothing on stdout
TEST(CheckOutput, SuccessfulCheckPrintsNothing) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.0.0", vf, w.ipam());
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0);
  Exec check = w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, add.parsed()));
  EXPECT_EQ(check.status, 0) << check.describe();
  EXPECT_EQ(check.out, "");
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  const json ic = w.ipamConf("1.0.0");
  Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), ic);
  ASSERT_EQ(ia.status, 0);
  Exec icheck = w.ipamPlugin(World::env("CHECK", "c1", pod), withPrev(ic, ia.parsed()));
  EXPECT_EQ(icheck.status, 0) << icheck.describe();
  EXPECT_EQ(icheck.out, "");
}

}  // namespace
}  // namespace ibcni::conformance
