// SPDX-License-Identifier: Apache-2.0
#include "faults/fault_world.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#ifndef IBCNI_FAULTY_BINARY
#error "IBCNI_FAULTY_BINARY must be the path of the built ibcni-faulty executable"
#endif

namespace ibcni::faults {

const std::string& faultyBinary() {
  static const std::string path = [] {
    const char* v = std::getenv("IBCNI_TEST_FAULTY_BINARY");
    return std::string(v != nullptr && *v != '\0' ? v : IBCNI_FAULTY_BINARY);
  }();
  return path;
}

const char* toString(IpamKind kind) { return kind == IpamKind::kIbcniIpam ? "ibcni-ipam" : "host-local"; }

namespace {

void noLinkLocal(const os::Netns& ns) {
  for (const char* key : {"net/ipv6/conf/default/addr_gen_mode", "net/ipv6/conf/all/addr_gen_mode"}) {
    EXPECT_TRUE(setSysctl(ns, key, "1")) << key;
  }
}

}  // namespace

FaultBench::FaultBench(World& world, IpamKind kind) : world_(world), kind_(kind) { noLinkLocal(world_.host()); }

TestNetns& FaultBench::pod(const std::string& label) {
  TestNetns& p = world_.pod(label);
  noLinkLocal(p.netns());
  pods_.push_back(&p);
  return p;
}

std::unique_ptr<TestNetns> FaultBench::ownPod(const std::string& label) {
  auto p = world_.ownPod(label);
  noLinkLocal(p->netns());
  pods_.push_back(p.get());
  return p;
}

void FaultBench::forget(const TestNetns& pod) { std::erase(pods_, &pod); }

std::string FaultBench::vf() {
  std::string name = world_.vf(1500, /*up=*/true);
  conformance::ip(world_.host(), {"link", "set", "dev", name, "alias", "admin note"});
  return name;
}

json FaultBench::ipam() const {
  if (kind_ == IpamKind::kHostLocal) {
    return {{"type", "host-local"},
            {"dataDir", (world_.tmp() / "host-local").string()},
            {"ranges", json::array({json::array({{{"subnet", "10.79.0.0/24"}}})})},
            {"routes", json::array({{{"dst", "10.97.0.0/16"}}})}};
  }
  return {{"type", "ibcni-ipam"},
          {"dataDir", world_.dataDir().string()},
          {"ranges",
           json::array({json::array({{{"subnet", "10.77.0.0/24"}}}), json::array({{{"subnet", "fd00:77::/64"}}})})},
          {"routes", json::array({{{"dst", "10.99.0.0/16"}}, {{"dst", "fd00:99::/48"}}})}};
}

json FaultBench::conf(const std::string& vf, const std::string& version) const {
  // Debian's host-local speaks the spec up to 1.0.0.
  json c = world_.conf(kind_ == IpamKind::kHostLocal && version == "1.1.0" ? "1.0.0" : version, vf, ipam());
  c["mtu"] = 4000;
  c["runtimeConfig"] = {{"mac", "0a:58:0a:4d:00:99"}};
  return c;
}

fs::path FaultBench::storeDir() const {
  return (kind_ == IpamKind::kHostLocal ? world_.tmp() / "host-local" : world_.dataDir()) / world_.network();
}

std::string FaultBench::snapshot() const {
  NodeSnapshot s;
  s.netns("host", world_.host());
  for (const auto* p : pods_) {
    s.netns(fs::path(p->path()).filename().string(), p->netns());
  }
  s.stateDir(world_.stateDir());
  s.ipamStore(kind_ == IpamKind::kHostLocal ? "host-local" : "ipam", storeDir());
  return s.take();
}

std::vector<std::string> FaultBench::temporaryLinkNames() const {
  std::vector<std::string> out;
  for (const auto& n : temporaryLinks(world_.host())) {
    out.push_back("host:" + n);
  }
  for (const auto* p : pods_) {
    for (const auto& n : temporaryLinks(p->netns())) {
      out.push_back(p->path() + ":" + n);
    }
  }
  return out;
}

std::vector<std::string> FaultBench::storeProblems() const {
  if (kind_ != IpamKind::kIbcniIpam || !fs::exists(storeDir())) {
    return {};
  }
  return verifyIbcniIpamStore(ipam().dump(), world_.dataDir(), world_.network());
}

Exec FaultBench::runUnchecked(const std::string& binary, const std::string& command, const std::string& cid,
                              const TestNetns& pod, const json& conf, const std::vector<std::string>& extraEnv,
                              const std::string& ifName, std::chrono::milliseconds timeout) const {
  CniEnv env = World::env(command, cid, pod, ifName);
  env.extra = extraEnv;
  return conformance::execProgram(binary, env.toVector(), conf.dump(), timeout);
}

Exec FaultBench::run(const std::string& binary, const std::string& command, const std::string& cid,
                     const TestNetns& pod, const json& conf, const std::vector<std::string>& extraEnv,
                     const std::string& ifName, std::chrono::milliseconds timeout) const {
  Exec run = runUnchecked(binary, command, cid, pod, conf, extraEnv, ifName, timeout);
  std::optional<conformance::ResultContext> ctx;
  if (command == "ADD") {
    ctx =
        conformance::ResultContext{conf.value("cniVersion", ""), conformance::ResultKind::kPlugin, ifName, pod.path()};
  }
  conformance::expectProtocol(run, command, ctx);
  return run;
}

std::vector<std::string> readLines(const fs::path& p) {
  std::ifstream f(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);) {
    out.push_back(line);
  }
  return out;
}

std::string traceOp(const std::string& line) {
  std::istringstream in(line);
  std::string step;
  std::string op;
  in >> step >> op;
  return op;
}

}  // namespace ibcni::faults
