// SPDX-License-Identifier: Apache-2.0
// cni_bench's breakdown part: where the time of one ibcni ADD goes, from its own timing line at
// logLevel debug (lib/log/timing.h), against bench/netdev_floor, the same kernel operations over
// raw rtnetlink and nothing else, exec'd and timed the same way.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

#include "cni_bench.h"

namespace ibcni::bench {

namespace {

std::int64_t monoNs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

struct Timing {
  bool ok = false;
  std::map<std::string, double> us;  // laps
  double startUs = 0;                // fork -> main
  double exitUs = 0;                 // last mark -> wait4
};

Timing parseTiming(const ProgramRun& e) {
  Timing t;
  const auto pos = e.err.rfind("timing: start=");
  if (pos == std::string::npos) {
    return t;
  }
  std::istringstream is(e.err.substr(pos + 8, e.err.find('\n', pos) - pos - 8));
  std::string tok;
  while (is >> tok) {
    const auto eq = tok.find('=');
    if (eq == std::string::npos) {
      continue;
    }
    const std::string key = tok.substr(0, eq);
    const std::string value = tok.substr(eq + 1);
    if (key == "start") {
      t.startUs = static_cast<double>(std::stoll(value) - monoNs(e.started)) / 1000.0;
    } else if (key == "end") {
      t.exitUs = static_cast<double>(monoNs(e.reaped) - std::stoll(value)) / 1000.0;
      t.ok = true;
    } else {
      t.us[key] += std::stod(value);
    }
  }
  return t;
}

}  // namespace

bool breakdownPart(const Paths& p, const Options& o) {
  std::printf(
      "\n## Where the time of one ADD goes (%d cycles: ibcni at logLevel debug, ibcni at warn, "
      "host-device + host-local, the floor; interleaved)\n\n",
      o.breakdown);
  struct Runner {
    std::string label;
    std::vector<std::string> argv;
    std::string conf;
  };
  const std::vector<std::string> floorArgv = {p.floor, kDevice, "10.10.0.2/16", "10.10.0.1", "10.200.0.0/16"};
  const std::vector<Runner> runners = {
      {"ibcni, debug", {p.ibcni}, pluginConfig(Kind::kIbcni, p, "benchnet", "10.10", kDevice, "debug").dump()},
      {"ibcni, warn", {p.ibcni}, pluginConfig(Kind::kIbcni, p, "benchnet", "10.10", kDevice).dump()},
      {"floor", floorArgv, pluginConfig(Kind::kIbcni, p, "benchnet", "10.10", kDevice).dump()},
      {"host-device",
       {binaryFor(Kind::kHostDevice, p)},
       pluginConfig(Kind::kHostDevice, p, "benchnet", "10.10", kDevice).dump()},
  };
  constexpr std::size_t kDebug = 0;
  constexpr std::size_t kWarn = 1;
  constexpr std::size_t kFloor = 2;
  constexpr std::size_t kPeer = 3;
  std::vector<std::vector<Timing>> timings(runners.size());
  std::vector<std::vector<double>> addTotal(runners.size());
  std::vector<std::vector<double>> delTotal(runners.size());
  for (int i = 0; i < 3 + o.breakdown; ++i) {
    for (std::size_t k = 0; k < runners.size(); ++k) {
      const std::size_t r = (k + static_cast<std::size_t>(i)) % runners.size();
      std::optional<TestNetns> ns = makeNetns("bd-" + std::to_string(i) + "-" + std::to_string(r));
      const std::string cid = "bd-" + std::to_string(r) + "-" + std::to_string(i);
      ProgramRun add = run(runners[r].argv, cniEnv("ADD", cid, ns->path(), kIfName, p), runners[r].conf);
      ProgramRun del = run(runners[r].argv, cniEnv("DEL", cid, ns->path(), kIfName, p), runners[r].conf);
      ns.reset();
      if (add.status != 0 || del.status != 0 || !linkInHost(kDevice)) {
        printFailure(runners[r].label + (add.status != 0 ? " ADD" : " DEL"), add.status != 0 ? add : del);
        return false;
      }
      if (i < 3) {
        continue;
      }
      addTotal[r].push_back(ms(add.elapsed()));
      delTotal[r].push_back(ms(del.elapsed()));
      if (r == kDebug || r == kFloor) {
        Timing t = parseTiming(add);
        if (!t.ok) {
          std::fprintf(stderr, "%s: no timing line on stderr:\n%s\n", runners[r].label.c_str(), add.err.c_str());
          return false;
        }
        timings[r].push_back(std::move(t));
      }
    }
  }
  auto phase = [&](std::size_t r, const std::string& key) -> std::string {
    if (timings[r].empty()) {
      return "-";
    }
    std::vector<double> v;
    for (const auto& t : timings[r]) {
      if (key == "@start") {
        v.push_back(t.startUs);
      } else if (key == "@exit") {
        v.push_back(t.exitUs);
      } else if (auto it = t.us.find(key); it != t.us.end()) {
        v.push_back(it->second);
      } else {
        return "-";
      }
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f ms", stats(v).median / 1000.0);
    return buf;
  };
  struct Row {
    const char* name;
    const char* key;
  };
  const std::vector<Row> rows = {
      {"process start: fork, exec, dynamic linking, static init (fork → main)", "@start"},
      {"read stdin", "stdin"},
      {"set-up: netlink, sysfs, IPAM objects", "setup"},
      {"config parse, environment, CNI_ARGS, log set-up", "parse"},
      {"open the pod netns (floor: and its rtnetlink sockets)", "netns"},
      {"attachment record lookup (ADD twice?)", "state-read"},
      {"resolve the device (netlink, sysfs, node-device checks), device lock, resolve again", "resolve"},
      {"attachment record written ahead (write, rename; stateDir on tmpfs)", "state-ahead"},
      {"link: alias, rename, move to the pod, rename, up, read back (netlink)", "link"},
      {"IPAM: ibcni-ipam in process (its store on tmpfs)", "ipam"},
      {"address + route (netlink)", "addr"},
      {"result", "result"},
      {"attachment record written (write, fsync, rename; stateDir on tmpfs)", "state-write"},
      {"result JSON, commit, log", "finish"},
      {"exit: stdout, teardown, parent's wait4 (last mark → wait4)", "@exit"},
  };
  std::printf("| phase of one ADD (medians) | ibcni (logLevel debug) | floor (raw netlink) |\n|---|---|---|\n");
  std::set<std::string> known;
  for (const auto& row : rows) {
    known.insert(row.key);
    std::printf("| %s | %s | %s |\n", row.name, phase(kDebug, row.key).c_str(), phase(kFloor, row.key).c_str());
  }
  // Marks this table does not know yet (the plugin's phases may change): shown, never dropped.
  std::vector<std::string> others;
  for (const auto& t : timings[kDebug]) {
    for (const auto& [key, value] : t.us) {
      if (known.count(key) == 0 && std::find(others.begin(), others.end(), key) == others.end()) {
        others.push_back(key);
      }
    }
  }
  for (const auto& key : others) {
    std::printf("| other mark: %s | %s | %s |\n", key.c_str(), phase(kDebug, key).c_str(), phase(kFloor, key).c_str());
  }
  const Stats dbg = stats(addTotal[kDebug]);
  const Stats warn = stats(addTotal[kWarn]);
  const Stats floor = stats(addTotal[kFloor]);
  std::printf("| **ADD total, fork → wait4** | %s (at warn: %s) | %s |\n", fmtMs(dbg.median).c_str(),
              fmtMs(warn.median).c_str(), fmtMs(floor.median).c_str());
  std::printf("| ADD total p99 | %s (at warn: %s) | %s |\n", fmtMs(dbg.p99).c_str(), fmtMs(warn.p99).c_str(),
              fmtMs(floor.p99).c_str());
  const Stats dDel = stats(delTotal[kWarn]);
  const Stats fDel = stats(delTotal[kFloor]);
  std::printf("| DEL total, fork → wait4 (ibcni at warn) | %s | %s |\n", fmtMs(dDel.median).c_str(),
              fmtMs(fDel.median).c_str());
  std::printf("\nibcni / floor (medians, ibcni at warn): ADD %.2f, DEL %.2f, ADD+DEL %.2f.\n",
              warn.median / floor.median, dDel.median / fDel.median,
              (warn.median + dDel.median) / (floor.median + fDel.median));
  // The same cycles, host-device + host-local beside them: what each costs above the kernel's work.
  const Stats pAdd = stats(addTotal[kPeer]);
  const Stats pDel = stats(delTotal[kPeer]);
  const double floorAddDel = floor.median + fDel.median;
  const double oursAbove = warn.median + dDel.median - floorAddDel;
  const double peerAbove = pAdd.median + pDel.median - floorAddDel;
  std::printf("\n| same cycles, medians | floor | ibcni (warn) | host-device + host-local |\n|---|---|---|---|\n");
  std::printf("| ADD | %s | %s | %s |\n| DEL | %s | %s | %s |\n", fmtMs(floor.median).c_str(),
              fmtMs(warn.median).c_str(), fmtMs(pAdd.median).c_str(), fmtMs(fDel.median).c_str(),
              fmtMs(dDel.median).c_str(), fmtMs(pDel.median).c_str());
  // Within the noise of the floor itself, a ratio of the two would mean nothing.
  const std::string peerVsOurs = oursAbove > 0.5 ? fmtRatio(peerAbove, oursAbove) + " ibcni's"
                                                 : "ibcni is at the floor, within its noise";
  std::printf("| ADD+DEL above the floor | | %s | %s (%s) |\n", fmtMs(oursAbove).c_str(), fmtMs(peerAbove).c_str(),
              peerVsOurs.c_str());
  std::printf("| ADD+DEL, ratio to host-device's | %.2f | %.2f | 1 |\n", floorAddDel / (pAdd.median + pDel.median),
              (warn.median + dDel.median) / (pAdd.median + pDel.median));
  return true;
}

}  // namespace ibcni::bench
