// SPDX-License-Identifier: Apache-2.0
// Hostile CNI_* environment (code 4) and network names (code 7): interface names and container
// IDs that would escape ibcni's and ibcni-ipam's directories or break names and logs, and CNI_NETNS
// paths that are not a pod's network namespace (a file, a directory, a FIFO that must not block,
// the host's own namespace, a symlink loop). Nothing may change: no link moved or renamed, no
// record, no allocation, no file.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "hostile/hostile.h"

namespace ibcni::hostile {
namespace {

using conformance::withPrev;

struct BadValue {
  std::string value;
  std::string shown;  ///< how the message must show it (escaped and quoted)
};

CniEnv withIfName(CniEnv e, const std::string& ifName) {
  e.ifName = ifName;
  return e;
}

// A CHECK request needs a prevResult to get past the configuration.
json checkConf(const World& w, const std::string& vf) {
  return withPrev(w.conf("1.1.0", vf, w.ipam()),
                  {{"cniVersion", "1.1.0"}, {"interfaces", json::array({{{"name", "net1"}}})}});
}

TEST(HostileEnv, InterfaceNamesThatAreNoInterfaceNameAreCode4) {
  HOSTILE_SCENE(s);
  const std::vector<BadValue> bad = {
      {"a/b", "\"a/b\""},
      {"..", "\"..\""},
      {".", "\".\""},
      {"abcdefghijklmnop", "\"abcdefghijklmnop\""},  // 16 bytes: IFNAMSIZ - 1 is 15
      {"net 1", "\"net 1\""},
      {"net\t1", "\"net\\x091\""},
      {"net\n1", "\"net\\x0a1\""},
      {"net\x01", "\"net\\x01\""},
      {"n\x1b[31m", "\"n\\x1b[31m\""},
      {"\xff\xfe", "\"\\xff\\xfe\""},
      {"ab\xc3", "\"ab\\xc3\""},  // a UTF-8 sequence cut short
      {"a:b", "\"a:b\""},
  };
  const NodeState before = capture(s.w, {s.pod});
  for (const auto& b : bad) {
    SCOPED_TRACE("CNI_IFNAME=" + b.shown);
    for (const std::string verb : {"ADD", "CHECK", "DEL"}) {
      SCOPED_TRACE(verb);
      const json c = verb == "CHECK" ? checkConf(s.w, s.vf) : s.w.conf("1.1.0", s.vf, s.w.ipam());
      expectRefused(s.w.ibcni(withIfName(World::env(verb, "c1", *s.pod), b.value), c), 4,
                    {"CNI_IFNAME=" + b.shown, "1-15 bytes"});
    }
    for (const std::string verb : {"ADD", "DEL"}) {
      expectRefused(s.w.ipamPlugin(withIfName(World::env(verb, "c1", *s.pod), b.value), s.w.ipamConf("1.1.0")), 4,
                    {"CNI_IFNAME", b.shown});
    }
  }
  // Empty is missing.
  expectRefused(s.w.ibcni(withIfName(World::env("ADD", "c1", *s.pod), ""), s.w.conf("1.1.0", s.vf, s.w.ipam())), 4,
                {"CNI_IFNAME", "missing"});
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_TRUE(s.w.noAllocations());
  // The positive control: a 15-byte name (and a UTF-8 one) is a valid interface name.
  for (const std::string ok : {"abcdefghijklmno", "n\xc3\xa9t1"}) {
    CniEnv e = withIfName(World::env("ADD", "c1", *s.pod), ok);
    Exec add = s.w.ibcni(e, s.w.conf("1.1.0", s.vf, s.w.ipam()));
    ASSERT_EQ(add.status, 0) << add.describe();
    e.command = "DEL";
    EXPECT_EQ(s.w.ibcni(e, s.w.conf("1.1.0", s.vf, s.w.ipam())).status, 0);
  }
}

// The container ID names a directory of ibcni's state and a file of ibcni-ipam's store: '/' and
// ".." would leave them. The spec's rule (alphanumeric, then '_', '.', '-'), and at most 200 bytes.
TEST(HostileEnv, ContainerIdsThatEscapeOrBreakPathsAreCode4) {
  HOSTILE_SCENE(s);
  const std::vector<BadValue> bad = {
      {"a/b", "\"a/b\""},
      {"..", "\"..\""},
      {"../../../etc", "\"../../../etc\""},
      {".", "\".\""},
      {".hidden", "\".hidden\""},
      {"-rf", "\"-rf\""},
      {"a b", "\"a b\""},
      {"c\n1", "\"c\\x0a1\""},
      {"c\xff", "\"c\\xff\""},
      {std::string(201, 'c'), "... (201 bytes)"},
  };
  const NodeState before = capture(s.w, {s.pod});
  for (const auto& b : bad) {
    SCOPED_TRACE("CNI_CONTAINERID=" + b.shown);
    for (const std::string verb : {"ADD", "CHECK", "DEL"}) {
      SCOPED_TRACE(verb);
      const json c = verb == "CHECK" ? checkConf(s.w, s.vf) : s.w.conf("1.1.0", s.vf);
      expectRefused(s.w.ibcni(World::env(verb, b.value, *s.pod), c), 4, {"CNI_CONTAINERID", b.shown});
    }
    for (const std::string verb : {"ADD", "DEL"}) {
      expectRefused(s.w.ipamPlugin(World::env(verb, b.value, *s.pod), s.w.ipamConf("1.1.0")), 4,
                    {"CNI_CONTAINERID", b.shown});
    }
  }
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_TRUE(s.w.noAllocations());
  // The positive control: 200 bytes is a container ID.
  const std::string longest(200, 'c');
  Exec add = s.w.ibcni(World::env("ADD", longest, *s.pod), s.w.conf("1.1.0", s.vf, s.w.ipam()));
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(s.w.ibcni(World::env("DEL", longest, *s.pod), s.w.conf("1.1.0", s.vf, s.w.ipam())).status, 0);
}

// The network name names a directory of ibcni's state and ibcni-ipam's store.
TEST(HostileEnv, NetworkNamesThatEscapeOrBreakPathsAreCode7) {
  HOSTILE_SCENE(s);
  const std::vector<BadValue> bad = {
      {"a/b", "\"a/b\""},
      {"..", "\"..\""},
      {"../../etc", "\"../../etc\""},
      {".", "\".\""},
      {".hidden", "\".hidden\""},
      {"a b", "\"a b\""},
      {"a\nb", "\"a\\x0ab\""},
      {"caf\xc3\xa9", "\"caf\\xc3\\xa9\""},
      {std::string(300, 'n'), "... (300 bytes)"},
  };
  const NodeState before = capture(s.w, {s.pod});
  for (const auto& b : bad) {
    SCOPED_TRACE("name " + b.shown);
    json c = s.w.conf("1.1.0", s.vf, s.w.ipam());
    c["name"] = b.value;
    for (const std::string verb : {"ADD", "DEL"}) {
      expectRefused(s.w.ibcni(World::env(verb, "c1", *s.pod), c), 7, {"name", b.shown});
    }
    json ic = s.w.ipamConf("1.1.0");
    ic["name"] = b.value;
    for (const std::string verb : {"ADD", "DEL"}) {
      // ibcni-ipam's own rule allows 200 bytes: the 300-byte name is refused, its message differs.
      expectRefused(s.w.ipamPlugin(World::env(verb, "c1", *s.pod), ic), 7, {"name"});
    }
  }
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_TRUE(s.w.noAllocations());
}

// CNI_NETNS that is not a pod's network namespace. ADD and CHECK refuse with 4 naming it; DEL
// (which must succeed when the pod is gone) succeeds without touching anything; none blocks.
TEST(HostileEnv, NetnsPathsThatAreNoPodNamespace) {
  HOSTILE_SCENE(s);
  const fs::path tmp = s.w.tmp();
  const fs::path file = tmp / "regular";
  conformance::writeFile(file, "not a namespace\n");
  const fs::path fifo = tmp / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink(tmp / "loop-b", tmp / "loop-a");
  fs::create_symlink(tmp / "loop-a", tmp / "loop-b");
  const std::string ifName = testing::randomIfName("h");
  struct Case {
    std::string path;
    std::vector<std::string> words;  ///< what the ADD message names besides the path
  };
  const std::vector<Case> cases = {
      {file.string(), {"is not a network namespace"}},
      {tmp.string(), {"is not a network namespace"}},
      {(tmp / "none").string(), {"does not exist"}},
      {fifo.string(), {"is not a network namespace"}},
      {(tmp / "loop-a").string(), {"cannot open"}},
      {"/dev/null", {"is not a network namespace"}},
      {"/proc/self/ns/net", {"ibcni's own network namespace"}},
      {s.w.hostPath(), {"ibcni's own network namespace"}},
      // PID 1's namespace: "the node's own" where the plugin can open it, EACCES where (as in some
      // containers) it cannot; never a pod.
      {"/proc/1/ns/net", {}},
  };
  auto node = os::Netns::open("/proc/1/ns/net");
  const std::vector<std::string> nodeLinks = node ? conformance::linkNames(*node) : std::vector<std::string>{};
  const NodeState before = capture(s.w, {s.pod});
  for (const auto& c : cases) {
    SCOPED_TRACE("CNI_NETNS=" + c.path);
    CniEnv e = World::env("ADD", "c1", *s.pod, ifName);
    e.netns = c.path;
    auto words = c.words;
    words.push_back("CNI_NETNS=\"" + c.path + "\"");
    const auto start = std::chrono::steady_clock::now();
    expectRefused(s.w.ibcni(e, s.w.conf("1.1.0", s.vf, s.w.ipam())), 4, words);
    e.command = "CHECK";
    expectRefused(s.w.ibcni(e, checkConf(s.w, s.vf)), 4, words);
    e.command = "DEL";
    Exec del = s.w.ibcni(e, s.w.conf("1.1.0", s.vf, s.w.ipam()));
    EXPECT_EQ(del.status, 0) << del.describe();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "a verb blocked";
  }
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  if (node) {
    const auto after = conformance::linkNames(*node);
    EXPECT_EQ(after, nodeLinks) << "the node's own namespace changed";
    if (std::find(after.begin(), after.end(), ifName) != after.end()) {
      (void)testing::runIp(*node, {"link", "del", ifName});  // a regression moved the VF there: take it back out
    }
  }
  // Malformed paths are refused by every verb that reads them.
  for (const BadValue& b : std::vector<BadValue>{{"netns/x", "\"netns/x\""},
                                                 {"/run/netns/a\nb", "\"/run/netns/a\\x0ab\""},
                                                 {"/run/netns/\xff", "\"/run/netns/\\xff\""},
                                                 {"/" + std::string(5000, 'p'), "... (5001 bytes)"}}) {
    SCOPED_TRACE("CNI_NETNS=" + b.shown);
    for (const std::string verb : {"ADD", "DEL"}) {
      CniEnv e = World::env(verb, "c1", *s.pod);
      e.netns = b.value;
      expectRefused(s.w.ibcni(e, s.w.conf("1.1.0", s.vf, s.w.ipam())), 4, {"CNI_NETNS=", b.shown});
      expectRefused(s.w.ipamPlugin(e, s.w.ipamConf("1.1.0")), 4, {"CNI_NETNS"});
    }
  }
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_TRUE(s.w.noAllocations());
}

// CNI_ARGS values end up in records, logs and messages: huge, control or non-UTF-8 values are
// refused (4) with a bounded message, by ibcni and ibcni-ipam alike.
TEST(HostileEnv, CniArgsValuesAreBoundedAndPrintable) {
  HOSTILE_SCENE(s);
  const NodeState before = capture(s.w, {s.pod});
  const std::vector<BadValue> bad = {
      {"FOO=" + std::string(100000, 'v'), "(100004 bytes)"},
      {"IP=" + std::string(100000, '9'), "(100000 bytes)"},
      {"K8S_POD_NAME=p\xff", "\"K8S_POD_NAME=p\\xff\""},
      {"K8S_POD_NAMESPACE=ns\n;IgnoreUnknown=1", "\"K8S_POD_NAMESPACE=ns\\x0a\""},
      {"IgnoreUnknown=1;MAC=\x1b]0;owned\x07", "\"MAC=\\x1b]0\""},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE("CNI_ARGS " + b.shown);
    CniEnv e = World::env("ADD", "c1", *s.pod);
    e.args = b.value;
    expectRefused(s.w.ibcni(e, s.w.conf("1.1.0", s.vf, s.w.ipam())), 4, {"CNI_ARGS", b.shown});
    expectRefused(s.w.ipamPlugin(e, s.w.ipamConf("1.1.0")), 4, {"CNI_ARGS", b.shown});
  }
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_TRUE(s.w.noAllocations());
}

}  // namespace
}  // namespace ibcni::hostile
