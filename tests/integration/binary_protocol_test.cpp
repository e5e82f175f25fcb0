// SPDX-License-Identifier: Apache-2.0
// Longer than 600 lines on purpose: one fixture (a host netns, veth "VFs", pods, temporary state) shared
// by every case of the built binary.
// The BUILT ibcni executable driven exactly as a container runtime drives it (label "binary"):
// execve with a fresh environment (PATH and the case's CNI_* variables only), the network
// configuration on a stdin pipe, stdout, stderr and the exit status captured.
//
// Every case runs with the test thread (and so every forked plugin) inside a fresh "host" network
// namespace; a veth end in it stands in for the VF, fresh namespaces stand in for pods, and the
// state and host-local data directories are temporary. Nothing here touches the machine's own
// namespace, and everything is removed by destructors, also when an assertion fails.
//
// Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN): skipped with the reason otherwise.

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/cni_conf.h"
#include "support/exec_program.h"
#include "support/ip_links.h"
#include "support/test_netns.h"

#if !defined(IBCNI_BINARY) || !defined(IBCNI_IPAM_BINARY)
#error "IBCNI_BINARY and IBCNI_IPAM_BINARY must be the paths of the built ibcni and ibcni-ipam executables"
#endif

namespace ibcni::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// The plugin under test: the build's, or IBCNI_TEST_BINARY (e.g. an installed or mutated copy).
const std::string kBinary = [] {
  const char* fromEnv = std::getenv("IBCNI_TEST_BINARY");
  return std::string(fromEnv != nullptr && *fromEnv != '\0' ? fromEnv : IBCNI_BINARY);
}();
constexpr const char* kCniBin = "/usr/lib/cni";  // Debian's containernetworking-plugins
const std::set<std::string> kSupportedVersions = {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};

// ---------------------------------------------------------------------------------------------
// Running a program like a runtime does

/// What a finished child left behind (support/exec_program.h).
using Exec = ProgramRun;

/// The CNI protocol on stdout, for every run: success prints one JSON object for ADD and VERSION
/// and nothing for the other verbs; failure (exit 1) prints exactly one error object
/// {cniVersion?, code, msg, details?}.
void expectProtocol(const Exec& run, const std::string& verb) {
  if (run.status == 0) {
    if (verb == "ADD" || verb == "VERSION") {
      auto j = oneJsonDocument(run.out);
      EXPECT_TRUE(j && j->is_object()) << verb << ": stdout is not exactly one JSON object\n" << run.describe();
    } else {
      EXPECT_EQ(run.out, "") << verb << ": a successful " << verb << " must print nothing\n" << run.describe();
    }
    return;
  }
  EXPECT_EQ(run.status, 1) << verb << ": a failing plugin exits 1\n" << run.describe();
  auto j = oneJsonDocument(run.out);
  ASSERT_TRUE(j && j->is_object()) << verb << ": the error on stdout is not exactly one JSON object\n"
                                   << run.describe();
  EXPECT_TRUE(j->contains("code") && (*j)["code"].is_number_unsigned()) << run.describe();
  EXPECT_TRUE(j->contains("msg") && (*j)["msg"].is_string() && !(*j)["msg"].get<std::string>().empty())
      << run.describe();
  for (const auto& [key, value] : j->items()) {
    EXPECT_TRUE(key == "cniVersion" || key == "code" || key == "msg" || key == "details")
        << "unexpected key " << key << " in the error object\n"
        << run.describe();
    if (key == "cniVersion" || key == "details") {
      EXPECT_TRUE(value.is_string()) << key << " must be a string\n" << run.describe();
    }
  }
}

/// Runs the built ibcni with `env` and `input` and checks the protocol shape of what it printed.
Exec ibcni(const CniEnv& env, const std::optional<std::string>& input) {
  Exec run = runProgram(kBinary, env.toVector(), input);
  expectProtocol(run, env.command.value_or(""));
  return run;
}

/// The JSON object a run printed (an empty object when stdout holds none).
json jsonOut(const Exec& run) { return oneJsonDocument(run.out).value_or(json::object()); }

/// Checks that `run` failed with `code` and that the message names every one of `words`.
void expectError(const Exec& run, unsigned code, const std::vector<std::string>& words = {}) {
  EXPECT_EQ(run.status, 1) << run.describe();
  json e = jsonOut(run);
  ASSERT_TRUE(e.contains("code")) << run.describe();
  EXPECT_EQ(e["code"].get<unsigned>(), code) << run.describe();
  const std::string msg = e.value("msg", "");
  for (const auto& w : words) {
    EXPECT_NE(msg.find(w), std::string::npos) << "msg does not name \"" << w << "\"\n" << run.describe();
  }
}

// ---------------------------------------------------------------------------------------------
// Looking at links, addresses and files

std::vector<std::string> routeDsts(const os::Netns& ns) {
  std::vector<std::string> out;
  if (auto j = ipJson(ns, {"route", "show"})) {
    for (const auto& r : *j) {
      out.push_back(r.value("dst", ""));
    }
  }
  return out;
}

bool isIpAddress(const std::string& s) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, s.c_str(), buf) == 1 || ::inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

/// Polls `cond` for up to `limit`.
template <class F>
bool eventually(F cond, std::chrono::milliseconds limit = 10s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) {
      return false;
    }
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

/// A temporary directory removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* t = std::getenv("TMPDIR");
    std::string templ = std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/ibcni-binary-XXXXXX";
    if (::mkdtemp(templ.data()) != nullptr) {
      path_ = templ;
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// ---------------------------------------------------------------------------------------------
// The fixture

class BinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "the binary protocol suite needs root: it creates network namespaces and moves links "
                      "(euid is "
                   << ::geteuid() << ")";
    }
    ASSERT_TRUE(fs::exists(kBinary)) << "the built plugin is missing: " << kBinary;
    auto host = TestNetns::create("host");
    if (!host && isPermissionError(host.error())) {
      GTEST_SKIP() << "network namespaces are not available: " << host.error().describe();
    }
    ASSERT_TRUE(host.has_value()) << host.error().describe();
    host_ = std::move(*host);
    auto scope = ScopedHostNetns::enter(host_->netns());
    ASSERT_TRUE(scope.has_value()) << scope.error().describe();
    scope_.emplace(std::move(*scope));
    ASSERT_FALSE(tmp_.path().empty()) << "mkdtemp failed";
    stateDir_ = tmp_.path() / "state";
    dataDir_ = tmp_.path() / "ipam";
    network_ = "net-" + randomIfName("n");
  }

  const os::Netns& host() const { return host_->netns(); }

  /// A fresh pod namespace owned by the fixture.
  TestNetns& makePod(const std::string& label = "pod") {
    auto ns = TestNetns::create(label);
    EXPECT_TRUE(ns.has_value()) << ns.error().describe();
    if (!ns) {
      throw std::runtime_error("cannot create a pod namespace");
    }
    pods_.push_back(std::make_unique<TestNetns>(std::move(*ns)));
    return *pods_.back();
  }

  /// A veth pair in the host; returns the end that stands in for the VF (the peer stays).
  /// `mtu` and `up` set its host-side state before the test.
  std::string makeVf(unsigned mtu = 1500, bool up = false) {
    std::string vf = randomIfName("vf");
    std::string peer = randomIfName("pr");
    auto r = createVethPair(host(), vf, host(), peer);
    EXPECT_TRUE(r.has_value()) << r.error().describe();
    if (mtu != 1500) {
      auto m = runIp(host(), {"link", "set", "dev", vf, "mtu", std::to_string(mtu)});
      EXPECT_TRUE(m.has_value()) << m.error().describe();
    }
    if (up) {
      auto u = runIp(host(), {"link", "set", "dev", vf, "up"});
      EXPECT_TRUE(u.has_value()) << u.error().describe();
    }
    peers_[vf] = peer;
    return vf;
  }

  json hostLocal(const std::string& subnet = "10.77.0.0/24") const {
    return ipamObject("host-local", dataDir_.string(), subnet, "10.99.0.0/16");
  }

  /// ibcni's configuration for `vf`, logging at debug level to stderr.
  json conf(const std::string& version, const std::string& vf, std::optional<json> ipam = std::nullopt) const {
    return ibcniConf(version, network_, vf, stateDir_.string(), ipam);
  }

  static CniEnv env(const std::string& command, const std::string& cid, const TestNetns& pod,
                    const std::string& ifName = "net1") {
    CniEnv e;
    e.command = command;
    e.containerId = cid;
    e.netns = pod.path();
    e.ifName = ifName;
    e.path = kCniBin;
    return e;
  }

  /// ibcni's attachment records of this test's network.
  std::vector<fs::path> records() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(stateDir_ / "attachments" / network_, ec)) {
      if (e.is_regular_file()) {
        out.push_back(e.path());
      }
    }
    return out;
  }

  /// host-local's reservations in this test's network: IP → the file's content.
  std::map<std::string, std::string> reservations() const {
    std::map<std::string, std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dataDir_ / network_, ec)) {
      const std::string name = e.path().filename().string();
      if (isIpAddress(name)) {
        out[name] = readFile(e.path());
      }
    }
    return out;
  }

  /// The pod holds nothing of ours: only lo.
  void expectPodEmpty(const TestNetns& pod) const {
    EXPECT_EQ(linkNames(pod.netns()), std::vector<std::string>{"lo"}) << "pod " << pod.path();
  }

  // Destroyed in reverse order: the temporary files go first, then the thread returns to its
  // own namespace, then the pods and the host namespace (with its veths) are released.
  std::optional<TestNetns> host_;
  std::vector<std::unique_ptr<TestNetns>> pods_;
  std::optional<ScopedHostNetns> scope_;
  TempDir tmp_;
  fs::path stateDir_;
  fs::path dataDir_;
  std::string network_;
  std::map<std::string, std::string> peers_;
};

/// A tiny IPAM plugin (a shell script) in a temporary CNI_PATH directory.
void writeScript(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                            fs::perms::others_exec);
}

// ---------------------------------------------------------------------------------------------
// 1. stdout holds exactly one JSON document; logs go to stderr or logFile

TEST_F(BinaryTest, StdoutHoldsOneJsonDocumentAndLogsGoElsewhere) {
  const std::string vf = makeVf();
  TestNetns& pod = makePod();
  json c = conf("1.0.0", vf, hostLocal());

  Exec add = ibcni(env("ADD", "cid-json", pod), c.dump());
  ASSERT_EQ(add.status, 0) << add.describe();
  auto result = oneJsonDocument(add.out);
  ASSERT_TRUE(result) << add.describe();
  EXPECT_EQ(result->value("cniVersion", ""), "1.0.0");
  EXPECT_NE(add.err.find("[debug]"), std::string::npos) << "logLevel debug logs nothing on stderr\n" << add.describe();
  EXPECT_EQ(add.out.find("[debug]"), std::string::npos) << add.describe();
  EXPECT_EQ(add.out.find("ibcni["), std::string::npos) << add.describe();

  json withPrev = c;
  withPrev["prevResult"] = *result;
  Exec check = ibcni(env("CHECK", "cid-json", pod), withPrev.dump());
  EXPECT_EQ(check.status, 0) << check.describe();
  EXPECT_NE(check.err.find("[debug]"), std::string::npos) << check.describe();

  // Failures of every stage: each prints exactly one error object (checked in ibcni()).
  struct Failing {
    const char* what;
    CniEnv env;
    std::optional<std::string> input;
  };
  CniEnv noCommand = env("ADD", "cid-json", pod);
  noCommand.command.reset();
  CniEnv badIf = env("ADD", "cid-json2", pod, "bad/name");
  json noDevice = conf("1.0.0", "nosuchdev0", hostLocal());
  json badMtu = c;
  badMtu["mtu"] = 70000;
  const std::vector<Failing> failing = {
      {"no CNI_COMMAND", noCommand, c.dump()},
      {"bad JSON", env("ADD", "cid-json2", pod), "{\"cniVersion\": \"1.0.0\", \"logLevel\": \"debug\""},
      {"bad ifname", badIf, c.dump()},
      {"ADD twice", env("ADD", "cid-json", pod), c.dump()},
      {"no device", env("ADD", "cid-json2", pod, "net2"), noDevice.dump()},
      {"bad mtu", env("ADD", "cid-json2", pod, "net2"), badMtu.dump()},
      {"CHECK without prevResult", env("CHECK", "cid-json", pod), c.dump()},
      {"closed stdin", env("ADD", "cid-json2", pod), std::nullopt},
  };
  for (const auto& f : failing) {
    SCOPED_TRACE(f.what);
    Exec r = ibcni(f.env, f.input);
    EXPECT_EQ(r.status, 1) << r.describe();
    EXPECT_NE(r.err.find("[error]"), std::string::npos) << "the error is not logged on stderr\n" << r.describe();
    EXPECT_EQ(r.out.find("[error]"), std::string::npos) << r.describe();
  }

  Exec del = ibcni(env("DEL", "cid-json", pod), withPrev.dump());
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_NE(del.err.find("[debug]"), std::string::npos) << del.describe();

  // logFile: the lines name the verb, the container ID and the interface name; stderr stays quiet.
  const fs::path logFile = tmp_.path() / "ibcni.log";
  json logged = c;
  logged["logFile"] = logFile.string();
  Exec add2 = ibcni(env("ADD", "cid-logged", pod, "net7"), logged.dump());
  ASSERT_EQ(add2.status, 0) << add2.describe();
  Exec del2 = ibcni(env("DEL", "cid-logged", pod, "net7"), logged.dump());
  EXPECT_EQ(del2.status, 0) << del2.describe();
  for (const Exec* r : {&add2, &del2}) {
    EXPECT_EQ(r->err.find("ibcni["), std::string::npos) << "logs went to stderr despite logFile\n" << r->describe();
  }
  const std::string text = readFile(logFile);
  for (const std::string verb : {"ADD", "DEL"}) {
    bool found = false;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      found = found || (line.find(verb) != std::string::npos && line.find("cid-logged") != std::string::npos &&
                        line.find("net7") != std::string::npos);
    }
    EXPECT_TRUE(found) << "no line of " << logFile << " names " << verb << ", cid-logged and net7:\n" << text;
  }
  EXPECT_EQ(linkState(host(), vf).value_or(LinkState{}).name, vf);
}

// ---------------------------------------------------------------------------------------------
// 2. VERSION

TEST_F(BinaryTest, VersionWithBareAndProbeEnvironments) {
  auto expectVersions = [](const Exec& r, const std::string& cniVersion) {
    ASSERT_EQ(r.status, 0) << r.describe();
    auto j = oneJsonDocument(r.out);
    ASSERT_TRUE(j && j->is_object()) << r.describe();
    EXPECT_EQ(j->value("cniVersion", ""), cniVersion) << r.describe();
    ASSERT_TRUE(j->contains("supportedVersions") && (*j)["supportedVersions"].is_array()) << r.describe();
    auto list = (*j)["supportedVersions"].get<std::vector<std::string>>();
    EXPECT_EQ(list.size(), kSupportedVersions.size()) << r.describe();
    EXPECT_EQ(std::set<std::string>(list.begin(), list.end()), kSupportedVersions) << r.describe();
  };
  {
    SCOPED_TRACE("env -i CNI_COMMAND=VERSION, empty stdin");
    Exec r = runProgram(kBinary, {"CNI_COMMAND=VERSION"}, std::string());
    expectProtocol(r, "VERSION");
    expectVersions(r, "1.1.0");
  }
  // libcni's probe (pkg/invoke GetVersionInfo): fake values for plugins built on an old skel.
  const std::vector<std::string> probe = {"CNI_COMMAND=VERSION", "CNI_CONTAINERID=", "CNI_NETNS=dummy",
                                          "CNI_ARGS=",           "CNI_IFNAME=dummy", "CNI_PATH=dummy"};
  for (const std::string v : {"1.1.0", "1.0.0", "0.4.0"}) {
    SCOPED_TRACE("libcni probe, stdin cniVersion " + v);
    Exec r = runProgram(kBinary, probe, "{\"cniVersion\":\"" + v + "\"}");
    expectProtocol(r, "VERSION");
    expectVersions(r, v);
  }
  {
    SCOPED_TRACE("libcni probe env, empty stdin");
    Exec r = runProgram(kBinary, probe, std::string());
    expectProtocol(r, "VERSION");
    expectVersions(r, "1.1.0");
  }
}

// ---------------------------------------------------------------------------------------------
// 3. ADD / CHECK / DEL per spec version

struct VersionCase {
  const char* version;
  bool ipam;    ///< host-local (refuses 1.1.0)
  bool hostUp;  ///< the VF's state in the host before ADD
  unsigned hostMtu;
};

void PrintTo(const VersionCase& c, std::ostream* os) {
  *os << c.version << (c.ipam ? " host-local" : " no ipam") << ", VF " << (c.hostUp ? "up" : "down") << " mtu "
      << c.hostMtu;
}

class BinaryVersionTest : public BinaryTest, public ::testing::WithParamInterface<VersionCase> {};

TEST_P(BinaryVersionTest, AddCheckDelRoundTrip) {
  const VersionCase& p = GetParam();
  const std::string version = p.version;
  const bool below100 = version < "1.0.0";
  const bool hasCheck = version >= "0.4.0";
  const std::string vf = makeVf(p.hostMtu, p.hostUp);
  const auto before = linkState(host(), vf);
  ASSERT_TRUE(before);
  TestNetns& pod = makePod();
  json c = conf(version, vf, p.ipam ? std::optional<json>(hostLocal()) : std::nullopt);
  c["mtu"] = 1400;
  const std::string cid = "cid-" + std::to_string(::getpid()) + "-v" + std::string(version);

  Exec add = ibcni(env("ADD", cid, pod), c.dump());
  ASSERT_EQ(add.status, 0) << add.describe();
  json r = jsonOut(add);
  EXPECT_EQ(r.value("cniVersion", ""), version) << add.out;

  // interfaces
  ASSERT_TRUE(r.contains("interfaces") && r["interfaces"].size() == 1) << add.out;
  const json& iface = r["interfaces"][0];
  EXPECT_EQ(iface.value("name", ""), "net1") << add.out;
  EXPECT_EQ(iface.value("sandbox", ""), pod.path()) << add.out;
  EXPECT_EQ(iface.value("mac", ""), before->mac) << add.out;
  if (version == "1.1.0") {
    EXPECT_EQ(iface.value("mtu", 0U), 1400U) << "1.1.0 results carry the interface mtu\n" << add.out;
  } else {
    EXPECT_FALSE(iface.contains("mtu")) << "mtu is a 1.1.0 field\n" << add.out;
  }
  EXPECT_FALSE(iface.contains("pciID")) << "a veth has no PCI function\n" << add.out;

  // ips and routes
  std::string ip;
  if (p.ipam) {
    ASSERT_TRUE(r.contains("ips") && r["ips"].size() == 1) << add.out;
    const json& a = r["ips"][0];
    ip = a.value("address", "");
    EXPECT_TRUE(ip.starts_with("10.77.0.") && ip.ends_with("/24")) << add.out;
    EXPECT_EQ(a.value("gateway", ""), "10.77.0.1") << add.out;
    EXPECT_EQ(a.value("interface", -1), 0) << add.out;
    if (below100) {
      EXPECT_EQ(a.value("version", ""), "4") << "ips[].version is required below 1.0.0\n" << add.out;
    } else {
      EXPECT_FALSE(a.contains("version")) << "ips[].version was removed in 1.0.0\n" << add.out;
    }
    ASSERT_TRUE(r.contains("routes")) << add.out;
    EXPECT_EQ(r["routes"][0].value("dst", ""), "10.99.0.0/16") << add.out;
  } else {
    EXPECT_FALSE(r.contains("ips")) << add.out;
  }

  // the kernel's view
  EXPECT_FALSE(linkState(host(), vf)) << vf << " is still in the host";
  auto inPod = linkState(pod.netns(), "net1");
  ASSERT_TRUE(inPod) << "net1 is not in the pod: " << ::testing::PrintToString(linkNames(pod.netns()));
  EXPECT_TRUE(inPod->up);
  EXPECT_EQ(inPod->mtu, 1400U);
  EXPECT_EQ(inPod->mac, before->mac);
  EXPECT_TRUE(inPod->alias.starts_with("ibcni:")) << *inPod;
  if (p.ipam) {
    auto addrs = addresses(pod.netns(), "net1");
    EXPECT_NE(std::find(addrs.begin(), addrs.end(), ip), addrs.end())
        << ip << " is not on net1: " << ::testing::PrintToString(addrs);
    auto dsts = routeDsts(pod.netns());
    EXPECT_NE(std::find(dsts.begin(), dsts.end(), "10.99.0.0/16"), dsts.end()) << ::testing::PrintToString(dsts);
    auto res = reservations();
    ASSERT_EQ(res.size(), 1U);
    EXPECT_EQ(res.begin()->first + "/24", ip);
    EXPECT_NE(res.begin()->second.find(cid), std::string::npos) << res.begin()->second;
  }
  auto recs = records();
  ASSERT_EQ(recs.size(), 1U);
  EXPECT_EQ(recs[0].parent_path().filename().string() + "/" + recs[0].filename().string(), cid + "/net1.json");

  json withPrev = c;
  if (hasCheck) {
    withPrev["prevResult"] = r;
    Exec check = ibcni(env("CHECK", cid, pod), withPrev.dump());
    EXPECT_EQ(check.status, 0) << check.describe();
    EXPECT_EQ(check.out, "");
  }

  Exec del = ibcni(env("DEL", cid, pod), withPrev.dump());
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_EQ(del.out, "");
  EXPECT_EQ(linkState(host(), vf), before) << "the VF is not back in the host as it was";
  expectPodEmpty(pod);
  EXPECT_TRUE(records().empty());
  EXPECT_TRUE(reservations().empty()) << ::testing::PrintToString(reservations());

  Exec again = ibcni(env("DEL", cid, pod), withPrev.dump());
  EXPECT_EQ(again.status, 0) << again.describe();
  EXPECT_EQ(again.out, "");
  EXPECT_EQ(linkState(host(), vf), before);
}

INSTANTIATE_TEST_SUITE_P(Versions, BinaryVersionTest,
                         ::testing::Values(VersionCase{"0.3.0", true, false, 1500},
                                           VersionCase{"0.3.1", true, true, 1480},
                                           VersionCase{"0.4.0", true, false, 9000},
                                           VersionCase{"1.0.0", true, true, 1500},
                                           VersionCase{"1.1.0", false, true, 1480}),
                         [](const ::testing::TestParamInfo<VersionCase>& p) {
                           std::string n = std::string("v") + p.param.version;
                           std::replace(n.begin(), n.end(), '.', '_');
                           return n;
                         });

// ---------------------------------------------------------------------------------------------
// 4. Error codes through the binary

TEST_F(BinaryTest, ErrorCodes) {
  const std::string vf = makeVf(1480, true);
  const auto before = linkState(host(), vf);
  ASSERT_TRUE(before);
  TestNetns& pod = makePod();
  const json c = conf("1.0.0", vf, hostLocal());
  const std::string good = c.dump();
  auto add = [&] { return env("ADD", "cid-errors", pod); };
  auto nothingChanged = [&] {
    EXPECT_EQ(linkState(host(), vf), before);
    expectPodEmpty(pod);
    EXPECT_TRUE(records().empty());
    EXPECT_TRUE(reservations().empty());
  };

  {
    SCOPED_TRACE("missing CNI_COMMAND");
    CniEnv e = add();
    e.command.reset();
    expectError(ibcni(e, good), 4, {"CNI_COMMAND"});
  }
  {
    SCOPED_TRACE("unknown verb");
    CniEnv e = add();
    e.command = "FROB";
    expectError(ibcni(e, good), 4, {"FROB"});
  }
  {
    SCOPED_TRACE("missing CNI_CONTAINERID and CNI_IFNAME");
    CniEnv e = add();
    e.containerId.reset();
    e.ifName.reset();
    expectError(ibcni(e, good), 4, {"CNI_CONTAINERID", "CNI_IFNAME"});
  }
  for (const std::string bad : {"bad/name", "sixteen-chars-xx", "..", "a b"}) {
    SCOPED_TRACE("bad ifname " + bad);
    CniEnv e = add();
    e.ifName = bad;
    expectError(ibcni(e, good), 4, {"CNI_IFNAME"});
  }
  {
    SCOPED_TRACE("CNI_NETNS does not exist");
    CniEnv e = add();
    e.netns = (tmp_.path() / "no-such-netns").string();
    expectError(ibcni(e, good), 4, {"CNI_NETNS"});
  }
  {
    SCOPED_TRACE("CNI_NETNS is ibcni's own (the host's) namespace");
    CniEnv e = add();
    e.netns = host_->path();
    expectError(ibcni(e, good), 4, {"CNI_NETNS"});
  }
  {
    SCOPED_TRACE("CNI_NETNS is a regular file");
    const fs::path file = tmp_.path() / "regular-file";
    std::ofstream(file) << "not a namespace\n";
    CniEnv e = add();
    e.netns = file.string();
    expectError(ibcni(e, good), 4, {"CNI_NETNS"});
  }
  {
    SCOPED_TRACE("closed stdin");
    expectError(ibcni(add(), std::nullopt), 5);
  }
  {
    SCOPED_TRACE("bad JSON");
    expectError(ibcni(add(), "{\"cniVersion\": \"1.0.0\", "), 6);
    expectError(ibcni(add(), "not json at all"), 6);
  }
  nothingChanged();
  {
    SCOPED_TRACE("cniVersion 9.9.9");
    json v = c;
    v["cniVersion"] = "9.9.9";
    expectError(ibcni(add(), v.dump()), 1);
    nothingChanged();
  }
  {
    SCOPED_TRACE("CHECK with 0.3.1");
    json v = conf("0.3.1", vf, hostLocal());
    v["prevResult"] = {{"cniVersion", "0.3.1"},
                       {"interfaces", json::array({{{"name", "net1"}, {"sandbox", pod.path()}}})}};
    expectError(ibcni(env("CHECK", "cid-errors", pod), v.dump()), 1);
  }
  {
    SCOPED_TRACE("missing device");
    expectError(ibcni(add(), conf("1.0.0", "nosuchdev0", hostLocal()).dump()), 100, {"nosuchdev0"});
    json byPci = conf("1.0.0", vf, hostLocal());
    byPci.erase("device");
    byPci["deviceID"] = "0000:ff:1f.7";
    expectError(ibcni(add(), byPci.dump()), 100, {"0000:ff:1f.7"});
    nothingChanged();
  }
  {
    SCOPED_TRACE("unknown CNI_ARGS key without IgnoreUnknown");
    CniEnv e = add();
    e.args = "FOO=bar";
    expectError(ibcni(e, good), 4, {"FOO"});
    nothingChanged();
  }
  {
    SCOPED_TRACE("mtu 70000");
    json v = c;
    v["mtu"] = 70000;
    expectError(ibcni(add(), v.dump()), 7, {"mtu"});
    nothingChanged();
  }
  {
    SCOPED_TRACE("stateDir is a regular file");
    const fs::path file = tmp_.path() / "state-file";
    std::ofstream(file) << "not a directory\n";
    json v = c;
    v["stateDir"] = file.string();
    expectError(ibcni(add(), v.dump()), 106, {"stateDir"});
    nothingChanged();
  }
  {
    SCOPED_TRACE("CNI_IFNAME already in the pod");
    auto r = createVethPair(pod.netns(), "net1", pod.netns(), "podpeer");
    ASSERT_TRUE(r.has_value()) << r.error().describe();
    auto theirs = linkState(pod.netns(), "net1");
    ASSERT_TRUE(theirs);
    expectError(ibcni(add(), good), 103, {"net1"});
    EXPECT_EQ(linkState(host(), vf), before);
    EXPECT_EQ(linkState(pod.netns(), "net1"), theirs) << "the pod's own net1 was touched";
    EXPECT_TRUE(records().empty());
    EXPECT_TRUE(reservations().empty());
    ASSERT_TRUE(runIp(pod.netns(), {"link", "del", "net1"}).has_value());
  }
  {
    // The positive control: the same request works, and unknown keys pass with IgnoreUnknown.
    SCOPED_TRACE("control: IgnoreUnknown=1;FOO=bar");
    CniEnv e = add();
    e.args = "IgnoreUnknown=1;FOO=bar";
    Exec ok = ibcni(e, good);
    EXPECT_EQ(ok.status, 0) << ok.describe();
    EXPECT_TRUE(linkState(pod.netns(), "net1"));
    e.command = "DEL";
    Exec del = ibcni(e, good);
    EXPECT_EQ(del.status, 0) << del.describe();
    nothingChanged();
  }
}

// ---------------------------------------------------------------------------------------------
// 5. An ADD that fails half-way leaves nothing behind

// One rule for the network name (1-253 bytes, config/ reads it once): ibcni with its embedded IPAM
// in process and the standalone ibcni-ipam accept the same names, and refuse a longer one before
// anything changes. (The IPAM once had a rule of its own, 200 bytes: a 201-253 byte name moved the
// device, then failed inside the IPAM and was rolled back.)
TEST_F(BinaryTest, NetworkNameRuleIsTheSameForThePluginAndItsIpam) {
  const json ipamObj = {{"type", "ibcni-ipam"},
                        {"dataDir", dataDir_.string()},
                        {"ranges", json::array({json::array({{{"subnet", "10.78.0.0/24"}}})})}};
  for (std::size_t len : {std::size_t{200}, std::size_t{201}, std::size_t{253}, std::size_t{254}}) {
    SCOPED_TRACE("a network name of " + std::to_string(len) + " bytes");
    const std::string name = "n" + std::string(len - 1, 'a');
    const bool accepted = len <= 253;

    // ibcni, the embedded IPAM in process.
    const std::string vf = makeVf(1500, true);
    const auto before = linkState(host(), vf);
    ASSERT_TRUE(before);
    TestNetns& pod = makePod();
    json c = conf("1.0.0", vf, ipamObj);
    c["name"] = name;
    const std::string cid = "cid-len" + std::to_string(len);
    Exec add = ibcni(env("ADD", cid, pod), c.dump());
    if (accepted) {
      ASSERT_EQ(add.status, 0) << add.describe();
      EXPECT_EQ(jsonOut(add)["ips"].size(), 1u) << add.describe();
      EXPECT_TRUE(fs::exists(dataDir_ / name)) << "the embedded IPAM keeps the network under its name";
      Exec del = ibcni(env("DEL", cid, pod), c.dump());
      EXPECT_EQ(del.status, 0) << del.describe();
    } else {
      expectError(add, 7, {"invalid name", "1-253"});
      EXPECT_FALSE(fs::exists(dataDir_ / name)) << "the IPAM was reached";
      EXPECT_FALSE(fs::exists(stateDir_ / "attachments" / name)) << "a record was written";
    }
    EXPECT_EQ(linkState(host(), vf), before) << "the VF is not back as it was";
    expectPodEmpty(pod);

    // ibcni-ipam as the IPAM plugin of another plugin (what it receives from macvlan).
    const json ic = {{"cniVersion", "1.0.0"}, {"name", name}, {"type", "macvlan"}, {"ipam", ipamObj}};
    const std::string ipamCid = "cid-ipam-len" + std::to_string(len);
    Exec iadd = runProgram(IBCNI_IPAM_BINARY, env("ADD", ipamCid, pod).toVector(), ic.dump());
    expectProtocol(iadd, "ADD");
    if (accepted) {
      ASSERT_EQ(iadd.status, 0) << iadd.describe();
      EXPECT_EQ(jsonOut(iadd)["ips"].size(), 1u) << iadd.describe();
      Exec idel = runProgram(IBCNI_IPAM_BINARY, env("DEL", ipamCid, pod).toVector(), ic.dump());
      EXPECT_EQ(idel.status, 0) << idel.describe();
    } else {
      expectError(iadd, 7, {"invalid name", "1-253"});
      EXPECT_FALSE(fs::exists(dataDir_ / name)) << "ibcni-ipam created a store for a name it refuses";
    }
  }
}

TEST_F(BinaryTest, FailingIpamPluginRollsBackAndPassesItsCode) {
  const std::string vf = makeVf(1480, true);
  const auto before = linkState(host(), vf);
  ASSERT_TRUE(before);
  TestNetns& pod = makePod();
  const fs::path bin = tmp_.path() / "cni-bin";
  fs::create_directories(bin);
  const fs::path calls = tmp_.path() / "stub-calls";
  writeScript(bin / "stub-ipam",
              "#!/bin/sh\n"
              "cat >/dev/null\n"
              "echo \"$CNI_COMMAND $CNI_CONTAINERID $CNI_IFNAME\" >>'" +
                  calls.string() +
                  "'\n"
                  "if [ \"$CNI_COMMAND\" = ADD ]; then\n"
                  "  printf '{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"stub ipam: pool busy\","
                  "\"details\":\"try later\"}'\n"
                  "  exit 1\n"
                  "fi\n"
                  "exit 0\n");
  json c = conf("1.0.0", vf, json{{"type", "stub-ipam"}});
  c["mtu"] = 1400;  // changed before IPAM runs: must be undone too
  CniEnv e = env("ADD", "cid-stub", pod);
  e.path = bin.string();
  Exec add = ibcni(e, c.dump());
  expectError(add, 11, {"stub ipam: pool busy"});
  EXPECT_NE(readFile(calls).find("ADD cid-stub net1"), std::string::npos) << "the stub was not run as IPAM";
  EXPECT_EQ(linkState(host(), vf), before) << "the VF is not back as it was";
  expectPodEmpty(pod);
  EXPECT_TRUE(records().empty());

  // The runtime's DEL after the failed ADD.
  e.command = "DEL";
  Exec del = ibcni(e, c.dump());
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_EQ(linkState(host(), vf), before);
}

TEST_F(BinaryTest, ExhaustedHostLocalRangeRollsBack) {
  const std::string vf = makeVf(1480, true);
  const auto before = linkState(host(), vf);
  ASSERT_TRUE(before);
  TestNetns& pod = makePod();
  json ipam = hostLocal("10.66.0.0/24");
  ipam["ranges"][0][0]["rangeStart"] = "10.66.0.10";
  ipam["ranges"][0][0]["rangeEnd"] = "10.66.0.10";
  json c = conf("1.0.0", vf, ipam);
  c["mtu"] = 1400;

  // Another container holds the only address.
  CniEnv other = env("ADD", "cid-other", pod);
  Exec taken = runProgram(std::string(kCniBin) + "/host-local", other.toVector(), c.dump());
  ASSERT_EQ(taken.status, 0) << taken.describe();
  ASSERT_EQ(reservations().size(), 1U);

  // What host-local itself answers for a full range: ibcni must pass that code on.
  CniEnv probe = env("ADD", "cid-probe", pod);
  Exec direct = runProgram(std::string(kCniBin) + "/host-local", probe.toVector(), c.dump());
  ASSERT_EQ(direct.status, 1) << direct.describe();
  const unsigned hostLocalCode = jsonOut(direct).value("code", 0U);
  ASSERT_NE(hostLocalCode, 0U) << direct.describe();
  ASSERT_EQ(reservations().size(), 1U);

  Exec add = ibcni(env("ADD", "cid-exhausted", pod), c.dump());
  expectError(add, hostLocalCode, {"host-local"});
  EXPECT_EQ(linkState(host(), vf), before) << "the VF is not back as it was";
  expectPodEmpty(pod);
  EXPECT_TRUE(records().empty());
  auto res = reservations();
  ASSERT_EQ(res.size(), 1U) << ::testing::PrintToString(res);
  EXPECT_EQ(res.begin()->first, "10.66.0.10");
  EXPECT_NE(res.begin()->second.find("cid-other"), std::string::npos) << res.begin()->second;

  Exec del = ibcni(env("DEL", "cid-exhausted", pod), c.dump());
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_EQ(reservations().size(), 1U) << "ibcni's DEL released another container's address";
  other.command = "DEL";
  Exec release = runProgram(std::string(kCniBin) + "/host-local", other.toVector(), c.dump());
  EXPECT_EQ(release.status, 0) << release.describe();
}

// ---------------------------------------------------------------------------------------------
// 6. DEL when things are already gone

TEST_F(BinaryTest, DelAfterPodNetnsWasDeleted) {
  const std::string vf = makeVf();
  const std::string peer = peers_[vf];
  auto ns = TestNetns::create("doomed");
  ASSERT_TRUE(ns.has_value()) << ns.error().describe();
  auto doomed = std::make_unique<TestNetns>(std::move(*ns));
  const std::string podPath = doomed->path();
  const json c = conf("1.0.0", vf, hostLocal());

  Exec add = ibcni(env("ADD", "cid-doomed", *doomed), c.dump());
  ASSERT_EQ(add.status, 0) << add.describe();
  ASSERT_EQ(reservations().size(), 1U);
  ASSERT_EQ(records().size(), 1U);

  doomed.reset();  // the veth dies with the namespace, and its peer in the host with it
  EXPECT_TRUE(eventually([&] { return !linkState(host(), peer); })) << "the veth peer outlived the pod netns";
  ASSERT_FALSE(fs::exists(podPath));

  CniEnv e;
  e.command = "DEL";
  e.containerId = "cid-doomed";
  e.netns = podPath;
  e.ifName = "net1";
  e.path = kCniBin;
  json withPrev = c;
  withPrev["prevResult"] = jsonOut(add);
  Exec del = ibcni(e, withPrev.dump());
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_TRUE(reservations().empty()) << ::testing::PrintToString(reservations());
  EXPECT_TRUE(records().empty());

  Exec again = ibcni(e, withPrev.dump());
  EXPECT_EQ(again.status, 0) << again.describe();
}

TEST_F(BinaryTest, DelWithoutNetnsAndWithoutAdd) {
  const std::string vf = makeVf(1480, true);
  const auto before = linkState(host(), vf);
  ASSERT_TRUE(before);
  TestNetns& pod = makePod();
  const json c = conf("1.0.0", vf, hostLocal());

  {
    SCOPED_TRACE("DEL with no prior ADD");
    Exec del = ibcni(env("DEL", "cid-never", pod), c.dump());
    EXPECT_EQ(del.status, 0) << del.describe();
    CniEnv noNetns = env("DEL", "cid-never", pod);
    noNetns.netns.reset();
    Exec del2 = ibcni(noNetns, c.dump());
    EXPECT_EQ(del2.status, 0) << del2.describe();
    EXPECT_EQ(linkState(host(), vf), before);
    EXPECT_TRUE(records().empty());
    EXPECT_TRUE(reservations().empty());
  }
  {
    SCOPED_TRACE("DEL with CNI_NETNS unset after ADD");
    Exec add = ibcni(env("ADD", "cid-nonetns", pod), c.dump());
    ASSERT_EQ(add.status, 0) << add.describe();
    ASSERT_EQ(reservations().size(), 1U);
    CniEnv e = env("DEL", "cid-nonetns", pod);
    e.netns.reset();
    Exec del = ibcni(e, c.dump());
    EXPECT_EQ(del.status, 0) << del.describe();
    EXPECT_TRUE(reservations().empty()) << ::testing::PrintToString(reservations());
    EXPECT_TRUE(records().empty());
    // The record knows the pod's netns: the device is still brought home.
    EXPECT_EQ(linkState(host(), vf), before);
    expectPodEmpty(pod);
  }
}

TEST_F(BinaryTest, DelWithAnUnreadableRecord) {
  const std::string vf = makeVf(1500, true);
  const auto before = linkState(host(), vf);
  ASSERT_TRUE(before);
  TestNetns& pod = makePod();
  const json c = conf("1.0.0", vf, hostLocal());
  Exec add = ibcni(env("ADD", "cid-garbled", pod), c.dump());
  ASSERT_EQ(add.status, 0) << add.describe();
  auto recs = records();
  ASSERT_EQ(recs.size(), 1U);
  std::ofstream(recs[0], std::ios::trunc) << "{ garbled";

  // A record that cannot be read must not block DEL: the device is found by its alias.
  Exec del = ibcni(env("DEL", "cid-garbled", pod), c.dump());
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_TRUE(records().empty());
  EXPECT_TRUE(reservations().empty()) << ::testing::PrintToString(reservations());
  expectPodEmpty(pod);
  auto back = linkState(host(), vf);
  ASSERT_TRUE(back) << vf << " is not back in the host";
  EXPECT_EQ(back->alias, before->alias);
}

// Container IDs and ifnames may both contain '_': ("a_b", "c") and ("a", "b_c") are different
// attachments, and a DEL of the never-added ("a", "b_c") must not touch the other one.
TEST_F(BinaryTest, RecordsOfDifferentAttachmentsDoNotCollide) {
  const std::string vf = makeVf();
  TestNetns& pod1 = makePod("pod1");
  TestNetns& pod2 = makePod("pod2");
  const json c = conf("1.0.0", vf, hostLocal());
  Exec add = ibcni(env("ADD", "a_b", pod1, "c"), c.dump());
  ASSERT_EQ(add.status, 0) << add.describe();

  Exec other = ibcni(env("DEL", "a", pod2, "b_c"), c.dump());
  EXPECT_EQ(other.status, 0) << other.describe();
  EXPECT_TRUE(linkState(pod1.netns(), "c")) << "DEL of (a, b_c) took the device of (a_b, c) out of its pod";
  EXPECT_EQ(records().size(), 1U) << "DEL of (a, b_c) removed the record of (a_b, c)";
  EXPECT_EQ(reservations().size(), 1U);

  Exec del = ibcni(env("DEL", "a_b", pod1, "c"), c.dump());
  EXPECT_EQ(del.status, 0) << del.describe();
}

// GC and STATUS (spec 1.1.0) as libcni >= 1.2 sends them: the attachment variables empty.
TEST_F(BinaryTest, GcReleasesOnlyStaleAttachmentsAndStatusReportsReadiness) {
  const std::string vf1 = makeVf();
  const std::string vf2 = makeVf();
  const auto before2 = linkState(host(), vf2);
  TestNetns& pod1 = makePod("pod1");
  TestNetns& pod2 = makePod("pod2");
  Exec add1 = ibcni(env("ADD", "keep", pod1), conf("1.1.0", vf1).dump());
  ASSERT_EQ(add1.status, 0) << add1.describe();
  Exec add2 = ibcni(env("ADD", "stale", pod2), conf("1.1.0", vf2).dump());
  ASSERT_EQ(add2.status, 0) << add2.describe();

  CniEnv gcEnv;
  gcEnv.command = "GC";
  gcEnv.containerId = "";
  gcEnv.netns = "";
  gcEnv.ifName = "";
  gcEnv.path = kCniBin;
  json gc = conf("1.1.0", vf1);
  gc.erase("device");
  gc["cni.dev/valid-attachments"] = {{{"containerID", "keep"}, {"ifname", "net1"}}};
  Exec collected = ibcni(gcEnv, gc.dump());
  EXPECT_EQ(collected.status, 0) << collected.describe();
  EXPECT_EQ(collected.out, "");
  EXPECT_TRUE(linkState(pod1.netns(), "net1")) << "a valid attachment was touched";
  expectPodEmpty(pod2);
  auto back = linkState(host(), vf2);
  ASSERT_TRUE(back) << vf2 << " is not back in the host";
  EXPECT_EQ(back->mtu, before2->mtu);
  EXPECT_EQ(records().size(), 1U);

  CniEnv statusEnv = gcEnv;
  statusEnv.command = "STATUS";
  statusEnv.path = std::nullopt;
  Exec ready = ibcni(statusEnv, conf("1.1.0", vf2).dump());
  EXPECT_EQ(ready.status, 0) << ready.describe();
  Exec busy = ibcni(statusEnv, conf("1.1.0", vf1).dump());
  EXPECT_EQ(busy.status, 1) << "vf1 is attached: a static device cannot serve another ADD\n" << busy.describe();
  EXPECT_EQ(jsonOut(busy).value("code", 0U), 50U) << busy.describe();
  Exec tooOld = ibcni(statusEnv, conf("1.0.0", vf2).dump());
  EXPECT_EQ(jsonOut(tooOld).value("code", 0U), 1U) << tooOld.describe();

  Exec del = ibcni(env("DEL", "keep", pod1), conf("1.1.0", vf1).dump());
  EXPECT_EQ(del.status, 0) << del.describe();
}

// ---------------------------------------------------------------------------------------------
// 7. Chained with Debian's tuning plugin

TEST_F(BinaryTest, ChainedWithTuningPlugin) {
  const std::string tuningBin = std::string(kCniBin) + "/tuning";
  if (!fs::exists(tuningBin)) {
    GTEST_SKIP() << tuningBin << " is not installed (Debian package containernetworking-plugins)";
  }
  const std::string vf = makeVf();
  const auto before = linkState(host(), vf);
  TestNetns& pod = makePod();
  const json c = conf("1.0.0", vf, hostLocal());
  Exec add = ibcni(env("ADD", "cid-chain", pod), c.dump());
  ASSERT_EQ(add.status, 0) << add.describe();
  const json ours = jsonOut(add);

  json tuning = {{"cniVersion", "1.0.0"},
                 {"name", network_},
                 {"type", "tuning"},
                 {"sysctl", {{"net.ipv4.conf.net1.arp_notify", "1"}}},
                 {"dataDir", (tmp_.path() / "tuning").string()},
                 {"prevResult", ours}};
  CniEnv te = env("ADD", "cid-chain", pod);
  Exec tuned = runProgram(tuningBin, te.toVector(), tuning.dump());
  ASSERT_EQ(tuned.status, 0) << "tuning rejected ibcni's result\n" << tuned.describe();
  auto tunedResult = oneJsonDocument(tuned.out);
  ASSERT_TRUE(tunedResult && tunedResult->is_object()) << tuned.describe();
  auto sysctl = pod.run([] { return readFile("/proc/sys/net/ipv4/conf/net1/arp_notify"); });
  ASSERT_TRUE(sysctl.has_value()) << sysctl.error().describe();
  EXPECT_EQ(*sysctl, "1\n") << "tuning did not apply its sysctl in the pod";

  json check = c;
  check["prevResult"] = *tunedResult;
  Exec checked = ibcni(env("CHECK", "cid-chain", pod), check.dump());
  EXPECT_EQ(checked.status, 0) << checked.describe();

  te.command = "DEL";
  tuning["prevResult"] = *tunedResult;
  Exec untuned = runProgram(tuningBin, te.toVector(), tuning.dump());
  EXPECT_EQ(untuned.status, 0) << untuned.describe();
  Exec del = ibcni(env("DEL", "cid-chain", pod), check.dump());
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_EQ(linkState(host(), vf), before);
  expectPodEmpty(pod);
}

// ---------------------------------------------------------------------------------------------
// 8. Concurrency

/// Runs every request at once (each on a thread that first enters the host namespace).
std::vector<Exec> runParallel(const os::Netns& host, const std::vector<std::pair<CniEnv, std::string>>& requests) {
  std::vector<Exec> runs(requests.size());
  std::latch start(static_cast<std::ptrdiff_t>(requests.size()));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      auto scope = ScopedHostNetns::enter(host);
      start.arrive_and_wait();
      if (!scope) {
        runs[i].err = scope.error().describe();
        return;
      }
      runs[i] = ibcni(requests[i].first, requests[i].second);
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return runs;
}

TEST_F(BinaryTest, EightParallelAddsAndDels) {
  constexpr int kPods = 8;
  std::vector<std::string> vfs;
  std::vector<LinkState> befores;
  std::vector<TestNetns*> pods;
  std::vector<std::pair<CniEnv, std::string>> adds;
  std::vector<std::pair<CniEnv, std::string>> dels;
  for (int i = 0; i < kPods; ++i) {
    vfs.push_back(makeVf(1500, i % 2 == 0));
    befores.push_back(linkState(host(), vfs.back()).value_or(LinkState{}));
    pods.push_back(&makePod("pod" + std::to_string(i)));
    const std::string cfg = conf("1.0.0", vfs.back(), hostLocal()).dump();
    adds.emplace_back(env("ADD", "cid-par-" + std::to_string(i), *pods.back()), cfg);
    dels.emplace_back(env("DEL", "cid-par-" + std::to_string(i), *pods.back()), cfg);
  }
  auto added = runParallel(host(), adds);
  std::set<std::string> ips;
  for (int i = 0; i < kPods; ++i) {
    SCOPED_TRACE("pod " + std::to_string(i));
    const Exec& r = added[static_cast<std::size_t>(i)];
    ASSERT_EQ(r.status, 0) << r.describe();
    json res = jsonOut(r);
    ASSERT_TRUE(res.contains("ips") && res["ips"].size() == 1) << r.out;
    const std::string ip = res["ips"][0].value("address", "");
    ips.insert(ip);
    auto addrs = addresses(pods[static_cast<std::size_t>(i)]->netns(), "net1");
    EXPECT_EQ(addrs, std::vector<std::string>{ip});
    EXPECT_FALSE(linkState(host(), vfs[static_cast<std::size_t>(i)]));
  }
  EXPECT_EQ(ips.size(), static_cast<std::size_t>(kPods))
      << "addresses are not distinct: " << ::testing::PrintToString(ips);
  EXPECT_EQ(reservations().size(), static_cast<std::size_t>(kPods));
  EXPECT_EQ(records().size(), static_cast<std::size_t>(kPods));

  auto deleted = runParallel(host(), dels);
  for (int i = 0; i < kPods; ++i) {
    SCOPED_TRACE("pod " + std::to_string(i));
    const auto u = static_cast<std::size_t>(i);
    EXPECT_EQ(deleted[u].status, 0) << deleted[u].describe();
    EXPECT_EQ(linkState(host(), vfs[u]), befores[u]);
    expectPodEmpty(*pods[u]);
  }
  EXPECT_TRUE(reservations().empty()) << ::testing::PrintToString(reservations());
  EXPECT_TRUE(records().empty());
}

TEST_F(BinaryTest, TwoParallelAddsForOneDevice) {
  const std::string vf = makeVf(1500, true);
  const auto before = linkState(host(), vf);
  ASSERT_TRUE(before);
  TestNetns& podA = makePod("podA");
  TestNetns& podB = makePod("podB");
  const std::string cfg = conf("1.0.0", vf, hostLocal()).dump();
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string cidA = "cid-a" + std::to_string(round);
    const std::string cidB = "cid-b" + std::to_string(round);
    auto runs = runParallel(host(), {{env("ADD", cidA, podA), cfg}, {env("ADD", cidB, podB), cfg}});
    const int winners = (runs[0].status == 0 ? 1 : 0) + (runs[1].status == 0 ? 1 : 0);
    ASSERT_EQ(winners, 1) << "A: " << runs[0].describe() << "\nB: " << runs[1].describe();
    const bool aWon = runs[0].status == 0;
    const Exec& loser = aWon ? runs[1] : runs[0];
    TestNetns& winPod = aWon ? podA : podB;
    TestNetns& losePod = aWon ? podB : podA;
    const std::string winCid = aWon ? cidA : cidB;
    const std::string loseCid = aWon ? cidB : cidA;
    EXPECT_EQ(loser.status, 1);
    const unsigned code = jsonOut(loser).value("code", 0U);
    EXPECT_TRUE(code == 101 || code == 100) << "the loser must fail with 101 (busy) or 100\n" << loser.describe();

    EXPECT_TRUE(linkState(winPod.netns(), "net1"));
    expectPodEmpty(losePod);
    auto res = reservations();
    ASSERT_EQ(res.size(), 1U) << ::testing::PrintToString(res);
    EXPECT_NE(res.begin()->second.find(winCid), std::string::npos);
    auto recs = records();
    ASSERT_EQ(recs.size(), 1U);
    EXPECT_EQ(recs[0].parent_path().filename().string() + "/" + recs[0].filename().string(), winCid + "/net1.json");

    // The runtime DELs the failed attachment: that must not take the winner's device.
    Exec loseDel = ibcni(env("DEL", loseCid, losePod), cfg);
    EXPECT_EQ(loseDel.status, 0) << loseDel.describe();
    EXPECT_TRUE(linkState(winPod.netns(), "net1")) << "the loser's DEL took the winner's device";
    EXPECT_EQ(reservations().size(), 1U);

    Exec winDel = ibcni(env("DEL", winCid, winPod), cfg);
    EXPECT_EQ(winDel.status, 0) << winDel.describe();
    EXPECT_EQ(linkState(host(), vf), before);
    expectPodEmpty(winPod);
    EXPECT_TRUE(reservations().empty());
    EXPECT_TRUE(records().empty());
  }
}

}  // namespace
}  // namespace ibcni::testing
