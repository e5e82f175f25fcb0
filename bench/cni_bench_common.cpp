// SPDX-License-Identifier: Apache-2.0
// What cni_bench's parts share (cni_bench.h).
#include <net/if.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cni_bench.h"

namespace ibcni::bench {

namespace fs = std::filesystem;
using nlohmann::json;

void fatal(const std::string& what) {
  std::fprintf(stderr, "cni_bench: %s\n", what.c_str());
  std::exit(2);
}

// ---------------------------------------------------------------------------------------------
// Processes, namespaces, links

std::vector<char*> cstrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) {
    out.push_back(const_cast<char*>(s.c_str()));
  }
  out.push_back(nullptr);
  return out;
}

ProgramRun run(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& input) {
  return testing::runProgram(argv, env, input);
}

TestNetns makeNetns(const std::string& name) {
  auto ns = TestNetns::create(name);
  if (!ns) {
    fatal("netns " + name + ": " + ns.error().describe());
  }
  return std::move(*ns);
}

void sh(const std::string& command) {
  if (std::system(command.c_str()) != 0) {
    fatal("failed: " + command);
  }
}

bool linkInHost(const std::string& name) { return ::if_nametoindex(name.c_str()) != 0; }

std::string firstAddress(const std::string& resultJson) {
  json r = json::parse(resultJson, nullptr, false);
  if (r.is_discarded() || !r.contains("ips") || !r["ips"].is_array() || r["ips"].empty()) {
    return {};
  }
  std::string a = r["ips"][0].value("address", "");
  return a.substr(0, a.find('/'));
}

// ---------------------------------------------------------------------------------------------
// Contenders

const std::vector<Contender> kContenders = {
    {Kind::kIbcni, "ibcni (ibcni-ipam in process)", "ibcni"},
    {Kind::kHostDevice, "host-device + host-local", "hostdevice"},
    {Kind::kIbcniHostLocal, "ibcni + host-local (delegated)", "ibcnihl"},
};

namespace {

json ipamFor(Kind kind, const Paths& p, const std::string& subnet) {
  json range = {{"subnet", subnet + ".0.0/16"}, {"gateway", subnet + ".0.1"}};
  json route = {{"dst", "10.200.0.0/16"}};
  json ipam = json::object();
  ipam["ranges"] = json::array({json::array({range})});
  ipam["routes"] = json::array({route});
  if (kind == Kind::kIbcni) {
    ipam["type"] = "ibcni-ipam";
    ipam["dataDir"] = p.tmpfs + "/ibcni-ipam";
  } else {
    ipam["type"] = "host-local";
    ipam["dataDir"] = p.disk + (kind == Kind::kHostDevice ? "/host-local" : "/host-local-ibcni");
  }
  return ipam;
}

}  // namespace

json pluginConfig(Kind kind, const Paths& p, const std::string& network, const std::string& subnet,
                  const std::string& device, const std::string& logLevel) {
  json c = {{"cniVersion", "1.0.0"}, {"name", network}};
  if (kind == Kind::kHostDevice) {
    c["type"] = "host-device";
  } else {
    c["type"] = "ibcni";
    c["mode"] = "sriov";
    c["stateDir"] = p.tmpfs + "/ibcni-state";
    if (!logLevel.empty()) {
      c["logLevel"] = logLevel;
    }
  }
  if (!device.empty()) {
    c["device"] = device;
  }
  c["ipam"] = ipamFor(kind, p, subnet);
  return c;
}

std::string binaryFor(Kind kind, const Paths& p) {
  return kind == Kind::kHostDevice ? p.ref + "/host-device" : p.ibcni;
}

std::string cniPathFor(const Paths& p) { return fs::path(p.ibcni).parent_path().string() + ":" + p.ref; }

std::vector<std::string> cniEnv(const char* verb, const std::string& cid, const std::string& netns,
                                const std::string& ifName, const Paths& p) {
  return {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
          std::string("CNI_COMMAND=") + verb,
          "CNI_CONTAINERID=" + cid,
          "CNI_NETNS=" + netns,
          "CNI_IFNAME=" + ifName,
          "CNI_PATH=" + cniPathFor(p)};
}

// ---------------------------------------------------------------------------------------------
// Reporting

CycleStats summarize(const std::vector<CycleFigures>& figures) {
  CycleStats s;
  for (const auto& f : figures) {
    s.add.push_back(stats(f.add));
    s.del.push_back(stats(f.del));
    s.addDel.push_back(stats(f.addDel));
    s.addRss.push_back(stats(f.addRss));
    s.delRss.push_back(stats(f.delRss));
  }
  return s;
}

namespace {

bool g_ok = true;
std::vector<std::string> g_verdicts;

}  // namespace

void verdict(bool pass, const std::string& what) {
  g_verdicts.push_back(std::string(pass ? "PASS " : "FAIL ") + what);
  g_ok = g_ok && pass;
}

void speedVerdict(const char* part, const std::vector<Stats>& addDel, double goal) {
  char what[256];
  std::snprintf(what, sizeof what, "%s: ibcni ADD+DEL median %.1fx faster than host-device + host-local (goal %.0fx)",
                part, addDel[1].median / addDel[0].median, goal);
  verdict(addDel[1].median >= goal * addDel[0].median, what);
}

bool allPassed() { return g_ok; }

const std::vector<std::string>& verdicts() { return g_verdicts; }

std::string fmtMs(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.2f ms" : "%.1f ms", v);
  return buf;
}

std::string fmtRatio(double num, double den) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fx", den > 0 ? num / den : 0.0);
  return buf;
}

std::string mib(long kib) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(kib) / 1024.0);
  return buf;
}

void printFailure(const std::string& what, const ProgramRun& e) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s failed (exit %d)\nstdout: %s\nstderr: %s\n", what.c_str(), e.status, e.out.c_str(),
               e.err.substr(0, 4000).c_str());
}

void printContenderHeader(const std::string& first) {
  std::printf("| %s | %s | %s | %s | host-device / ibcni |\n|---|---|---|---|---|\n", first.c_str(),
              kContenders[0].label.c_str(), kContenders[1].label.c_str(), kContenders[2].label.c_str());
}

void printContenderRow(const std::string& name, const std::vector<Stats>& s, double Stats::*field) {
  std::printf("| %s | %s | %s | %s | %s |\n", name.c_str(), fmtMs(s[0].*field).c_str(), fmtMs(s[1].*field).c_str(),
              fmtMs(s[2].*field).c_str(), fmtRatio(s[1].*field, s[0].*field).c_str());
}

void printCycleRows(const CycleStats& s, const std::string& add, const std::string& del) {
  printContenderRow(add + " median", s.add, &Stats::median);
  printContenderRow(add + " p99", s.add, &Stats::p99);
  printContenderRow(del + " median", s.del, &Stats::median);
  printContenderRow(del + " p99", s.del, &Stats::p99);
  printContenderRow("ADD+DEL median", s.addDel, &Stats::median);
  printContenderRow("ADD+DEL p99", s.addDel, &Stats::p99);
}

}  // namespace ibcni::bench
