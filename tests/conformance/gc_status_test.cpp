// SPDX-License-Identifier: Apache-2.0
// Checklist sections K (STATUS, items 68-71) and L (GC, items 72-78), spec 1.1.0.
#include <gtest/gtest.h>

#include <set>

#include "conformance/harness.h"

namespace ibcni::conformance {
namespace {

json attachment(const std::string& cid, const std::string& ifName = "net1") {
  return {{"containerID", cid}, {"ifname", ifName}};
}

/// An ibcni-ipam request with a range of exactly one address (10.78.0.2).
json oneAddressIpam(const World& w) { return w.ipamConf("1.1.0", "10.78.0.0/30"); }

// ---------------------------------------------------------------------------------------------
// Checklist item 68: STATUS: exit status says readiness
TEST(StatusReadiness, StatusIsZeroWhenReadyAnd50WhenAddCannotBeServiced) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const CniEnv e = networkEnv("STATUS");
  EXPECT_EQ(w.ibcni(e, w.conf("1.1.0", vf, w.ipam())).status, 0);
  expectError(w.ibcni(e, w.conf("1.1.0", "nosuchdev0", w.ipam())), 50, {"nosuchdev0"});
  json noState = w.conf("1.1.0", vf, w.ipam());
  writeFile(w.tmp() / "a-file", "x");
  noState["stateDir"] = (w.tmp() / "a-file").string();
  expectError(w.ibcni(e, noState), 50, {"stateDir"});

  EXPECT_EQ(w.ipamPlugin(e, oneAddressIpam(w)).status, 0);
  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), oneAddressIpam(w)).status, 0);
  expectError(w.ipamPlugin(e, oneAddressIpam(w)), 50, {"exhausted"});
  json noData = w.ipamConf("1.1.0");
  noData["ipam"]["dataDir"] = (w.tmp() / "a-file").string();
  Exec r = w.ipamPlugin(e, noData);
  EXPECT_EQ(r.code(), 50U) << r.describe();
}

// ---------------------------------------------------------------------------------------------
// Checklist item 69: STATUS input: no CNI_PATH, no other variable
TEST(StatusInput, StatusWithNothingButCniCommandSucceeds) {
  CONFORMANCE_WORLD(w);
  const std::string vf = w.vf();
  for (const auto& ipam : {std::optional<json>(), std::optional<json>(w.ipam())}) {
    SCOPED_TRACE(ipam ? "embedded ibcni-ipam" : "no ipam");
    json c = w.conf("1.1.0", vf, ipam);
    c["capabilities"] = {{"deviceID", true}, {"ips", true}};
    Exec r = execProgram(ibcniBinary(), {"CNI_COMMAND=STATUS"}, c.dump());
    expectProtocol(r, "STATUS", std::nullopt);
    EXPECT_EQ(r.status, 0) << r.describe();
  }
  json ic = w.ipamConf("1.1.0");
  ic["capabilities"] = {{"ips", true}};
  Exec i = execProgram(ipamBinary(), {"CNI_COMMAND=STATUS"}, ic.dump());
  expectProtocol(i, "STATUS", std::nullopt);
  EXPECT_EQ(i.status, 0) << i.describe();
}

// ---------------------------------------------------------------------------------------------
// Checklist item 70: STATUS is delegated to the IPAM
TEST(IpamStatus, StatusAsksTheIpamAndPassesItsAnswer) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  const json c = w.conf("1.1.0", vf, json{{"type", "rec-ipam"}});
  const CniEnv e = networkEnv("STATUS", rec.dir().string());
  EXPECT_EQ(w.ibcni(e, c).status, 0);
  EXPECT_EQ(rec.verbs(), std::vector<std::string>{"STATUS"});
  rec.failVerb("STATUS", {{"cniVersion", "1.1.0"}, {"code", 50}, {"msg", "rec: pool exhausted"}});
  expectError(w.ibcni(e, c), 50, {"rec: pool exhausted"});
  // The embedded IPAM: exhausted means ADD cannot be serviced.
  json small = w.conf("1.1.0", vf, w.ipam("10.77.0.0/30"));
  EXPECT_EQ(w.ibcni(networkEnv("STATUS"), small).status, 0);
  const std::string vf2 = w.vf();
  ASSERT_EQ(w.ibcni(World::env("ADD", "c1", pod), w.conf("1.1.0", vf2, w.ipam("10.77.0.0/30"))).status, 0);
  expectError(w.ibcni(networkEnv("STATUS"), small), 50);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 71: STATUS is informational
TEST(InformationalStatus, VerbsWorkOnTheirOwnMeritsAfterAFailedStatus) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  ASSERT_EQ(w.ibcni(World::env("ADD", "c1", pod), c).status, 0);
  // vf is attached: STATUS for a network naming it cannot promise another ADD.
  expectError(w.ibcni(networkEnv("STATUS"), c), 50);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  Exec again = w.ibcni(World::env("ADD", "c2", pod), c);
  EXPECT_EQ(again.status, 0) << again.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c2", pod), c).status, 0);

  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), oneAddressIpam(w)).status, 0);
  expectError(w.ipamPlugin(networkEnv("STATUS"), oneAddressIpam(w)), 50);
  EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), oneAddressIpam(w)).status, 0);
  EXPECT_EQ(w.ipamPlugin(World::env("ADD", "c2", pod), oneAddressIpam(w)).status, 0);
}

// ---------------------------------------------------------------------------------------------
// 72. GC input keys

enum class GcKey { kValidAttachments, kAttachments, kNone };

std::string describe(GcKey k) {
  return k == GcKey::kValidAttachments ? "cni.dev/valid-attachments"
         : k == GcKey::kAttachments    ? "cni.dev/attachments (only)"
                                       : "no key";
}

json gcConf(json c, GcKey key, const json& valid) {
  c.erase("prevResult");
  if (key == GcKey::kValidAttachments) {
    c["cni.dev/valid-attachments"] = valid;
  } else if (key == GcKey::kAttachments) {
    c["cni.dev/attachments"] = valid;
  }
  return c;
}

/// ibcni with its embedded IPAM: c1 in pod1 and c2 in pod2, then GC listing c1 with `key`.
void gcTwoAttachments(World& w, GcKey key) {
  TestNetns& pod1 = w.pod("pod1");
  TestNetns& pod2 = w.pod("pod2");
  const std::string vf1 = w.vf();
  const std::string vf2 = w.vf();
  const json c1 = w.conf("1.1.0", vf1, w.ipam());
  const json c2 = w.conf("1.1.0", vf2, w.ipam());
  ASSERT_EQ(w.ibcni(World::env("ADD", "c1", pod1), c1).status, 0);
  ASSERT_EQ(w.ibcni(World::env("ADD", "c2", pod2), c2).status, 0);
  Exec gc = w.ibcni(networkEnv("GC"), gcConf(c1, key, json::array({attachment("c1")})));
  EXPECT_EQ(gc.status, 0) << gc.describe();
  EXPECT_TRUE(linkState(w.host(), vf2).has_value()) << "c2's device is not back";
  w.expectPodEmpty(pod2);
  if (key == GcKey::kNone) {
    EXPECT_TRUE(linkState(w.host(), vf1).has_value()) << "without the key every attachment is stale";
    EXPECT_TRUE(w.records().empty());
    EXPECT_TRUE(w.allocations().empty()) << "the devices were released but their addresses were kept: "
                                         << ::testing::PrintToString(w.allocations());
  } else {
    EXPECT_TRUE(linkState(pod1.netns(), "net1").has_value()) << "a valid attachment was touched";
    EXPECT_EQ(w.records().size(), 1U);
    EXPECT_EQ(w.allocations(), std::vector<std::string>{"c1:net1"});
  }
}

/// ibcni-ipam: c1 and c2 hold addresses, then GC listing c1 with `key`.
void gcTwoAllocations(World& w, GcKey key) {
  TestNetns& pod = w.pod();
  const json ic = w.ipamConf("1.1.0");
  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), ic).status, 0);
  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "c2", pod), ic).status, 0);
  Exec gc = w.ipamPlugin(networkEnv("GC"), gcConf(ic, key, json::array({attachment("c1")})));
  EXPECT_EQ(gc.status, 0) << gc.describe();
  if (key == GcKey::kNone) {
    EXPECT_TRUE(w.ipamAllocations().empty()) << "a GC without the list must treat every allocation as stale: "
                                             << ::testing::PrintToString(w.ipamAllocations());
  } else {
    EXPECT_EQ(w.ipamAllocations(), std::vector<std::string>{"c1:net1"});
  }
}

// Checklist item 72: GC input keys: the list of still valid attachments
TEST(GcInputKeys, ValidAttachmentsKeyIsRead) {
  CONFORMANCE_WORLD(w);
  gcTwoAttachments(w, GcKey::kValidAttachments);
}

// Checklist item 72: GC input keys: the list of still valid attachments
TEST(GcInputKeys, AttachmentsKeyAloneIsRead) {
  CONFORMANCE_WORLD(w);
  gcTwoAttachments(w, GcKey::kAttachments);
}

// cnitool gc sends no list: every attachment is then stale, the device and its address alike.
// Checklist item 72: GC input keys: the list of still valid attachments
TEST(GcInputKeys, NoKeyMeansEveryAttachmentIsStale) {
  CONFORMANCE_WORLD(w);
  gcTwoAttachments(w, GcKey::kNone);
}

// Checklist item 72: GC input keys: the list of still valid attachments
TEST(GcInputKeys, IbcniIpamReadsEitherKey) {
  CONFORMANCE_WORLD(w);
  for (GcKey key : {GcKey::kValidAttachments, GcKey::kAttachments}) {
    SCOPED_TRACE(describe(key));
    World fresh;  // each variant in its own world
    ASSERT_TRUE(fresh.failure().empty() && fresh.skipReason().empty()) << fresh.failure() << fresh.skipReason();
    gcTwoAllocations(fresh, key);
  }
}

// Checklist item 72: GC input keys: the list of still valid attachments
TEST(GcInputKeys, IbcniIpamNoKeyMeansEveryAllocationIsStale) {
  CONFORMANCE_WORLD(w);
  gcTwoAllocations(w, GcKey::kNone);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 73: GC removes what is stale, keeps what is valid
TEST(GcCleanup, GcReleasesStaleAttachmentsAndKeepsValidOnes) {
  CONFORMANCE_WORLD(w);
  TestNetns& t1 = w.pod("t1");
  TestNetns& t2 = w.pod("t2");
  const std::string vf1 = w.vf();
  const std::string vf2 = w.vf(1480, true);
  const auto before2 = linkState(w.host(), vf2);
  const json c1 = w.conf("1.1.0", vf1, w.ipam());
  const json c2 = w.conf("1.1.0", vf2, w.ipam());
  Exec a1 = w.ibcni(World::env("ADD", "c1", t1), c1);
  ASSERT_EQ(a1.status, 0) << a1.describe();
  ASSERT_EQ(w.ibcni(World::env("ADD", "c2", t2), c2).status, 0);
  Exec gc = w.ibcni(networkEnv("GC"), gcConf(c1, GcKey::kValidAttachments, json::array({attachment("c1")})));
  EXPECT_EQ(gc.status, 0) << gc.describe();
  EXPECT_EQ(linkState(w.host(), vf2), before2) << "c2's device is not back as it was";
  w.expectPodEmpty(t2);
  EXPECT_EQ(w.records().size(), 1U);
  EXPECT_EQ(w.allocations(), std::vector<std::string>{"c1:net1"});
  Exec check = w.ibcni(World::env("CHECK", "c1", t1), withPrev(c1, a1.parsed()));
  EXPECT_EQ(check.status, 0) << "the valid attachment no longer passes CHECK\n" << check.describe();

  const json ic = w.ipamConf("1.1.0");
  Exec i1 = w.ipamPlugin(World::env("ADD", "c1", t1), ic);
  ASSERT_EQ(i1.status, 0);
  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "c2", t2), ic).status, 0);
  Exec igc = w.ipamPlugin(networkEnv("GC"), gcConf(ic, GcKey::kValidAttachments, json::array({attachment("c1")})));
  EXPECT_EQ(igc.status, 0) << igc.describe();
  EXPECT_EQ(w.ipamAllocations(), std::vector<std::string>{"c1:net1"});
  EXPECT_EQ(w.ipamPlugin(World::env("CHECK", "c1", t1), withPrev(ic, i1.parsed())).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 74: GC keeps going past failures and prints nothing on success
TEST(GcErrors, GcKeepsGoingPastAFailureAndReportsIt) {
  CONFORMANCE_WORLD(w);
  std::vector<std::string> vfs;
  std::vector<json> confs;
  for (int i = 0; i < 3; ++i) {
    TestNetns& pod = w.pod("pod" + std::to_string(i));
    vfs.push_back(w.vf());
    confs.push_back(w.conf("1.1.0", vfs.back(), w.ipam()));
    ASSERT_EQ(w.ibcni(World::env("ADD", "c" + std::to_string(i), pod), confs.back()).status, 0);
  }
  // The middle attachment's record names a mode this ibcni does not know: its release fails.
  const fs::path broken = w.stateDir() / "attachments" / w.network() / "c1" / "net1.json";
  ASSERT_TRUE(fs::exists(broken));
  json rec = json::parse(readFile(broken));
  rec["mode"] = "zzz-unknown";
  writeFile(broken, rec.dump());
  Exec gc = w.ibcni(networkEnv("GC"), gcConf(confs[0], GcKey::kValidAttachments, json::array()));
  EXPECT_NE(gc.status, 0) << "the failure is not reported\n" << gc.describe();
  EXPECT_NE(gc.msg().find("zzz-unknown"), std::string::npos) << gc.describe();
  EXPECT_TRUE(linkState(w.host(), vfs[0]).has_value()) << "GC stopped before c0";
  EXPECT_TRUE(linkState(w.host(), vfs[2]).has_value()) << "GC stopped at the failure instead of going on to c2";
  EXPECT_EQ(w.records(), std::vector<fs::path>{broken});

  const json ic = w.ipamConf("1.1.0");
  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "x1", w.pod()), ic).status, 0);
  Exec igc = w.ipamPlugin(networkEnv("GC"), gcConf(ic, GcKey::kValidAttachments, json::array()));
  EXPECT_EQ(igc.status, 0) << igc.describe();
  EXPECT_EQ(igc.out, "");
}

// ---------------------------------------------------------------------------------------------
// Checklist item 75: GC is forwarded to the IPAM with the same configuration
TEST(IpamGc, GcIsForwardedToTheIpamWithTheAttachmentsKey) {
  CONFORMANCE_WORLD(w);
  const std::string vf = w.vf();
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  json c = w.conf("1.1.0", vf, json{{"type", "rec-ipam"}, {"extra", 1}});
  c["cni.dev/valid-attachments"] = json::array({attachment("c1")});
  c["cni.dev/attachments"] = json::array({attachment("c1")});
  const std::string input = c.dump();
  Exec gc = w.ibcniRaw(networkEnv("GC", rec.dir().string()), input);
  EXPECT_EQ(gc.status, 0) << gc.describe();
  auto calls = rec.calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].verb, "GC");
  EXPECT_EQ(calls[0].stdinText, input) << "the IPAM did not get the configuration ibcni got";
  EXPECT_EQ(calls[0].env["CNI_PATH"], rec.dir().string());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 76: GC environment
TEST(GcEnvironment, GcNeedsOnlyCniCommandAndCniPath) {
  CONFORMANCE_WORLD(w);
  json c = w.conf("1.1.0", w.vf(), w.ipam());
  c["cni.dev/valid-attachments"] = json::array();
  Exec r = execProgram(ibcniBinary(), {"CNI_COMMAND=GC", "CNI_PATH=/usr/lib/cni"}, c.dump());
  expectProtocol(r, "GC", std::nullopt);
  EXPECT_EQ(r.status, 0) << r.describe();
  json ic = w.ipamConf("1.1.0");
  ic["cni.dev/valid-attachments"] = json::array();
  Exec i = execProgram(ipamBinary(), {"CNI_COMMAND=GC", "CNI_PATH=/usr/lib/cni"}, ic.dump());
  expectProtocol(i, "GC", std::nullopt);
  EXPECT_EQ(i.status, 0) << i.describe();
}

// ---------------------------------------------------------------------------------------------
// Checklist item 77: GC below 1.1.0 is error 1
TEST(GcVersion, GcBelow110IsCode1) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.0.0", vf, w.ipam());
  ASSERT_EQ(w.ibcni(World::env("ADD", "c1", pod), c).status, 0);
  for (const std::string v : {"0.3.0", "0.3.1", "0.4.0", "1.0.0"}) {
    SCOPED_TRACE(v);
    json g = w.conf(v, vf, w.ipam());
    g["cni.dev/valid-attachments"] = json::array();
    expectError(w.ibcni(networkEnv("GC"), g), 1, {"GC"});
    json ig = w.ipamConf(v);
    ig["cni.dev/valid-attachments"] = json::array();
    expectError(w.ipamPlugin(networkEnv("GC"), ig), 1, {"GC"});
  }
  EXPECT_TRUE(linkState(pod.netns(), "net1").has_value()) << "a refused GC released something";
  EXPECT_EQ(w.allocations().size(), 1U);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 78: GC next to ADDs: state stays consistent (the plugin locks it)
TEST(GcBesideAdds, GcRunningBesideAddsNeverReleasesAValidAttachment) {
  CONFORMANCE_WORLD(w);
  constexpr int kAdds = 8;
  const json ic = w.ipamConf("1.1.0");
  json valid = json::array();
  for (int i = 0; i < kAdds; ++i) {
    valid.push_back(attachment("c" + std::to_string(i)));
  }
  std::vector<std::function<Exec()>> jobs;
  for (int i = 0; i < kAdds; ++i) {
    jobs.emplace_back(
        [&w, &ic, i] { return w.ipamPlugin(World::ipamEnv("ADD", "c" + std::to_string(i), "/var/run/netns/p"), ic); });
    if (i % 2 == 0) {
      jobs.emplace_back(
          [&w, &ic, &valid] { return w.ipamPlugin(networkEnv("GC"), gcConf(ic, GcKey::kValidAttachments, valid)); });
    }
  }
  auto runs = runParallel(w.host(), jobs);
  std::set<std::string> addresses;
  for (const auto& r : runs) {
    EXPECT_EQ(r.status, 0) << r.describe();
    for (const auto& a : resultAddresses(r.parsed())) {
      addresses.insert(a);
    }
  }
  EXPECT_EQ(addresses.size(), static_cast<std::size_t>(kAdds));
  EXPECT_EQ(w.ipamAllocations().size(), static_cast<std::size_t>(kAdds))
      << ::testing::PrintToString(w.ipamAllocations());

  // ibcni: an ADD and a GC that lists it, at once.
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string cid = "r" + std::to_string(round);
    auto pair = runParallel(w.host(), {[&] { return w.ibcni(World::env("ADD", cid, pod), c); },
                                       [&] {
                                         return w.ibcni(networkEnv("GC"), gcConf(c, GcKey::kValidAttachments,
                                                                                 json::array({attachment(cid)})));
                                       }});
    ASSERT_EQ(pair[0].status, 0) << pair[0].describe();
    EXPECT_EQ(pair[1].status, 0) << pair[1].describe();
    Exec check = w.ibcni(World::env("CHECK", cid, pod), withPrev(c, pair[0].parsed()));
    EXPECT_EQ(check.status, 0) << check.describe();
    EXPECT_EQ(w.ibcni(World::env("DEL", cid, pod), c).status, 0);
  }
}

}  // namespace
}  // namespace ibcni::conformance
