// SPDX-License-Identifier: Apache-2.0
// Longer than 600 lines on purpose: one file per checklist section group, as e2e/CONFORMANCE.md maps them.
// Checklist sections A (invocation environment, items 1-9) and B (output channels, exit status,
// error object, items 10-15), for ibcni and ibcni-ipam.
#include <gtest/gtest.h>

#include <algorithm>

#include "conformance/harness.h"

namespace ibcni::conformance {
namespace {

// ---------------------------------------------------------------------------------------------
// Checklist item 1: Verb selection
TEST(VerbSelection, UnknownVerbIsCode4) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const std::string verb : {"FOO", "add", "INIT", "FINALIZE"}) {
    SCOPED_TRACE("CNI_COMMAND=" + verb);
    expectError(w.ibcni(World::env(verb, "c1", pod), w.conf("1.1.0", vf, w.ipam())), 4, {verb});
    expectError(w.ipamPlugin(World::env(verb, "c1", pod), w.ipamConf("1.1.0")), 4, {verb});
  }
  w.expectNothingLeft(pod, vf, before);
}

// Checklist item 1: Verb selection
TEST(VerbSelection, EveryDefinedVerbIsAccepted) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, add.parsed())).status, 0);
  EXPECT_EQ(w.ibcni(networkEnv("STATUS"), w.conf("1.1.0", w.vf(), w.ipam())).status, 0);
  json gc = c;
  gc["cni.dev/valid-attachments"] = {{{"containerID", "c1"}, {"ifname", "net1"}}};
  EXPECT_EQ(w.ibcni(networkEnv("GC"), gc).status, 0);
  EXPECT_EQ(w.ibcniRaw(World::env("VERSION", "c1", pod), std::string("{}")).status, 0);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, add.parsed())).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 2: Required environment per verb
TEST(RequiredEnvironment, MissingEnvVariablesAreCode4AndNamed) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  struct Case {
    std::string verb;
    std::vector<std::string> required;
  };
  const std::vector<Case> cases = {{"ADD", {"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"}},
                                   {"CHECK", {"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"}},
                                   {"DEL", {"CNI_COMMAND", "CNI_CONTAINERID", "CNI_IFNAME"}},
                                   {"GC", {"CNI_COMMAND", "CNI_PATH"}}};
  for (const auto& k : cases) {
    for (const auto& var : k.required) {
      SCOPED_TRACE(k.verb + " without " + var);
      CniEnv e = World::env(k.verb, "c1", pod);
      if (k.verb == "GC") {
        e = networkEnv("GC");
      }
      if (var == "CNI_COMMAND") {
        e.command.reset();
      } else if (var == "CNI_CONTAINERID") {
        e.containerId.reset();
      } else if (var == "CNI_NETNS") {
        e.netns.reset();
      } else if (var == "CNI_IFNAME") {
        e.ifName.reset();
      } else if (var == "CNI_PATH") {
        e.path.reset();
      }
      expectError(w.ibcni(e, c), 4, {var});
      expectError(w.ipamPlugin(e, w.ipamConf("1.1.0")), 4, {var});
    }
  }
  {
    SCOPED_TRACE("ADD without CNI_CONTAINERID and CNI_IFNAME: both named");
    CniEnv e = World::env("ADD", "c1", pod);
    e.containerId.reset();
    e.ifName.reset();
    expectError(w.ibcni(e, c), 4, {"CNI_CONTAINERID", "CNI_IFNAME"});
    expectError(w.ipamPlugin(e, w.ipamConf("1.1.0")), 4, {"CNI_CONTAINERID", "CNI_IFNAME"});
  }
  w.expectNothingLeft(pod, vf, before);
}

// Checklist item 2: Required environment per verb
TEST(RequiredEnvironment, OptionalVariablesMayBeMissing) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  // ADD, CHECK and DEL: CNI_ARGS and CNI_PATH optional; DEL: CNI_NETNS optional too.
  CniEnv add = World::env("ADD", "c1", pod);
  add.path.reset();
  add.args.reset();
  Exec added = w.ibcni(add, c);
  ASSERT_EQ(added.status, 0) << added.describe();
  CniEnv check = add;
  check.command = "CHECK";
  EXPECT_EQ(w.ibcni(check, withPrev(c, added.parsed())).status, 0);
  CniEnv del = add;
  del.command = "DEL";
  del.netns.reset();
  EXPECT_EQ(w.ibcni(del, c).status, 0);
  EXPECT_TRUE(linkState(w.host(), vf).has_value()) << "DEL without CNI_NETNS did not bring the device home";
  // VERSION needs only CNI_COMMAND; STATUS needs nothing else either.
  CniEnv bare;
  bare.command = "VERSION";
  EXPECT_EQ(w.ibcniRaw(bare, std::string()).status, 0);
  EXPECT_EQ(w.ipamRaw(bare, std::string()).status, 0);
  bare.command = "STATUS";
  EXPECT_EQ(w.ibcni(bare, c).status, 0);
  EXPECT_EQ(w.ipamPlugin(bare, w.ipamConf("1.1.0")).status, 0);
  // ibcni-ipam: the same optional variables.
  CniEnv ipamAdd = World::ipamEnv("ADD", "c1", pod.path());
  ipamAdd.path.reset();
  ipamAdd.args.reset();
  ASSERT_EQ(w.ipamPlugin(ipamAdd, w.ipamConf("1.1.0")).status, 0);
  CniEnv ipamDel = ipamAdd;
  ipamDel.command = "DEL";
  ipamDel.netns.reset();
  EXPECT_EQ(w.ipamPlugin(ipamDel, w.ipamConf("1.1.0")).status, 0);
  EXPECT_TRUE(w.noAllocations());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 3: Empty means absent (libcni exports every CNI_* variable)
TEST(EmptyEnvironmentVariables, GcAndStatusSucceedWithEmptyAttachmentVariables) {
  CONFORMANCE_WORLD(w);
  const std::string vf = w.vf();
  json c = w.conf("1.1.0", vf, w.ipam());
  c["capabilities"] = {{"deviceID", true}};
  for (const std::string verb : {"GC", "STATUS"}) {
    SCOPED_TRACE(verb);
    CniEnv e = networkEnv(verb);
    if (verb == "STATUS") {
      e.path = "";
    }
    Exec r = w.ibcni(e, c);
    EXPECT_EQ(r.status, 0) << r.describe();
    Exec i = w.ipamPlugin(e, w.ipamConf("1.1.0"));
    EXPECT_EQ(i.status, 0) << i.describe();
  }
}

// Checklist item 3: Empty means absent (libcni exports every CNI_* variable)
TEST(EmptyEnvironmentVariables, VersionIgnoresLibcniDummyEnvironment) {
  CONFORMANCE_WORLD(w);
  // libcni's probe (pkg/invoke GetVersionInfo).
  const std::vector<std::string> probe = {kPathEnv,    "CNI_COMMAND=VERSION", "CNI_CONTAINERID=", "CNI_NETNS=dummy",
                                          "CNI_ARGS=", "CNI_IFNAME=dummy",    "CNI_PATH=dummy"};
  for (const std::string* bin : {&ibcniBinary(), &ipamBinary()}) {
    SCOPED_TRACE(*bin);
    Exec r = execProgram(*bin, probe, std::string("{\"cniVersion\":\"1.0.0\"}"));
    expectProtocol(r, "VERSION", std::nullopt);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.parsed().value("cniVersion", ""), "1.0.0");
  }
}

// Checklist item 3: Empty means absent (libcni exports every CNI_* variable)
TEST(EmptyEnvironmentVariables, EmptyRequiredVariableCountsAsMissing) {
  CONFORMANCE_WORLD(w);
  TestNetns& pod = w.pod();
  const json c = w.conf("1.1.0", w.vf(), w.ipam());
  for (const std::string var : {"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"}) {
    SCOPED_TRACE(var + "=\"\"");
    CniEnv e = World::env("ADD", "c1", pod);
    (var == "CNI_CONTAINERID" ? e.containerId : var == "CNI_NETNS" ? e.netns : e.ifName) = "";
    expectError(w.ibcni(e, c), 4, {var});
    expectError(w.ipamPlugin(e, w.ipamConf("1.1.0")), 4, {var});
  }
  w.expectPodEmpty(pod);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 4: Container ID format
TEST(ContainerIdFormat, InvalidContainerIdsAreCode4) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  for (const std::string bad : {"-bad/id", "-leading-dash", "_x", ".x", "a/b", "a b", "a;b", "ä"}) {
    SCOPED_TRACE("CNI_CONTAINERID=" + bad);
    for (const std::string verb : {"ADD", "CHECK", "DEL"}) {
      expectError(w.ibcni(World::env(verb, bad, pod), c), 4, {"CNI_CONTAINERID"});
      expectError(w.ipamPlugin(World::env(verb, bad, pod), w.ipamConf("1.1.0")), 4, {"CNI_CONTAINERID"});
    }
  }
  w.expectNothingLeft(pod, vf, before);
}

// Checklist item 4: Container ID format
TEST(ContainerIdFormat, ValidContainerIdsAreAccepted) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  for (const std::string good : {"a.b_c-1", "0", "cnitool-0123456789abcdef0123"}) {
    SCOPED_TRACE("CNI_CONTAINERID=" + good);
    Exec add = w.ibcni(World::env("ADD", good, pod), c);
    ASSERT_EQ(add.status, 0) << add.describe();
    Exec del = w.ibcni(World::env("DEL", good, pod), c);
    EXPECT_EQ(del.status, 0) << del.describe();
    Exec ia = w.ipamPlugin(World::env("ADD", good, pod), w.ipamConf("1.1.0"));
    EXPECT_EQ(ia.status, 0) << ia.describe();
    EXPECT_EQ(w.ipamPlugin(World::env("DEL", good, pod), w.ipamConf("1.1.0")).status, 0);
  }
  EXPECT_TRUE(w.noAllocations());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 5: CNI_NETNS is a netns path
TEST(NetnsParameter, MissingOrInvalidNetnsOnAddAndCheckIsACleanError) {
  CONFORMANCE_WORLD(w);
  const std::string vf = w.vf();
  const auto before = linkState(w.host(), vf);
  const json c = w.conf("1.1.0", vf, w.ipam());
  const fs::path file = w.tmp() / "regular-file";
  writeFile(file, "not a namespace\n");
  for (const std::string& ns : {(w.tmp() / "nope").string(), file.string(), std::string("/proc/self/ns/mnt")}) {
    for (const std::string verb : {"ADD", "CHECK"}) {
      SCOPED_TRACE(verb + " CNI_NETNS=" + ns);
      CniEnv e;
      e.command = verb;
      e.containerId = "c1";
      e.netns = ns;
      e.ifName = "net1";
      json in = verb == "CHECK"
                    ? withPrev(c, json{{"cniVersion", "1.1.0"}, {"interfaces", {{{"name", "net1"}, {"sandbox", ns}}}}})
                    : c;
      Exec r = w.ibcni(e, in);
      EXPECT_NE(r.status, 0) << r.describe();
      EXPECT_NE(r.code(), 0U) << r.describe();
      EXPECT_NE(r.msg().find("CNI_NETNS"), std::string::npos) << r.describe();
    }
  }
  EXPECT_EQ(linkState(w.host(), vf), before);
  EXPECT_TRUE(w.records().empty());
  EXPECT_TRUE(w.noAllocations());
}

// Checklist item 5: CNI_NETNS is a netns path
TEST(NetnsParameter, DelWithNonExistentOrEmptyNetnsSucceeds) {
  CONFORMANCE_WORLD(w);
  const json c = w.conf("1.1.0", w.vf(), w.ipam());
  for (const std::string& ns : {(w.tmp() / "nope").string(), std::string()}) {
    SCOPED_TRACE("DEL CNI_NETNS=\"" + ns + "\"");
    CniEnv e;
    e.command = "DEL";
    e.containerId = "c1";
    e.netns = ns;
    e.ifName = "net1";
    Exec r = w.ibcni(e, c);
    EXPECT_EQ(r.status, 0) << r.describe();
    Exec i = w.ipamPlugin(e, w.ipamConf("1.1.0"));
    EXPECT_EQ(i.status, 0) << i.describe();
  }
}

// Checklist item 5: CNI_NETNS is a netns path
TEST(NetnsParameter, ProcPidNetnsPathIsAccepted) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  // /proc/<pid>/fd/<n> on the test's open handle stands in for /proc/<pid>/ns/net: a procfs path.
  const std::string path = testing::nsArg(pod.netns());
  CniEnv e = World::env("ADD", "c1", pod);
  e.netns = path;
  Exec add = w.ibcni(e, w.conf("1.0.0", vf));
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_TRUE(linkState(pod.netns(), "net1").has_value());
  e.command = "DEL";
  EXPECT_EQ(w.ibcni(e, w.conf("1.0.0", vf)).status, 0);
  w.expectPodEmpty(pod);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 6: CNI_IFNAME is used exactly, or the plugin returns an error
TEST(IfnameParameter, InvalidIfnamesAreCode4) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  for (const std::string bad : {"abcdefghijklmnop", ".", "..", "a/b", "a:b", "a b", "a\tb", "a\nb"}) {
    SCOPED_TRACE("CNI_IFNAME=" + bad);
    for (const std::string verb : {"ADD", "CHECK", "DEL"}) {
      expectError(w.ibcni(World::env(verb, "c1", pod, bad), c), 4, {"CNI_IFNAME"});
      expectError(w.ipamPlugin(World::env(verb, "c1", pod, bad), w.ipamConf("1.1.0")), 4, {"CNI_IFNAME"});
    }
  }
  w.expectNothingLeft(pod, vf, before);
}

// Checklist item 6: CNI_IFNAME is used exactly, or the plugin returns an error
TEST(IfnameParameter, TheExactIfnameIsUsedInTheContainer) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const std::string name : {"ib0", "fifteen-bytes-x", "eth_1.2-3"}) {
    SCOPED_TRACE(name);
    Exec add = w.ibcni(World::env("ADD", "c1", pod, name), w.conf("1.1.0", vf));
    ASSERT_EQ(add.status, 0) << add.describe();
    EXPECT_TRUE(linkState(pod.netns(), name).has_value()) << ::testing::PrintToString(linkNames(pod.netns()));
    EXPECT_EQ(add.parsed()["interfaces"][0].value("name", ""), name);
    EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod, name), w.conf("1.1.0", vf)).status, 0);
    w.expectPodEmpty(pod);
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 7: CNI_ARGS uses the form K=V;K2=V2
TEST(CniArgsParameter, KubernetesCniArgsAreAccepted) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  const std::string k8s =
      "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID=u";
  CniEnv e = World::env("ADD", "c1", pod);
  e.args = k8s;
  Exec add = w.ibcni(e, c);
  ASSERT_EQ(add.status, 0) << add.describe();
  e.command = "CHECK";
  EXPECT_EQ(w.ibcni(e, withPrev(c, add.parsed())).status, 0);
  e.command = "DEL";
  EXPECT_EQ(w.ibcni(e, withPrev(c, add.parsed())).status, 0);

  CniEnv i = World::env("ADD", "c2", pod);
  i.args = k8s;
  EXPECT_EQ(w.ipamPlugin(i, w.ipamConf("1.1.0")).status, 0);
  i.command = "DEL";
  EXPECT_EQ(w.ipamPlugin(i, w.ipamConf("1.1.0")).status, 0);
  // IgnoreUnknown=true and an unknown key.
  i.command = "ADD";
  i.args = "IgnoreUnknown=true;SOMETHING_ELSE=1";
  EXPECT_EQ(w.ipamPlugin(i, w.ipamConf("1.1.0")).status, 0);
}

// Checklist item 7: CNI_ARGS uses the form K=V;K2=V2
TEST(CniArgsParameter, MalformedOrUnknownCniArgsAreErrors) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  // A pair without '=' is malformed; an unknown key without IgnoreUnknown is refused (ibcni's
  // policy, as the Go reference library's LoadArgs).
  for (const std::string args : {"K8S_POD_NAME", "IgnoreUnknown=1;novalue", "FOO=bar"}) {
    SCOPED_TRACE("CNI_ARGS=" + args);
    CniEnv e = World::env("ADD", "c1", pod);
    e.args = args;
    Exec r = w.ibcni(e, c);
    EXPECT_EQ(r.code(), 4U) << r.describe();
    Exec i = w.ipamPlugin(e, w.ipamConf("1.1.0"));
    EXPECT_EQ(i.code(), 4U) << i.describe();
  }
  w.expectNothingLeft(pod, vf, before);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 8: CNI_PATH (ibcni: finding the delegated IPAM)
TEST(CniPathParameter, IpamIsFoundInAnyCniPathDirectory) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const fs::path empty = w.tmp() / "empty-bin";
  fs::create_directories(empty);
  Recorder rec(w.tmp() / "bin2", "rec-ipam");
  rec.setResult({{"cniVersion", "1.0.0"}, {"ips", {{{"address", "10.55.0.5/24"}, {"gateway", "10.55.0.1"}}}}});
  const json c = w.conf("1.0.0", vf, json{{"type", "rec-ipam"}});
  CniEnv e = World::env("ADD", "c1", pod);
  e.path = empty.string() + "::" + rec.dir().string() + ":";
  Exec add = w.ibcni(e, c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(resultAddresses(add.parsed()), std::vector<std::string>{"10.55.0.5/24"});
  EXPECT_EQ(rec.verbs(), std::vector<std::string>{"ADD"});
  e.command = "DEL";
  EXPECT_EQ(w.ibcni(e, c).status, 0);
  EXPECT_EQ(rec.verbs(), (std::vector<std::string>{"ADD", "DEL"}));
}

// Checklist item 8: CNI_PATH (ibcni: finding the delegated IPAM)
TEST(CniPathParameter, AddWithDelegatedIpamAndNoCniPathIsACleanError) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf(1500, true);
  const json c = w.conf("1.0.0", vf, json{{"type", "host-local"}, {"subnet", "10.56.0.0/24"}});
  for (const std::optional<std::string>& path : {std::optional<std::string>(), std::optional<std::string>("")}) {
    SCOPED_TRACE(path ? "CNI_PATH empty" : "CNI_PATH unset");
    CniEnv e = World::env("ADD", "c1", pod);
    e.path = path;
    Exec r = w.ibcni(e, c);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_NE(r.msg().find("CNI_PATH"), std::string::npos) << r.describe();
    EXPECT_EQ(linkState(w.host(), vf), before) << "the device was not put back";
    w.expectPodEmpty(pod);
    EXPECT_TRUE(w.records().empty());
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 9: Execution context: the plugin runs in the runtime's (host) netns
TEST(ExecutionContext, HostKeepsNoStrayInterfaceAndDelegatesRunInTheHostNetns) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  auto hostBefore = linkNames(w.host());
  Recorder rec(w.tmp() / "bin", "rec-ipam");
  rec.setResult({{"cniVersion", "1.0.0"}, {"ips", {{{"address", "10.55.0.5/24"}}}}});
  CniEnv e = World::env("ADD", "c1", pod);
  e.path = rec.dir().string();
  const json c = w.conf("1.0.0", vf, json{{"type", "rec-ipam"}});
  Exec add = w.ibcni(e, c);
  ASSERT_EQ(add.status, 0) << add.describe();
  auto hostAfter = linkNames(w.host());
  hostBefore.erase(std::remove(hostBefore.begin(), hostBefore.end(), vf), hostBefore.end());
  EXPECT_EQ(hostAfter, hostBefore) << "the host gained or kept an interface besides moving " << vf;
  EXPECT_EQ(linkNames(pod.netns()), (std::vector<std::string>{"lo", "net1"}));
  auto calls = rec.calls();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].netns, "net:[" + std::to_string(w.host().inode()) + "]")
      << "the IPAM plugin was not run from the host's network namespace";
  e.command = "DEL";
  EXPECT_EQ(w.ibcni(e, c).status, 0);
}

// Checklist item 9: Execution context: the plugin runs in the runtime's (host) netns
TEST(ExecutionContext, OwnNetnsAsCniNetnsIsRefused) {
  CONFORMANCE_WORLD(w);
  const std::string vf = w.vf(1500, true);
  const auto before = linkState(w.host(), vf);
  CniEnv e;
  e.command = "ADD";
  e.containerId = "c1";
  e.netns = w.hostPath();
  e.ifName = "net1";
  Exec r = w.ibcni(e, w.conf("1.0.0", vf, w.ipam()));
  EXPECT_NE(r.status, 0) << r.describe();
  EXPECT_NE(r.msg().find("CNI_NETNS"), std::string::npos) << r.describe();
  EXPECT_EQ(linkState(w.host(), vf), before);
  EXPECT_FALSE(linkState(w.host(), "net1").has_value());
  EXPECT_TRUE(w.noAllocations());
}

// ---------------------------------------------------------------------------------------------
// Checklist item 10: Exit status: 0 on success, non-zero on failure
TEST(ExitStatus, ZeroOnSuccessNonZeroOnFailureForEveryVerb) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  EXPECT_EQ(add.status, 0) << add.describe();
  const json prev = add.parsed();
  EXPECT_EQ(w.ibcni(World::env("CHECK", "c1", pod), withPrev(c, prev)).status, 0);
  EXPECT_EQ(w.ibcni(networkEnv("STATUS"), w.conf("1.1.0", w.vf(), w.ipam())).status, 0);
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), withPrev(c, prev)).status, 0);
  json bad = c;
  bad["cniVersion"] = "9.9.9";
  for (const std::string verb : {"ADD", "CHECK", "DEL", "GC", "STATUS"}) {
    SCOPED_TRACE(verb);
    CniEnv e = verb == "GC" || verb == "STATUS" ? networkEnv(verb) : World::env(verb, "c1", pod);
    EXPECT_NE(w.ibcni(e, bad).status, 0);
    json ipamBad = w.ipamConf("9.9.9");
    EXPECT_NE(w.ipamPlugin(e, ipamBad).status, 0);
  }
  Exec ia = w.ipamPlugin(World::env("ADD", "c1", pod), w.ipamConf("1.1.0"));
  EXPECT_EQ(ia.status, 0) << ia.describe();
  EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), w.ipamConf("1.1.0")).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 11: The error object goes on stdout
TEST(ErrorChannel, ErrorObjectIsOnStdout) {
  CONFORMANCE_WORLD(w);
  TestNetns& pod = w.pod();
  for (bool ipam : {false, true}) {
    SCOPED_TRACE(ipam ? "ibcni-ipam" : "ibcni");
    CniEnv e = World::env("ADD", "c1", pod);
    Exec r = ipam ? w.ipamRaw(e, std::string("{bad")) : w.ibcniRaw(e, std::string("{bad"));
    expectError(r, 6);
    EXPECT_FALSE(r.msg().empty());
    json j = r.parsed();
    EXPECT_TRUE(j.contains("code") && j.contains("msg")) << r.describe();
    EXPECT_EQ(r.err.find("\"code\""), std::string::npos) << "the error object went to stderr\n" << r.describe();
  }
}

// ---------------------------------------------------------------------------------------------
// Checklist item 12: stdout holds one JSON document
TEST(StdoutChannel, StdoutIsOneJsonDocumentAtMaximumLogging) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.1.0", vf, w.ipam());
  c["logLevel"] = "debug";
  for (const std::string verb : {"ADD", "CHECK", "DEL"}) {
    SCOPED_TRACE(verb);
    Exec r = w.ibcni(World::env(verb, "c1", pod), c);
    if (verb == "ADD") {
      ASSERT_EQ(r.status, 0) << r.describe();
      ASSERT_TRUE(oneJsonDocument(r.out).has_value()) << r.describe();
      c["prevResult"] = r.parsed();
    }
    EXPECT_FALSE(r.err.empty()) << "debug logging printed nothing: is it going to stdout?";
    EXPECT_EQ(r.out.find("[debug]"), std::string::npos) << r.describe();
  }
  json ic = w.ipamConf("1.1.0");
  ic["logLevel"] = "debug";
  Exec i = w.ipamPlugin(World::env("ADD", "c1", pod), ic);
  ASSERT_EQ(i.status, 0) << i.describe();
  EXPECT_TRUE(oneJsonDocument(i.out).has_value()) << i.describe();
  EXPECT_EQ(w.ipamPlugin(World::env("DEL", "c1", pod), ic).out, "");
}

// ---------------------------------------------------------------------------------------------
// Checklist item 13: stderr is free-form
TEST(StderrChannel, LogsGoToStderrOrLogFileNeverStdout) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  json c = w.conf("1.1.0", vf, w.ipam());
  const fs::path log = w.tmp() / "ibcni.log";
  c["logFile"] = log.string();
  Exec add = w.ibcni(World::env("ADD", "c1", pod), c);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(w.ibcni(World::env("DEL", "c1", pod), c).status, 0);
  const std::string text = readFile(log);
  EXPECT_NE(text.find("c1"), std::string::npos) << "logFile holds nothing about c1:\n" << text;
  EXPECT_NE(text.find("ADD"), std::string::npos) << text;
  // Free-form stderr next to a valid result: a runtime copies it and never parses it.
  c.erase("logFile");
  Exec again = w.ibcni(World::env("ADD", "c2", pod), c);
  ASSERT_EQ(again.status, 0) << again.describe();
  EXPECT_FALSE(again.err.empty());
  EXPECT_FALSE(oneJsonDocument(again.err).has_value()) << "stderr is not meant to be parsed";
  EXPECT_EQ(w.ibcni(World::env("DEL", "c2", pod), c).status, 0);
}

// ---------------------------------------------------------------------------------------------
// Checklist item 14: Well-known error codes
TEST(WellKnownErrorCodes, EachWellKnownCodeForItsCause) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  const json c = w.conf("1.1.0", vf, w.ipam());
  const json ic = w.ipamConf("1.1.0");
  json v = c;
  v["cniVersion"] = "9.9.9";
  json iv = ic;
  iv["cniVersion"] = "9.9.9";
  expectError(w.ibcni(World::env("ADD", "c1", pod), v), 1);
  expectError(w.ipamPlugin(World::env("ADD", "c1", pod), iv), 1);
  CniEnv noIf = World::env("ADD", "c1", pod);
  noIf.ifName.reset();
  expectError(w.ibcni(noIf, c), 4, {"CNI_IFNAME"});
  expectError(w.ipamPlugin(noIf, ic), 4, {"CNI_IFNAME"});
  expectError(w.ibcniRaw(World::env("ADD", "c1", pod), std::nullopt), 5);
  expectError(w.ipamRaw(World::env("ADD", "c1", pod), std::nullopt), 5);
  expectError(w.ibcniRaw(World::env("ADD", "c1", pod), std::string("{bad")), 6);
  expectError(w.ipamRaw(World::env("ADD", "c1", pod), std::string("{bad")), 6);
  json noName = c;
  noName.erase("name");
  expectError(w.ibcni(World::env("ADD", "c1", pod), noName), 7, {"name"});
  json badPkey = c;
  badPkey["pkey"] = "0xzz";
  expectError(w.ibcni(World::env("ADD", "c1", pod), badPkey), 7, {"pkey"});
  json badRange = ic;
  badRange["ipam"]["ranges"][0][0]["subnet"] = "10.1.2.0/33";
  expectError(w.ipamPlugin(World::env("ADD", "c1", pod), badRange), 7);
  w.expectNothingLeft(pod);
}

// Checklist item 14: Well-known error codes
TEST(WellKnownErrorCodes, TryAgainLaterIs11) {
  CONFORMANCE_WORLD(w);
  TestNetns& podA = w.pod("podA");
  TestNetns& podB = w.pod("podB");
  const std::string vfA = w.vf();
  const std::string vfB = w.vf();
  // A requested address held by a live attachment frees up when that pod goes: transient.
  json a = w.conf("1.1.0", vfA, w.ipam());
  a["runtimeConfig"] = {{"ips", {"10.77.0.42/24"}}};
  json b = w.conf("1.1.0", vfB, w.ipam());
  b["runtimeConfig"] = {{"ips", {"10.77.0.42/24"}}};
  Exec addA = w.ibcni(World::env("ADD", "cA", podA), a);
  ASSERT_EQ(addA.status, 0) << addA.describe();
  expectError(w.ibcni(World::env("ADD", "cB", podB), b), 11);
  w.expectPodEmpty(podB);
  json ia = w.ipamConf("1.1.0");
  ia["runtimeConfig"] = {{"ips", {"10.78.0.42/24"}}};
  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "cA", podA), ia).status, 0);
  expectError(w.ipamPlugin(World::env("ADD", "cB", podB), ia), 11);
  EXPECT_EQ(w.ibcni(World::env("DEL", "cA", podA), a).status, 0);
  EXPECT_EQ(w.ipamPlugin(World::env("DEL", "cA", podA), ia).status, 0);
}

// Checklist item 14: Well-known error codes
TEST(WellKnownErrorCodes, PluginSpecificCodesAre100AndAbove) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  // 100: no such device; 103: CNI_IFNAME taken in the pod; 108 (ibcni-ipam): range exhausted.
  Exec missing = w.ibcni(World::env("ADD", "c1", pod), w.conf("1.1.0", "nosuchdev0"));
  EXPECT_GE(missing.code(), 100U) << missing.describe();
  ip(pod.netns(), {"link", "add", "net1", "type", "veth", "peer", "name", "podpeer"});
  Exec clash = w.ibcni(World::env("ADD", "c1", pod), w.conf("1.1.0", vf));
  EXPECT_GE(clash.code(), 100U) << clash.describe();
  json small = w.ipamConf("1.1.0", "10.78.0.0/30");  // one address to hand out: 10.78.0.2
  ASSERT_EQ(w.ipamPlugin(World::env("ADD", "c1", pod), small).status, 0);
  Exec full = w.ipamPlugin(World::env("ADD", "c2", pod), small);
  EXPECT_GE(full.code(), 100U) << full.describe();
}

// ---------------------------------------------------------------------------------------------
// Checklist item 15: Network name is required and valid
TEST(NetworkName, MissingOrInvalidNameIsCode7ForEveryVerb) {
  CONFORMANCE_WORLD(w);
  const auto [pod, vf, before] = w.podAndVf();
  for (const std::string verb : {"ADD", "CHECK", "DEL", "GC", "STATUS"}) {
    CniEnv e = verb == "GC" || verb == "STATUS" ? networkEnv(verb) : World::env(verb, "c1", pod);
    for (const std::optional<std::string>& name :
         {std::optional<std::string>(), std::optional<std::string>(""), std::optional<std::string>("-x"),
          std::optional<std::string>("a/b"), std::optional<std::string>("a b")}) {
      SCOPED_TRACE(verb + " name " + (name ? "\"" + *name + "\"" : "missing"));
      json c = w.conf("1.1.0", vf, w.ipam());
      json ic = w.ipamConf("1.1.0");
      if (name) {
        c["name"] = *name;
        ic["name"] = *name;
      } else {
        c.erase("name");
        ic.erase("name");
      }
      expectError(w.ibcni(e, c), 7, {"name"});
      expectError(w.ipamPlugin(e, ic), 7, {"name"});
    }
  }
  EXPECT_EQ(linkState(w.host(), vf), before);
  w.expectPodEmpty(pod);
}

}  // namespace
}  // namespace ibcni::conformance
