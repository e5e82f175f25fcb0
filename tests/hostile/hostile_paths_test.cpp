// SPDX-License-Identifier: Apache-2.0
// Configured paths that would make root write where the configuration's author could not:
// stateDir and ipam.dataDir escaping through ".." or through a symbolic link someone else owns, or
// ending in a directory others can write; logFile naming a system file, a symbolic link, a FIFO, a
// second hard link; files ibcni only reads (device-info file, resolv.conf) that are FIFOs or devices.
// Each is error 7 naming the field, the value and the rule; nothing changes (the victims least of
// all); the production shapes (a root-owned symbolic link on the way, a sticky /tmp above, a .log
// file in an existing directory) keep working.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "hostile/hostile.h"

namespace ibcni::hostile {
namespace {

using conformance::readFile;
using conformance::withPrev;
using conformance::writeFile;

constexpr uid_t kNobody = 65534;

// A tree of traps under the world's temporary directory: a victim directory and file, and ways to
// reach them.
struct Traps {
  fs::path victimDir;   // root's directory the configuration must not reach
  fs::path victimFile;  // a file in it
  fs::path userLink;    // -> victimDir, a symbolic link owned by uid 65534
  fs::path usersDir;    // a directory owned by uid 65534
  fs::path openDir;     // mode 0777, not sticky
  fs::path rootLink;    // -> victimDir/../real, root's symbolic link: followed
  fs::path sticky;      // mode 1777, like /tmp
};

Traps makeTraps(const fs::path& tmp) {
  Traps t;
  t.victimDir = tmp / "victim";
  fs::create_directory(t.victimDir);
  t.victimFile = t.victimDir / "precious";
  writeFile(t.victimFile, "precious\n");
  t.userLink = tmp / "userlink";
  fs::create_directory_symlink(t.victimDir, t.userLink);
  EXPECT_EQ(::lchown(t.userLink.c_str(), kNobody, kNobody), 0);
  t.usersDir = tmp / "users";
  fs::create_directory(t.usersDir);
  EXPECT_EQ(::chown(t.usersDir.c_str(), kNobody, kNobody), 0);
  t.openDir = tmp / "open";
  fs::create_directory(t.openDir);
  fs::permissions(t.openDir, fs::perms::all);
  fs::create_directory(tmp / "real");
  t.rootLink = tmp / "rootlink";
  fs::create_directory_symlink(tmp / "real", t.rootLink);
  t.sticky = tmp / "sticky";
  fs::create_directory(t.sticky);
  fs::permissions(t.sticky, fs::perms::all | fs::perms::sticky_bit);
  return t;
}

struct PathCase {
  std::string value;
  std::vector<std::string> words;  ///< the rule the message must name
  bool spelling = false;           ///< refused by its spelling (the configuration is invalid for every verb)
};

std::vector<PathCase> hostileDirs(const fs::path& tmp, const Traps& t) {
  return {
      {(tmp / "state/../victim").string(), {"\"..\" component"}},
      {(tmp / "./state").string(), {"\".\" component"}},
      {"relative/state", {"absolute"}},
      {(tmp / "state\nx").string(), {"control character"}},
      {"/" + std::string(2000, 's'), {"longer than 1024 bytes"}},
      {(t.userLink / "state").string(), {"userlink is a symbolic link owned by uid 65534"}},
      {(t.usersDir / "state").string(), {"users is owned by uid 65534"}},
      {t.openDir.string(), {"writable by group or others"}},
      {(t.openDir / "state").string(), {"writable by group or others"}},
  };
}

TEST(HostilePaths, StateDirOutsideRootsControlIsCode7) {
  HOSTILE_SCENE(s);
  const fs::path tmp = s.w.tmp();
  const Traps t = makeTraps(tmp);
  const NodeState before = capture(s.w, {s.pod});
  auto cases = hostileDirs(tmp, t);
  // The state directory itself must not be writable by others even when sticky (ibcni-ipam's
  // store is a directory below dataDir, which may be sticky, like /tmp).
  cases.push_back({t.sticky.string(), {"writable by group or others"}});
  for (const auto& c : cases) {
    SCOPED_TRACE("stateDir " + c.value.substr(0, 200));
    json conf = s.w.conf("1.1.0", s.vf, s.w.ipam());
    conf["stateDir"] = c.value;
    auto words = c.words;
    words.push_back("invalid stateDir");
    for (const std::string verb : {"ADD", "DEL"}) {
      expectRefused(s.w.ibcni(World::env(verb, "c1", *s.pod), conf), 7, words);
    }
    expectRefused(s.w.ibcni(World::env("CHECK", "c1", *s.pod),
                            withPrev(conf, {{"cniVersion", "1.1.0"}, {"interfaces", json::array()}})),
                  7, words);
    Exec status = s.w.ibcni(conformance::networkEnv("STATUS"), conf);
    EXPECT_EQ(status.code(), 7U) << status.describe();
  }
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_TRUE(s.w.noAllocations());

  // The production shapes work: a root-owned symbolic link on the way (/var/run -> /run), a sticky
  // directory above (/tmp); the directory is created 0700.
  for (const fs::path& dir : {t.rootLink / "state", t.sticky / "state"}) {
    SCOPED_TRACE("stateDir " + dir.string());
    json conf = s.w.conf("1.1.0", s.vf, s.w.ipam());
    conf["stateDir"] = dir.string();
    Exec add = s.w.ibcni(World::env("ADD", "c1", *s.pod), conf);
    ASSERT_EQ(add.status, 0) << add.describe();
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700U);
    EXPECT_EQ(s.w.ibcni(World::env("DEL", "c1", *s.pod), conf).status, 0);
  }
}

TEST(HostilePaths, IpamDataDirOutsideRootsControlIsCode7) {
  HOSTILE_SCENE(s);
  const fs::path tmp = s.w.tmp();
  const Traps t = makeTraps(tmp);
  const NodeState before = capture(s.w, {s.pod});
  for (const auto& c : hostileDirs(tmp, t)) {
    SCOPED_TRACE("ipam.dataDir " + c.value.substr(0, 200));
    json ic = s.w.ipamConf("1.1.0");
    ic["ipam"]["dataDir"] = c.value;
    for (const std::string verb : {"ADD", "DEL"}) {
      // The spelling rules quote the value as JSON; the directory rules name the component.
      expectRefused(s.w.ipamPlugin(World::env(verb, "c1", *s.pod), ic), 7, {"ipam.dataDir", c.words.front()});
    }
    // The embedded IPAM, in ibcni: the same refusal, and the VF is back where it was.
    json conf = s.w.conf("1.1.0", s.vf, s.w.ipam());
    conf["ipam"]["dataDir"] = c.value;
    expectRefused(s.w.ibcni(World::env("ADD", "c1", *s.pod), conf), 7, {"ipam.dataDir", c.words.front()});
  }
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_TRUE(s.w.noAllocations());

  json ic = s.w.ipamConf("1.1.0");
  ic["ipam"]["dataDir"] = (t.rootLink / "ipam").string();
  Exec add = s.w.ipamPlugin(World::env("ADD", "c1", *s.pod), ic);
  ASSERT_EQ(add.status, 0) << add.describe();
  struct stat st {};
  ASSERT_EQ(::stat((tmp / "real" / "ipam" / s.w.ipamNetwork()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700U);
  EXPECT_EQ(s.w.ipamPlugin(World::env("DEL", "c1", *s.pod), ic).status, 0);
}

TEST(HostilePaths, LogFileThatIsNotIbcnisOwnIsCode7) {
  HOSTILE_SCENE(s);
  const fs::path tmp = s.w.tmp();
  const Traps t = makeTraps(tmp);
  fs::create_symlink(t.victimFile, tmp / "link.log");
  ASSERT_EQ(::mkfifo((tmp / "fifo.log").c_str(), 0600), 0);
  fs::create_hard_link(t.victimFile, tmp / "hard.log");
  fs::create_directory(tmp / "dir.log");
  // Stand-ins for /etc/shadow and ~/.ssh/authorized_keys (the rule refuses them by name; a
  // regression must not damage this machine's own: tests/hostile/hostile_fakes_test.cpp checks the
  // real names against the rule).
  const fs::path shadow = t.victimDir / "shadow";
  writeFile(shadow, "root:*:19000:0:99999:7:::\n");
  fs::create_directory(t.victimDir / ".ssh");
  const fs::path keys = t.victimDir / ".ssh" / "authorized_keys";
  writeFile(keys, "ssh-ed25519 AAAA admin\n");
  const std::vector<PathCase> cases = {
      {shadow.string(), {"ending in \".log\""}, true},
      {keys.string(), {"ending in \".log\""}, true},
      {"relative.log", {"absolute"}, true},
      {(tmp / "x/../victim/precious.log").string(), {"\"..\" component"}, true},
      {(tmp / "link.log").string(), {"is a symbolic link"}},
      {(tmp / "fifo.log").string(), {"is a FIFO"}},
      {(tmp / "hard.log").string(), {"has 2 hard links"}},
      {(tmp / "dir.log").string(), {"is a directory"}},
      {(t.userLink / "x.log").string(), {"is a symbolic link owned by uid 65534"}},
  };
  const NodeState before = capture(s.w, {s.pod});
  for (const auto& c : cases) {
    SCOPED_TRACE("logFile " + c.value);
    json conf = s.w.conf("1.1.0", s.vf, s.w.ipam());
    conf["logFile"] = c.value;
    auto words = c.words;
    words.push_back("invalid logFile");
    const auto start = std::chrono::steady_clock::now();
    expectRefused(s.w.ibcni(World::env("ADD", "c1", *s.pod), conf), 7, words);
    expectRefused(s.w.ibcni(World::env("CHECK", "c1", *s.pod),
                            withPrev(conf, {{"cniVersion", "1.1.0"}, {"interfaces", json::array()}})),
                  7, words);
    // A misspelt logFile is an invalid configuration for every verb; a log file refused when
    // opened never blocks DEL: it logs to stderr and succeeds.
    Exec del = s.w.ibcni(World::env("DEL", "c1", *s.pod), conf);
    if (c.spelling) {
      expectRefused(del, 7, words);
    } else {
      EXPECT_EQ(del.status, 0) << del.describe();
      EXPECT_NE(del.err.find("cannot use logFile"), std::string::npos) << del.describe();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "a verb blocked";
  }
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_EQ(readFile(t.victimFile), "precious\n");
  EXPECT_EQ(readFile(shadow), "root:*:19000:0:99999:7:::\n");
  EXPECT_EQ(readFile(keys), "ssh-ed25519 AAAA admin\n");
  EXPECT_TRUE(s.w.noAllocations());

  // A missing directory is not created: ADD logs to stderr and succeeds.
  json conf = s.w.conf("1.1.0", s.vf, s.w.ipam());
  conf["logFile"] = (tmp / "nodir" / "ibcni.log").string();
  Exec add = s.w.ibcni(World::env("ADD", "c1", *s.pod), conf);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_NE(add.err.find("cannot use logFile"), std::string::npos) << add.describe();
  EXPECT_FALSE(fs::exists(tmp / "nodir"));
  EXPECT_EQ(s.w.ibcni(World::env("DEL", "c1", *s.pod), conf).status, 0);
}

// The log file itself: created 0640, appended to, and no value can forge a line of its own.
TEST(HostilePaths, LogLinesCannotBeForged) {
  HOSTILE_SCENE(s);
  const fs::path log = s.w.tmp() / "ibcni.log";
  json conf = s.w.conf("1.1.0", s.vf, s.w.ipam());
  conf["logFile"] = log.string();
  conf["\nFORGED config key"] = 1;  // unknown keys are logged
  CniEnv bad = World::env("ADD", "c1", *s.pod, "x\nFORGED ifname");
  expectRefused(s.w.ibcni(bad, conf), 4, {"CNI_IFNAME"});
  Exec add = s.w.ibcni(World::env("ADD", "c1", *s.pod), conf);
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(s.w.ibcni(World::env("DEL", "c1", *s.pod), conf).status, 0);
  const std::string text = readFile(log);
  EXPECT_NE(text.find("\\x0aFORGED ifname"), std::string::npos) << text;
  EXPECT_NE(text.find("\\x0aFORGED config key"), std::string::npos) << text;
  EXPECT_EQ(text.find("\nFORGED"), std::string::npos) << text;
  struct stat st {};
  ASSERT_EQ(::stat(log.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640U);
}

// A device-info file ibcni would write (nothing there yet) must be in the device-info tree
// (/var/run/k8s.cni.cncf.io/devinfo/), and the name must not be a symbolic link: error 7 before
// any change, and nothing is created where the path (or the link) points.
TEST(HostilePaths, DeviceInfoFileIsWrittenOnlyInTheDeviceInfoTree) {
  HOSTILE_SCENE(s);
  const fs::path target = s.w.tmp() / "created-through-the-link";
  const fs::path link = s.w.tmp() / "devinfo-link";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  const NodeState before = capture(s.w, {s.pod});
  for (const std::string& path : {(s.w.tmp() / "devinfo.json").string(), link.string(),
                                  std::string("/etc/k8s-devinfo.json")}) {
    SCOPED_TRACE(path);
    json conf = s.w.conf("1.1.0", s.vf, s.w.ipam());
    conf["runtimeConfig"] = {{"CNIDeviceInfoFile", path}};
    expectRefused(s.w.ibcni(World::env("ADD", "c1", *s.pod), conf), 7,
                  {"runtimeConfig.CNIDeviceInfoFile", "outside the device-info tree", "/var/run/k8s.cni.cncf.io/devinfo/"});
    EXPECT_FALSE(fs::exists(path)) << "nothing written";
  }
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_TRUE(s.w.noAllocations());
}

// Files ibcni only reads must be regular files: a FIFO would block every verb, a device node may
// act on open. ipam.resolvConf is read by ADD only (as host-local does): DEL never reads it, so a
// resolv.conf that became a FIFO, a device or a directory never fails DEL.
TEST(HostilePaths, FilesReadFromTheConfigMustBeRegular) {
  HOSTILE_SCENE(s);
  const fs::path fifo = s.w.tmp() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const NodeState before = capture(s.w, {s.pod});
  for (const std::string& path : {fifo.string(), std::string("/dev/zero"), s.w.tmp().string()}) {
    SCOPED_TRACE(path);
    const auto start = std::chrono::steady_clock::now();
    json conf = s.w.conf("1.1.0", s.vf, s.w.ipam());
    conf["runtimeConfig"] = {{"CNIDeviceInfoFile", path}};
    expectRefused(s.w.ibcni(World::env("ADD", "c1", *s.pod), conf), 7,
                  {"runtimeConfig.CNIDeviceInfoFile", "not a regular file"});
    json ic = s.w.ipamConf("1.1.0");
    ic["ipam"]["resolvConf"] = path;
    expectRefused(s.w.ipamPlugin(World::env("ADD", "c1", *s.pod), ic), 7, {"ipam.resolvConf", "not a regular file"});
    Exec del = s.w.ipamPlugin(World::env("DEL", "c1", *s.pod), ic);
    EXPECT_EQ(del.status, 0) << del.describe();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "a verb blocked";
  }
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_TRUE(s.w.noAllocations());
}

}  // namespace
}  // namespace ibcni::hostile
