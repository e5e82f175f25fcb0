// SPDX-License-Identifier: Apache-2.0
// cni_bench's events part: what the call event (<stateDir>/events, plugin/state/call_event_ring.h)
// costs an exec'd ADD+DEL. ibcni against ibcni_no_events, the same program built with the append
// compiled out (bench/CMakeLists.txt), interleaved in one run on the same veth stand-in and
// configuration; and the floor: the append alone, in process, timed the same way.
#include <cstdio>
#include <optional>

#include "cni_bench.h"
#include "plugin/state/call_event_ring.h"

namespace ibcni::bench {

namespace {

constexpr double kTargetRatio = 1.02;

// The append alone: `n` events to a ring of its own, each timed.
Stats appendFloor(const Paths& p, int n) {
  const std::string dir = p.tmpfs + "/events-floor";
  state::FileCallEvents sink;
  state::CallEvent e;
  e.verb = cni::Command::kAdd;
  e.network = "benchnet";
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    const auto start = Clock::now();
    auto r = sink.append(dir, e);
    t.push_back(ms(Clock::now() - start));
    if (!r) {
      fatal("append: " + r.error().describe());
    }
  }
  return stats(t);
}

}  // namespace

bool eventsPart(const Paths& p, const Options& o) {
  std::printf("\n## The call event: ADD+DEL exec'd with the append and without it (%d cycles, interleaved)\n\n",
              o.cycles);
  const std::vector<std::string> bins = {p.ibcni, p.noEvents};
  std::vector<std::vector<double>> addDel(2);
  for (int i = 0; i < o.warmup + o.cycles; ++i) {
    for (std::size_t k = 0; k < bins.size(); ++k) {
      const std::size_t c = (k + static_cast<std::size_t>(i)) % bins.size();
      TestNetns pod = makeNetns("events-" + std::to_string(i) + "-" + std::to_string(c));
      const std::string cid = "events-" + std::to_string(c) + "-" + std::to_string(i);
      const std::string conf = pluginConfig(Kind::kIbcni, p, "benchnet", "10.10", kDevice).dump();
      ProgramRun add = run({bins[c]}, cniEnv("ADD", cid, pod.path(), kIfName, p), conf);
      ProgramRun del = run({bins[c]}, cniEnv("DEL", cid, pod.path(), kIfName, p), conf);
      if (add.status != 0 || del.status != 0) {
        printFailure(bins[c] + (add.status != 0 ? " ADD" : " DEL"), add.status != 0 ? add : del);
        return false;
      }
      if (i >= o.warmup) {
        addDel[c].push_back(ms(add.elapsed()) + ms(del.elapsed()));
      }
    }
  }
  const Stats with = stats(addDel[0]);
  const Stats none = stats(addDel[1]);
  const Stats floor = appendFloor(p, o.cycles * 10);
  const double ratio = with.median / none.median;
  std::printf("| ADD+DEL | with the event | without | with / without |\n|---|---|---|---|\n");
  std::printf("| median | %s | %s | %.3f |\n", fmtMs(with.median).c_str(), fmtMs(none.median).c_str(), ratio);
  std::printf("| p99 | %s | %s | %.3f |\n", fmtMs(with.p99).c_str(), fmtMs(none.p99).c_str(), with.p99 / none.p99);
  std::printf("\nThe floor: the append alone, in process (%zu appends): median %s, p99 %s; two per ADD+DEL.\n",
              floor.n, fmtMs(floor.median).c_str(), fmtMs(floor.p99).c_str());
  char what[160];
  std::snprintf(what, sizeof what, "events: ADD+DEL with the call event / without, median %.3f (target <= %.2f)",
                ratio, kTargetRatio);
  if (o.targets) {
    verdict(ratio <= kTargetRatio, what);
  }
  return true;
}

}  // namespace ibcni::bench
