// SPDX-License-Identifier: Apache-2.0
// Checklist sections C (VERSION and version negotiation, items 16-22) and D (request
// configuration on stdin, items 23-28), for ibcni and ibcni-ipam.
#include <gtest/gtest.h>

#include <set>

#include "conformance/harness.h"

namespace ibcni::conformance {
namespace {

const std::vector<std::string>& binaries() {
  static const std::vector<std::string> b = {ibcniBinary(), ipamBinary()};
  return b;
}

// ---------------------------------------------------------------------------------------------
// Checklist item 16: VERSION: echo cniVersion, list supportedVersions
TEST(VersionCommand, VersionAnswersWithSupportedVersions) {
  CONFORMANCE_WORLD(w);
  for (const auto& bin : binaries()) {
    for (const auto& v : kVersions) {
      SCOPED_TRACE(bin + " asked " + v);
      Exec r = execProgram(bin, {"CNI_COMMAND=VERSION"}, "{\"cniVersion\":\"" + v + "\"}");
      expectProtocol(r, "VERSION", std::nullopt);
      ASSERT_EQ(r.status, 0) << r.describe();
      EXPECT_EQ(r.parsed().value("cniVersion", ""), v) << "the spec says: echo the asked version";
      auto list = r.parsed().value("supportedVersions", std::vector<std::string>{});
      EXPECT_NE(std::find(list.begin(), list.end(), "1.1.0"), list.end()) << r.out;
    }
  }
}

// Checklist item 16: VERSION: echo cniVersion, list supportedVersions
TEST(VersionCommand, VersionWorksWithEmptyOrClosedStdinAndNoOtherEnv) {
  CONFORMANCE_WORLD(w);
  for (const auto& bin : binaries()) {
    for (const std::optional<std::string>& input :
         {std::optional<std::string>(""), std::optional<std::string>(), std::optional<std::string>("{}")}) {
      SCOPED_TRACE(bin + (input ? " stdin \"" + *input + "\"" : " stdin closed"));
      Exec r = execProgram(bin, {"CNI_COMMAND=VERSION"}, input);
      expectProtocol(r, "VERSION", std::nullopt);
      EXPECT_EQ(r.status, 0) << r.describe();
      EXPECT_FALSE(r.parsed().value("cniVersion", "").empty()) << r.describe();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 17: supportedVersions holds exact strings, and each one works
TEST(SupportedVersions, SupportedVersionsAreExactlyTheDesignedList) {
  CONFORMANCE_WORLD(w);
  for (const auto& bin : binaries()) {
    SCOPED_TRACE(bin);
    Exec r = execProgram(bin, {"CNI_COMMAND=VERSION"}, std::string("{\"cniVersion\":\"1.1.0\"}"));
    ASSERT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.parsed().value("supportedVersions", std::vector<std::string>{}), kVersions) << r.out;
  }
}

// ibcni's version matrix (ADD, CHECK, DEL per version) is ResultVersion and InterfaceCreation.
// Checklist item 17: supportedVersions holds exact strings, and each one works
TEST(SupportedVersions, EveryListedVersionServesAddAndDel) {
  CONFORMANCE_WORLD(w);
  TestNetns& pod = w.pod();
  for (const auto& v : kVersions) {
    SCOPED_TRACE(v);
    Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), w.ipamConf(v));
    ASSERT_EQ(ia.status, 0) << ia.describe();
    EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), w.ipamConf(v)).status, 0);
  }
  w.expectNothingLeft(pod);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 18: Unsupported cniVersion: error 1 before any side effect
TEST(UnsupportedVersion, UnsupportedVersionIsCode1AndChangesNothing) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf(1480, true);
  json c = w.conf("9.9.9", vf, w.ipam());
  json ic = w.ipamConf("9.9.9");
  for (const std::string verb : {"ADD", "CHECK", "DEL", "GC", "STATUS"}) {
    SCOPED_TRACE(verb);
    CniEnv e = verb == "GC" || verb == "STATUS" ? networkEnv(verb) : World::env(verb, "c1", pod);
    for (bool ipam : {false, true}) {
      Exec r = ipam ? w.ipamPlugin(e, ic) : w.ibcni(e, c);
      expectError(r, 1);
      const std::string details = r.parsed().value("details", "");
      EXPECT_NE(details.find("9.9.9"), std::string::npos) << "details do not name the config's version\n"
                                                          << r.describe();
      EXPECT_NE(details.find("1.1.0"), std::string::npos) << "details do not list the supported versions\n"
                                                          << r.describe();
    }
  }
  EXPECT_EQ(linkState(w.host(), vf), before);
  w.expectPodEmpty(pod);
  EXPECT_TRUE(w.records().empty());
  EXPECT_TRUE(w.noAllocations());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 19: Missing or empty cniVersion means 0.1.0, which is not supported
TEST(MissingVersion, MissingOrEmptyCniVersionIsCode1) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (bool empty : {false, true}) {
    SCOPED_TRACE(empty ? "cniVersion \"\"" : "no cniVersion");
    json c = w.conf("1.1.0", vf, w.ipam());
    json ic = w.ipamConf("1.1.0");
    if (empty) {
      c["cniVersion"] = "";
      ic["cniVersion"] = "";
    } else {
      c.erase("cniVersion");
      ic.erase("cniVersion");
    }
    expectError(w.ibcni(World::env("ADD", "c1", pod), c), 1);
    expectError(w.ipamPlugin(World::env("ADD", "c1", pod), ic), 1);
  }
  w.expectNothingLeft(pod);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 20: Malformed cniVersion: a clean error
TEST(MalformedVersion, MalformedCniVersionIsACleanError) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const json& bad :
       {json("abc"), json("1.2.3.4"), json("1.1"), json(" 1.1.0"), json(110), json::array({"1.1.0"}), json(true)}) {
    SCOPED_TRACE("cniVersion " + bad.dump());
    json c = w.conf("1.1.0", vf, w.ipam());
    c["cniVersion"] = bad;
    json ic = w.ipamConf("1.1.0");
    ic["cniVersion"] = bad;
    for (const Exec& r : {w.ibcni(World::env("ADD", "c1", pod), c), w.ipamPlugin(World::env("ADD", "c1", pod), ic)}) {
      EXPECT_NE(r.status, 0) << r.describe();
      EXPECT_TRUE(r.code() == 1 || r.code() == 6) << r.describe();
    }
  }
  w.expectNothingLeft(pod);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 21: Verbs gated by version
TEST(VersionGatedVerbs, CheckNeeds040GcAndStatusNeed110) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const auto& v : kVersions) {
    SCOPED_TRACE(v);
    json c = w.conf(v, vf, w.ipam());
    c["prevResult"] = {{"cniVersion", v}, {"interfaces", {{{"name", "net1"}, {"sandbox", pod.path()}}}}};
    json ic = w.ipamConf(v);
    if (v < "0.4.0") {
      expectError(w.ibcni(World::env("CHECK", "c1", pod), c), 1, {"CHECK"});
      expectError(w.ipamPlugin(World::env("CHECK", "c1", pod), ic), 1, {"CHECK"});
    }
    if (v < "1.1.0") {
      for (const std::string verb : {"GC", "STATUS"}) {
        expectError(w.ibcni(networkEnv(verb), c), 1, {verb});
        expectError(w.ipamPlugin(networkEnv(verb), ic), 1, {verb});
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 22: cniVersions is for the runtime: the plugin goes by cniVersion
TEST(CniVersionsKey, CniVersionsListIsToleratedAndCniVersionRules) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.0.0", vf, w.ipam());
  c["cniVersions"] = {"0.4.0", "1.0.0", "1.1.0", "9.9.9"};
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(add.parsed().value("cniVersion", ""), "1.0.0");
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  json ic = w.ipamConf("1.0.0");
  ic["cniVersions"] = {"0.4.0", "1.0.0", "1.1.0", "9.9.9"};
  Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), ic);
  ASSERT_EQ(ia.status, 0) << ia.describe();
  EXPECT_EQ(ia.parsed().value("cniVersion", ""), "1.0.0");
}

// ---------------------------------------------------------------------------------------------
// Checklist item 23: What the runtime injects
TEST(InjectedRuntimeKeys, RequestShapedAsLibcniSendsItIsServed) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  // One plugin object of a list, with name and cniVersion injected, capabilities passed through,
  // runtimeConfig from matched capabilities; CHECK and DEL also get prevResult.
  json c = w.conf("1.1.0", vf, w.ipam());
  c["capabilities"] = {{"ips", true}, {"deviceID", true}};
  c["runtimeConfig"] = {{"ips", {"10.77.0.23/24"}}};
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(resultAddresses(add.parsed()), std::vector<std::string>{"10.77.0.23/24"});
  EXPECT_EQ(w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, add.parsed())).status, 0);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, add.parsed())).status, 0);

  json ic = w.ipamConf("1.1.0");
  ic["capabilities"] = {{"ips", true}};
  ic["runtimeConfig"] = {{"ips", {"10.78.0.23/24"}}};
  Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), ic);
  ASSERT_EQ(ia.status, 0) << ia.describe();
  EXPECT_EQ(resultAddresses(ia.parsed()), std::vector<std::string>{"10.78.0.23/24"});
  json prev = ia.parsed();
  EXPECT_EQ(w.ipamPlugin(World::env("CHECK", "c1", pod), withPrev(ic, prev)).status, 0);
  EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), withPrev(ic, prev)).status, 0);
  EXPECT_TRUE(w.noAllocations());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 24: capabilities arrives too
TEST(CapabilitiesKey, CapabilitiesKeyIsAcceptedAndIgnored) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.0.0", vf, w.ipam());
  c["capabilities"] = {{"infinibandGUID", true}, {"deviceID", true}, {"mac", true}, {"ips", true}};
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  json ic = w.ipamConf("1.0.0");
  ic["capabilities"] = {{"ips", true}};
  EXPECT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), ic).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 25: Reserved keys: never required, unknown cni.dev/* accepted
TEST(ReservedKeys, UnknownCniDevKeysAreAccepted) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.1.0", vf, w.ipam());
  c["cni.dev/future"] = 1;
  c["cni.dev/something"] = {{"nested", true}};
  for (const std::string verb : {"ADD", "CHECK", "DEL"}) {
    SCOPED_TRACE(verb);
    Exec r = w.ibcni(World::env(verb, "c1", pod), c);
    EXPECT_EQ(r.status, 0) << r.describe();
    if (verb == "ADD") {
      c["prevResult"] = r.parsed();
    }
  }
  json ic = w.ipamConf("1.1.0");
  ic["cni.dev/future"] = 1;
  EXPECT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), ic).status, 0);
  EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), ic).status, 0);
}

// Checklist item 25: Reserved keys: never required, unknown cni.dev/* accepted
TEST(ReservedKeys, RuntimeConfigAndArgsAreNeverRequired) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  ASSERT_FALSE(c.contains("runtimeConfig") || c.contains("args"));
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  EXPECT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  json ic = w.ipamConf("1.1.0");
  EXPECT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), ic).status, 0);
  EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), ic).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 26: Unknown plugin fields: ibcni's policy is to ignore them with a warning in the log
TEST(UnknownConfigFields, UnknownFieldsAreIgnoredWithAWarning) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.1.0", vf, w.ipam());
  c["zzzUnknownKey"] = {{"a", 1}};
  c["logLevel"] = "warn";
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_NE(add.err.find("zzzUnknownKey"), std::string::npos) << "the ignored key is not named in the log\n"
                                                              << add.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  // ibcni-ipam gets the delegating plugin's keys (macvlan's master, mode) and its own unknown ones.
  json ic = w.ipamConf("1.1.0");
  ic["zzzUnknownKey"] = true;
  ic["ipam"]["zzzIpamKey"] = 1;
  ic["logLevel"] = "warn";
  Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), ic);
  ASSERT_EQ(ia.status, 0) << ia.describe();
  EXPECT_NE(ia.err.find("zzzIpamKey"), std::string::npos) << ia.describe();
}

// ---------------------------------------------------------------------------------------------
// Checklist item 27: Well-known optional keys keep their standard meaning
TEST(WellKnownConfigKeys, DnsFromTheConfigurationReachesTheResult) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.1.0", vf, w.ipam());
  c["dns"] = {{"nameservers", {"10.0.0.53"}},
              {"domain", "example.org"},
              {"search", {"a.example.org"}},
              {"options", {"ndots:2"}}};
  c["ipMasq"] = false;  // ibcni does no masquerading: the key is ignored, not misread
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(add.parsed().value("dns", json::object()), c["dns"]);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);

  json ic = w.ipamConf("1.1.0");
  ic["ipam"]["dns"] = {{"nameservers", {"10.0.0.54"}}, {"search", {"b.example.org"}}};
  Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), ic);
  ASSERT_EQ(ia.status, 0) << ia.describe();
  EXPECT_EQ(ia.parsed().value("dns", json::object()), ic["ipam"]["dns"]);
}

// Checklist item 27: Well-known optional keys keep their standard meaning
TEST(WellKnownConfigKeys, IpamObjectNeedsAType) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  expectError(w.ibcni(World::env("ADD", "c1", pod), w.conf("1.1.0", vf, json{{"subnet", "10.1.0.0/24"}})), 7,
              {"ipam.type"});
  expectError(w.ibcni(World::env("ADD", "c1", pod), w.conf("1.1.0", vf, json("host-local"))), 7, {"ipam"});
  json ic = w.ipamConf("1.1.0");
  ic["ipam"].erase("type");
  expectError(w.ipamPlugin(World::env("ADD", "c1", pod), ic), 7, {"ipam"});
  EXPECT_EQ(linkState(w.host(), vf), before);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 28: args object
TEST(ArgsObject, UnknownArgsAreIgnoredAndArgsCniIpsIsHonoured) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.1.0", vf, w.ipam());
  c["args"] = {{"cni", {{"labels", {{{"key", "a"}, {"value", "b"}}}}, {"zzz", 1}}}, {"other", {{"x", "y"}}}};
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);

  // args.cni.ips wins over CNI_ARGS IP=.
  json ic = w.ipamConf("1.1.0");
  ic["args"] = {{"cni", {{"ips", {"10.78.0.77"}}, {"labels", json::array()}, {"zzz", 1}}}};
  CniEnv e = World::env("ADD", "c2", pod);
  e.args = "IP=10.78.0.88";
  Exec ia = w.ipamPlugin(e, ic);
  ASSERT_EQ(ia.status, 0) << ia.describe();
  EXPECT_EQ(resultAddresses(ia.parsed()), std::vector<std::string>{"10.78.0.77/24"});
  json ic2 = w.ipamConf("1.1.0");
  Exec byCniArgs = w.ipamPlugin(World::env("ADD", "c3", pod), ic2);
  ASSERT_EQ(byCniArgs.status, 0);
  e.containerId = "c4";
  Exec viaIp = w.ipamPlugin(e, ic2);
  ASSERT_EQ(viaIp.status, 0) << viaIp.describe();
  EXPECT_EQ(resultAddresses(viaIp.parsed()), std::vector<std::string>{"10.78.0.88/24"});
}

}  // namespace
}  // namespace ibcni::conformance
