// SPDX-License-Identifier: Apache-2.0
// Checklist section M (delegation to an IPAM plugin, items 79-85): ibcni runs the IPAM plugin
// named by ipam.type from CNI_PATH. A recorder ("REC") stands in for the IPAM, logging what it was
// given; ibcni-ipam itself is used as a delegate under another type name.
#include <gtest/gtest.h>

#include "conformance/harness.h"

namespace ibcni::conformance {
namespace {

json recResult(const std::string& version) {
  json ip = {{"address", "10.55.0.5/24"}, {"gateway", "10.55.0.1"}};
  if (version < "1.0.0") {
    ip["version"] = "4";
  }
  json route = {{"dst", "10.56.0.0/16"}};
  if (version == "1.1.0") {
    route["priority"] = 33;
  }
  return {{"cniVersion", version}, {"ips", {ip}}, {"routes", {route}}};
}

// ---------------------------------------------------------------------------------------------
// Checklist item 79: Finding the delegate
TEST(DelegateLookup, FirstRegularFileInCniPathOrderWins) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const fs::path dirWithDirectory = w.tmp() / "bin0";
  fs::create_directories(dirWithDirectory / "rec-ipam");  // a directory of that name is no plugin
  Recorder first(w.tmp() / "bin1", "rec-ipam");
  Recorder second(w.tmp() / "bin2", "rec-ipam");
  first.setResult(recResult("1.0.0"));
  second.setResult(recResult("1.0.0"));
  const json c = w.conf("1.0.0", vf, json{{"type", "rec-ipam"}});
  CniEnv e = World::env("ADD", "c1", pod);
  e.path = dirWithDirectory.string() + ":" + first.dir().string() + ":" + second.dir().string();
  ASSERT_EQ(w.ibcni(e, c).status, 0);
  EXPECT_EQ(first.verbs(), std::vector<std::string>{"ADD"});
  EXPECT_TRUE(second.verbs().empty()) << "the second directory's plugin ran";
  e.command = "DEL";
  EXPECT_EQ(w.ibcni(e, c).status, 0);
}

// Checklist item 79: Finding the delegate
TEST(DelegateLookup, MissingOrInvalidTypeIsACleanErrorLeavingNothing) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf(1480, true);
  for (const std::string type : {"nope", "../host-local", "sub/dir", "/usr/lib/cni/host-local", ".."}) {
    SCOPED_TRACE("ipam.type " + type);
    Exec add = w.ibcni(World::env("ADD", "c1", pod), w.conf("1.0.0", vf, json{{"type", type}}));
    EXPECT_EQ(add.code(), 7U) << add.describe();
    EXPECT_NE(add.msg().find(type), std::string::npos) << add.describe();
    EXPECT_EQ(linkState(w.host(), vf), before);
    w.expectPodEmpty(pod);
    EXPECT_TRUE(w.records().empty());
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 80: The delegate gets the same environment and the complete configuration
TEST(DelegateInput, DelegateGetsTheRequestBytesAndEnvironment) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  rec.setResult(recResult("1.1.0"));
  json c = w.conf("1.1.0", vf, json{{"type", "rec-ipam"}, {"ranges", {{{{"subnet", "10.55.0.0/24"}}}}}});
  c["runtimeConfig"] = {{"ips", {"10.55.0.5/24"}}};
  c["args"] = {{"cni", {{"labels", {{{"key", "a"}, {"value", "b"}}}}}}};
  c["cni.dev/future"] = "x";
  c["capabilities"] = {{"ips", true}};
  CniEnv e = World::env("ADD", "c1", pod);
  e.path = rec.dir().string() + ":/usr/lib/cni";
  e.args = "IgnoreUnknown=1;K8S_POD_NAME=p";
  e.extra = {"CONFORMANCE_MARK=kept"};
  std::string prevText;
  for (const std::string verb : {"ADD", "CHECK", "DEL"}) {
    SCOPED_TRACE(verb);
    e.command = verb;
    // Key order and spacing as a runtime might send them: the delegate must get these very bytes.
    std::string input = verb == "ADD" ? c.dump(1) : withPrev(c, json::parse(prevText)).dump(2);
    Exec r = w.ibcniRaw(e, input);
    ASSERT_EQ(r.status, 0) << r.describe();
    if (verb == "ADD") {
      prevText = r.out;
    }
    auto calls = rec.calls();
    ASSERT_FALSE(calls.empty());
    const auto& call = calls.back();
    EXPECT_EQ(call.verb, verb);
    EXPECT_EQ(call.stdinText, input) << "the delegate's stdin differs from ibcni's";
    for (const auto& [name, value] :
         std::vector<std::pair<std::string, std::optional<std::string>>>{{"CNI_COMMAND", e.command},
                                                                         {"CNI_CONTAINERID", e.containerId},
                                                                         {"CNI_NETNS", e.netns},
                                                                         {"CNI_IFNAME", e.ifName},
                                                                         {"CNI_ARGS", e.args},
                                                                         {"CNI_PATH", e.path}}) {
      EXPECT_EQ(call.env.count(name) != 0 ? std::optional<std::string>(call.env.at(name)) : std::nullopt, value)
          << name;
    }
    EXPECT_EQ(call.env.count("CONFORMANCE_MARK") != 0 ? call.env.at("CONFORMANCE_MARK") : "", "kept")
        << "the rest of ibcni's environment did not reach the delegate";
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 81: The delegate's output: stderr passes through, its error is passed up
TEST(DelegateOutput, DelegateStderrAndErrorsArePassedUp) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  rec.setResult(recResult("1.0.0"));
  const json c = w.conf("1.0.0", vf, json{{"type", "rec-ipam"}});
  CniEnv e = World::env("ADD", "c1", pod);
  e.path = rec.dir().string();
  Exec add = w.ibcni(e, c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_NE(add.err.find("conformance recorder: ADD on stderr"), std::string::npos)
      << "the delegate's stderr did not reach ibcni's\n"
      << add.describe();
  e.command = "DEL";
  ASSERT_EQ(w.ibcni(e, c).status, 0);

  e.command = "ADD";
  rec.failVerb("ADD", {{"cniVersion", "1.0.0"}, {"code", 11}, {"msg", "rec: pool busy"}, {"details", "later"}});
  Exec failed = w.ibcni(e, c);
  expectError(failed, 11, {"rec: pool busy"});
  // A delegate that fails without an error object: ibcni still answers with one of its own.
  writeFile(rec.dir() / "rec-ipam.log" / "fail-ADD", "this is not JSON");
  Exec garbled = w.ibcni(e, c);
  EXPECT_NE(garbled.status, 0);
  EXPECT_GE(garbled.code(), 100U) << garbled.describe();
  e.command = "DEL";
  EXPECT_EQ(w.ibcni(e, c).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 82: Failure handling around the delegate's ADD
TEST(DelegateAddFailure, FailedDelegateAddUndoesOurWork) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf(1480, true);
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  rec.failVerb("ADD", {{"code", 11}, {"msg", "rec: pool busy"}});
  json c = w.conf("1.0.0", vf, json{{"type", "rec-ipam"}});
  c["mtu"] = 1400;
  CniEnv e = World::env("ADD", "c1", pod);
  e.path = rec.dir().string();
  expectError(w.ibcni(e, c), 11);
  EXPECT_EQ(linkState(w.host(), vf), before);
  w.expectPodEmpty(pod);
  EXPECT_TRUE(w.records().empty());
}

// Checklist item 82: Failure handling around the delegate's ADD
TEST(DelegateAddFailure, FailureAfterTheDelegateAddRunsTheDelegateDel) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf(1480, true);
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  // The same route twice: the second cannot be added, after the IPAM allocated.
  json r = recResult("1.0.0");
  r["routes"] = {{{"dst", "10.56.0.0/16"}}, {{"dst", "10.56.0.0/16"}}};
  rec.setResult(r);
  const json c = w.conf("1.0.0", vf, json{{"type", "rec-ipam"}});
  CniEnv e = World::env("ADD", "c1", pod);
  e.path = rec.dir().string();
  Exec add = w.ibcni(e, c);
  EXPECT_NE(add.status, 0) << add.describe();
  EXPECT_EQ(rec.verbs(), (std::vector<std::string>{"ADD", "DEL"})) << "the IPAM allocation was not released";
  EXPECT_EQ(linkState(w.host(), vf), before);
  w.expectPodEmpty(pod);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 83: Every verb is delegated
TEST(DelegatedVerbs, CheckDelGcAndStatusReachTheDelegateAndItsErrorsComeBack) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  rec.setResult(recResult("1.1.0"));
  const json c = w.conf("1.1.0", vf, json{{"type", "rec-ipam"}});
  CniEnv e = World::env("ADD", "c1", pod);
  e.path = rec.dir().string();
  Exec add = w.ibcni(e, c);
  ASSERT_EQ(add.status, 0) << add.describe();
  const json prev = withPrev(c, add.parsed());
  // STATUS of a network whose device is free (a static device already attached is itself a 50).
  const json free = w.conf("1.1.0", w.vf(), json{{"type", "rec-ipam"}});
  e.command = "CHECK";
  EXPECT_EQ(w.ibcni(e, prev).status, 0);
  EXPECT_EQ(w.ibcni(networkEnv("STATUS", rec.dir().string()), free).status, 0);
  json gc = c;
  gc["cni.dev/valid-attachments"] = {{{"containerID", "c1"}, {"ifname", "net1"}}};
  EXPECT_EQ(w.ibcni(networkEnv("GC", rec.dir().string()), gc).status, 0);
  for (const std::string verb : {"CHECK", "STATUS", "GC"}) {
    SCOPED_TRACE(verb + " failing in the delegate");
    rec.failVerb(verb, {{"code", 50}, {"msg", "rec: " + verb + " failed"}});
    Exec r = verb == "CHECK" ? w.ibcni(e, prev)
             : verb == "GC"  ? w.ibcni(networkEnv("GC", rec.dir().string()), gc)
                             : w.ibcni(networkEnv("STATUS", rec.dir().string()), free);
    expectError(r, 50, {"rec: " + verb + " failed"});
    rec.clearFailure(verb);
  }
  e.command = "DEL";
  EXPECT_EQ(w.ibcni(e, prev).status, 0);
  EXPECT_EQ(rec.verbs(), (std::vector<std::string>{"ADD", "CHECK", "STATUS", "GC", "CHECK", "STATUS", "GC", "DEL"}));
}

// ---------------------------------------------------------------------------------------------
// Checklist item 84: The delegate's result is read in the request's version; ips[].interface set
TEST(DelegateResult, DelegateResultIsConvertedAndIndexed) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  for (const auto& v : kVersions) {
    SCOPED_TRACE(v);
    rec.setResult(recResult(v));
    const json c = w.conf(v, vf, json{{"type", "rec-ipam"}});
    CniEnv e = World::env("ADD", "c1", pod);
    e.path = rec.dir().string();
    Exec add = w.ibcni(e, c);  // validated against v's schema by the harness
    ASSERT_EQ(add.status, 0) << add.describe();
    const json r = add.parsed();
    ASSERT_EQ(r["ips"].size(), 1U);
    EXPECT_EQ(r["ips"][0].value("interface", -1), 0);
    EXPECT_EQ(r["ips"][0].value("address", ""), "10.55.0.5/24");
    EXPECT_EQ(r["routes"][0].contains("priority"), v == "1.1.0") << add.out;
    EXPECT_EQ(addresses(pod.netns(), "net1"), std::vector<std::string>{"10.55.0.5/24"});
    e.command = "DEL";
    EXPECT_EQ(w.ibcni(e, c).status, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 85: Empty ipam means no IPAM
TEST(EmptyIpam, NoIpamMeansNoAddressesAndNothingToRun) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  // Every file in CNI_PATH is a recorder: if ibcni ran anything, it would show.
  Recorder rec(w.tmp() / "bin", "host-local");
  for (const auto& ipam : {std::optional<json>(), std::optional<json>(json::object())}) {
    SCOPED_TRACE(ipam ? "\"ipam\": {}" : "no ipam");
    const json c = w.conf("1.1.0", vf, ipam);
    CniEnv e = World::env("ADD", "c1", pod);
    e.path = rec.dir().string();
    Exec add = w.ibcni(e, c);
    ASSERT_EQ(add.status, 0) << add.describe();
    EXPECT_FALSE(add.parsed().contains("ips")) << add.out;
    EXPECT_FALSE(add.parsed().contains("routes")) << add.out;
    e.command = "CHECK";
    EXPECT_EQ(w.ibcni(e, withPrev(c, add.parsed())).status, 0);
    json gc = c;
    gc["cni.dev/valid-attachments"] = json::array({json{{"containerID", "c1"}, {"ifname", "net1"}}});
    EXPECT_EQ(w.ibcni(networkEnv("GC", rec.dir().string()), gc).status, 0);
    e.command = "DEL";
    EXPECT_EQ(w.ibcni(e, c).status, 0);
  }
  EXPECT_TRUE(rec.verbs().empty()) << ::testing::PrintToString(rec.verbs());
}

}  // namespace
}  // namespace ibcni::conformance
