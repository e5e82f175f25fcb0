// SPDX-License-Identifier: Apache-2.0
#include "conformance/harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <latch>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "support/cni_conf.h"

#ifndef IBCNI_BINARY
#error "IBCNI_BINARY must be the path of the built ibcni executable"
#endif
#ifndef IBCNI_IPAM_BINARY
#error "IBCNI_IPAM_BINARY must be the path of the built ibcni-ipam executable"
#endif

namespace ibcni::conformance {

namespace {

std::string fromEnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return std::string(v != nullptr && *v != '\0' ? v : fallback);
}

std::string tempBase() { return fromEnvOr("TMPDIR", "/tmp"); }

}  // namespace

const std::string& ibcniBinary() {
  static const std::string path = fromEnvOr("IBCNI_TEST_BINARY", IBCNI_BINARY);
  return path;
}

const std::string& ipamBinary() {
  static const std::string path = fromEnvOr("IBCNI_TEST_IPAM_BINARY", IBCNI_IPAM_BINARY);
  return path;
}

// ---------------------------------------------------------------------------------------------
// Exec

json Exec::parsed() const { return oneJsonDocument(out).value_or(json::object()); }

unsigned Exec::code() const {
  json j = parsed();
  auto it = j.find("code");
  return it != j.end() && it->is_number_unsigned() ? it->get<unsigned>() : 0U;
}

std::string Exec::msg() const {
  json j = parsed();
  auto it = j.find("msg");
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Exec execProgram(const std::string& path, const std::vector<std::string>& env, const std::optional<std::string>& input,
                 std::chrono::milliseconds timeout) {
  return Exec{testing::runProgram(path, env, input, timeout)};
}

void expectProtocol(const Exec& run, const std::string& verb, const std::optional<ResultContext>& ctx) {
  if (run.status == 0) {
    if (verb == "ADD" || verb == "VERSION") {
      auto j = oneJsonDocument(run.out);
      ASSERT_TRUE(j && j->is_object()) << verb << ": stdout is not exactly one JSON object\n" << run.describe();
      if (verb == "VERSION") {
        auto problems = validateVersion(*j);
        EXPECT_TRUE(problems.empty()) << "VERSION answer:\n" << describeProblems(problems) << run.describe();
      } else if (ctx) {
        auto problems = validateAddResult(*j, *ctx);
        EXPECT_TRUE(problems.empty()) << "ADD result (cniVersion " << ctx->version << "):\n"
                                      << describeProblems(problems) << run.describe();
      }
    } else {
      EXPECT_EQ(run.out, "") << verb << ": a successful " << verb << " prints nothing\n" << run.describe();
    }
    return;
  }
  EXPECT_NE(run.status, 0);
  EXPECT_LT(run.status, 128) << verb << ": the plugin died of a signal\n" << run.describe();
  auto j = oneJsonDocument(run.out);
  ASSERT_TRUE(j.has_value()) << verb << ": the error on stdout is not exactly one JSON document\n" << run.describe();
  auto problems = validateError(*j);
  EXPECT_TRUE(problems.empty()) << verb << ": error object:\n" << describeProblems(problems) << run.describe();
}

void expectError(const Exec& run, unsigned code, const std::vector<std::string>& words) {
  EXPECT_NE(run.status, 0) << "expected error " << code << "\n" << run.describe();
  EXPECT_EQ(run.code(), code) << run.describe();
  const std::string msg = run.msg();
  for (const auto& w : words) {
    EXPECT_NE(msg.find(w), std::string::npos) << "msg does not name \"" << w << "\"\n" << run.describe();
  }
}

std::vector<Exec> runParallel(const os::Netns& host, const std::vector<std::function<Exec()>>& jobs) {
  std::vector<Exec> runs(jobs.size());
  std::latch start(static_cast<std::ptrdiff_t>(jobs.size()));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    threads.emplace_back([&, i] {
      auto scope = testing::ScopedHostNetns::enter(host);
      start.arrive_and_wait();
      if (!scope) {
        runs[i].err = scope.error().describe();
        return;
      }
      runs[i] = jobs[i]();
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return runs;
}

// ---------------------------------------------------------------------------------------------
// Links and files

std::string ip(const os::Netns& ns, const std::vector<std::string>& args) {
  auto out = testing::runIp(ns, args);
  EXPECT_TRUE(out.has_value()) << out.error().describe();
  return out.value_or("");
}

void writeFile(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::trunc);
  f << text;
}

void writeScript(const fs::path& p, const std::string& text) {
  writeFile(p, text);
  fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                         fs::perms::others_exec);
}

// ---------------------------------------------------------------------------------------------
// Recorder

Recorder::Recorder(const fs::path& dir, const std::string& name) : dir_(dir), log_(dir / (name + ".log")) {
  fs::create_directories(log_);
  writeScript(dir / name,
              "#!/bin/sh\n"
              "# conformance recorder: logs each call, then answers as configured in its log directory\n"
              "log='" +
                  log_.string() +
                  "'\n"
                  "verb=${CNI_COMMAND:-NONE}\n"
                  "seq=$(date +%s%N)-$$\n"
                  "cat > \"$log/$seq.stdin\"\n"
                  "env | grep -E '^(CNI_|CONFORMANCE_)' > \"$log/$seq.env\"\n"
                  "readlink /proc/$$/ns/net > \"$log/$seq.netns\"\n"
                  "echo \"$verb\" > \"$log/$seq.verb\"\n"
                  "echo \"conformance recorder: $verb on stderr\" >&2\n"
                  "if [ -f \"$log/fail-$verb\" ]; then cat \"$log/fail-$verb\"; exit 1; fi\n"
                  "if [ \"$verb\" = ADD ] && [ -f \"$log/result-ADD\" ]; then cat \"$log/result-ADD\"; fi\n"
                  "exit 0\n");
}

void Recorder::setResult(const json& result) const { writeFile(log_ / "result-ADD", result.dump()); }

void Recorder::failVerb(const std::string& verb, const json& error) const {
  writeFile(log_ / ("fail-" + verb), error.dump());
}

void Recorder::clearFailure(const std::string& verb) const {
  std::error_code ec;
  fs::remove(log_ / ("fail-" + verb), ec);
}

std::vector<Recorder::Call> Recorder::calls() const {
  std::vector<std::string> seqs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(log_, ec)) {
    if (e.path().extension() == ".verb") {
      seqs.push_back(e.path().stem().string());
    }
  }
  std::sort(seqs.begin(), seqs.end());
  std::vector<Call> out;
  for (const auto& s : seqs) {
    Call c;
    c.verb = readFile(log_ / (s + ".verb"));
    while (!c.verb.empty() && c.verb.back() == '\n') {
      c.verb.pop_back();
    }
    c.stdinText = readFile(log_ / (s + ".stdin"));
    c.netns = readFile(log_ / (s + ".netns"));
    while (!c.netns.empty() && c.netns.back() == '\n') {
      c.netns.pop_back();
    }
    std::istringstream lines(readFile(log_ / (s + ".env")));
    for (std::string line; std::getline(lines, line);) {
      auto eq = line.find('=');
      if (eq != std::string::npos) {
        c.env[line.substr(0, eq)] = line.substr(eq + 1);
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<std::string> Recorder::verbs() const {
  std::vector<std::string> out;
  for (const auto& c : calls()) {
    out.push_back(c.verb);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// World

World::World() {
  if (::geteuid() != 0) {
    skip_ = "the conformance suite needs root: it creates network namespaces and moves links (euid " +
            std::to_string(::geteuid()) + ")";
    return;
  }
  for (const std::string* bin : {&ibcniBinary(), &ipamBinary()}) {
    if (!fs::exists(*bin)) {
      failure_ = "the built plugin is missing: " + *bin;
      return;
    }
  }
  auto host = TestNetns::create("host");
  if (!host) {
    (testing::isPermissionError(host.error()) ? skip_ : failure_) =
        "cannot create a network namespace: " + host.error().describe();
    return;
  }
  host_.emplace(std::move(*host));
  auto scope = testing::ScopedHostNetns::enter(host_->netns());
  if (!scope) {
    failure_ = "cannot enter the test's host namespace: " + scope.error().describe();
    return;
  }
  scope_.emplace(std::move(*scope));
  // Loopback up, as in any real host: some kernels' route checks want it.
  if (auto r = testing::runIp(host_->netns(), {"link", "set", "lo", "up"}); !r) {
    failure_ = r.error().describe();
    return;
  }
  std::string templ = tempBase() + "/ibcni-conformance-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    failure_ = "mkdtemp " + templ + ": " + std::strerror(errno);
    return;
  }
  tmp_ = templ;
  stateDir_ = tmp_ / "state";
  dataDir_ = tmp_ / "ipam";
  network_ = "net-" + testing::randomIfName("n");
}

World::~World() {
  if (!tmp_.empty()) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  scope_.reset();
  pods_.clear();
  host_.reset();
}

TestNetns& World::pod(const std::string& label) {
  auto ns = ownPod(label);
  pods_.push_back(std::move(ns));
  return *pods_.back();
}

std::unique_ptr<TestNetns> World::ownPod(const std::string& label) {
  auto ns = TestNetns::create(label);
  if (!ns) {
    ADD_FAILURE() << "cannot create a pod namespace: " << ns.error().describe();
    throw std::runtime_error("cannot create a pod namespace");
  }
  auto out = std::make_unique<TestNetns>(std::move(*ns));
  (void)testing::runIp(out->netns(), {"link", "set", "lo", "up"});
  return out;
}

std::string World::vf(unsigned mtu, bool up) {
  std::string vf = testing::randomIfName("vf");
  std::string peer = testing::randomIfName("pr");
  auto r = testing::createVethPair(host(), vf, host(), peer);
  EXPECT_TRUE(r.has_value()) << r.error().describe();
  if (mtu != 1500) {
    ip(host(), {"link", "set", "dev", vf, "mtu", std::to_string(mtu)});
  }
  if (up) {
    ip(host(), {"link", "set", "dev", vf, "up"});
  }
  peers_[vf] = peer;
  return vf;
}

World::PodAndVf World::podAndVf(unsigned mtu, bool up) {
  TestNetns& p = pod();
  std::string v = vf(mtu, up);
  std::optional<LinkState> before = linkState(host(), v);
  return {p, std::move(v), std::move(before)};
}

json World::ipam(const std::string& subnet) const {
  return testing::ipamObject("ibcni-ipam", dataDir_.string(), subnet, "10.99.0.0/16");
}

json World::conf(const std::string& version, const std::string& vf, const std::optional<json>& ipam) const {
  return testing::ibcniConf(version, network_, vf, stateDir_.string(), ipam);
}

json World::ipamConf(const std::string& version, const std::string& subnet) const {
  return {{"cniVersion", version},
          {"name", ipamNetwork()},
          {"type", "macvlan"},
          {"master", "eth0"},
          {"mode", "bridge"},
          {"ipam", testing::ipamObject("ibcni-ipam", dataDir_.string(), subnet, "10.98.0.0/16")}};
}

CniEnv World::env(const std::string& command, const std::string& cid, const TestNetns& pod, const std::string& ifName) {
  CniEnv e;
  e.command = command;
  e.containerId = cid;
  e.netns = pod.path();
  e.ifName = ifName;
  e.path = "/usr/lib/cni";
  return e;
}

CniEnv World::ipamEnv(const std::string& command, const std::string& cid, const std::string& netns,
                      const std::string& ifName) {
  CniEnv e;
  e.command = command;
  e.containerId = cid;
  e.netns = netns;
  e.ifName = ifName;
  e.path = "/usr/lib/cni";
  return e;
}

namespace {

std::optional<ResultContext> contextFor(const CniEnv& env, const std::optional<std::string>& input, ResultKind kind) {
  if (env.command.value_or("") != "ADD" || !input) {
    return std::nullopt;
  }
  auto conf = oneJsonDocument(*input);
  if (!conf || !conf->is_object()) {
    return std::nullopt;
  }
  ResultContext ctx;
  auto version = conf->find("cniVersion");
  ctx.version = version != conf->end() && version->is_string() ? version->get<std::string>() : "";
  ctx.kind = kind;
  if (kind == ResultKind::kPlugin) {
    ctx.ifName = env.ifName;
    ctx.sandbox = env.netns;
  }
  return ctx;
}

}  // namespace

Exec World::ibcniRaw(const CniEnv& env, const std::optional<std::string>& input) const {
  Exec run = execProgram(ibcniBinary(), env.toVector(), input);
  expectProtocol(run, env.command.value_or(""), contextFor(env, input, ResultKind::kPlugin));
  return run;
}

Exec World::ipamRaw(const CniEnv& env, const std::optional<std::string>& input) const {
  Exec run = execProgram(ipamBinary(), env.toVector(), input);
  expectProtocol(run, env.command.value_or(""), contextFor(env, input, ResultKind::kIpam));
  return run;
}

std::vector<fs::path> World::records(const std::string& network) const {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e :
       fs::recursive_directory_iterator(stateDir_ / "attachments" / (network.empty() ? network_ : network), ec)) {
    if (e.is_regular_file()) {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> World::allocations(const std::string& network) const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dataDir_ / (network.empty() ? network_ : network) / "attachments", ec)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void World::expectPodEmpty(const TestNetns& pod) const {
  EXPECT_EQ(linkNames(pod.netns()), std::vector<std::string>{"lo"}) << "pod " << pod.path();
}

void World::expectNothingLeft(const TestNetns& pod) const {
  expectPodEmpty(pod);
  EXPECT_TRUE(noAllocations());
}

void World::expectNothingLeft(const TestNetns& pod, const std::string& vf,
                              const std::optional<LinkState>& before) const {
  EXPECT_EQ(linkState(host(), vf), before);
  expectNothingLeft(pod);
}

}  // namespace ibcni::conformance
