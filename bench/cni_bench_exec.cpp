// SPDX-License-Identifier: Apache-2.0
// cni_bench's exec part: ADD then DEL, each plugin exec'd as a runtime execs it, per contender.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "cni_bench.h"

namespace ibcni::bench {

namespace fs = std::filesystem;

bool execPart(const Paths& p, const Options& o) {
  std::printf("\n## ADD+DEL, exec'd as a runtime does (%d cycles, %s pod netns, contenders interleaved)\n\n", o.cycles,
              o.reuseNetns ? "one reused" : "a fresh");
  std::vector<CycleFigures> fig(kContenders.size());
  std::vector<std::optional<TestNetns>> reused(kContenders.size());
  if (o.reuseNetns) {
    for (std::size_t c = 0; c < kContenders.size(); ++c) {
      reused[c] = makeNetns("exec-pod-" + std::to_string(c));
    }
  }
  for (int i = 0; i < o.warmup + o.cycles; ++i) {
    for (std::size_t k = 0; k < kContenders.size(); ++k) {
      const std::size_t c = (k + static_cast<std::size_t>(i)) % kContenders.size();
      const Kind kind = kContenders[c].kind;
      std::optional<TestNetns> fresh;
      if (!o.reuseNetns) {
        fresh = makeNetns("exec-" + std::to_string(i) + "-" + std::to_string(c));
      }
      const std::string ns = o.reuseNetns ? reused[c]->path() : fresh->path();
      const std::string cid = "exec-" + std::to_string(c) + "-" + std::to_string(i);
      const std::string conf = pluginConfig(kind, p, "benchnet", "10.10", kDevice).dump();
      const std::vector<std::string> argv = {binaryFor(kind, p)};
      ProgramRun add = run(argv, cniEnv("ADD", cid, ns, kIfName, p), conf);
      ProgramRun del = run(argv, cniEnv("DEL", cid, ns, kIfName, p), conf);
      fresh.reset();
      if (add.status != 0 || firstAddress(add.out).empty()) {
        printFailure(kContenders[c].label + " ADD", add);
        return false;
      }
      if (del.status != 0 || !linkInHost(kDevice)) {
        printFailure(kContenders[c].label + " DEL (or the device is not back)", del);
        return false;
      }
      if (i < o.warmup) {
        continue;
      }
      fig[c].add.push_back(ms(add.elapsed()));
      fig[c].del.push_back(ms(del.elapsed()));
      fig[c].addDel.push_back(ms(add.elapsed()) + ms(del.elapsed()));
      fig[c].addRss.push_back(static_cast<double>(add.maxRssKiB));
      fig[c].delRss.push_back(static_cast<double>(del.maxRssKiB));
    }
  }
  reused.clear();
  const CycleStats s = summarize(fig);
  const auto& addDel = s.addDel;
  const auto& addRss = s.addRss;
  const auto& delRss = s.delRss;
  printContenderHeader(std::to_string(o.cycles) + " cycles");
  printCycleRows(s, "ADD", "DEL");
  std::printf("| peak RSS of an ADD, median (max) | %s (%s) | %s (%s) | %s (%s) | %.2f |\n",
              mib(static_cast<long>(addRss[0].median)).c_str(), mib(static_cast<long>(addRss[0].max)).c_str(),
              mib(static_cast<long>(addRss[1].median)).c_str(), mib(static_cast<long>(addRss[1].max)).c_str(),
              mib(static_cast<long>(addRss[2].median)).c_str(), mib(static_cast<long>(addRss[2].max)).c_str(),
              addRss[0].median > 0 ? addRss[1].median / addRss[0].median : 0.0);
  std::printf("| peak RSS of a DEL, median (max) | %s (%s) | %s (%s) | %s (%s) | |\n",
              mib(static_cast<long>(delRss[0].median)).c_str(), mib(static_cast<long>(delRss[0].max)).c_str(),
              mib(static_cast<long>(delRss[1].median)).c_str(), mib(static_cast<long>(delRss[1].max)).c_str(),
              mib(static_cast<long>(delRss[2].median)).c_str(), mib(static_cast<long>(delRss[2].max)).c_str());
  std::printf("\nThe extra exec of a delegated host-local costs ibcni %s per ADD+DEL (median).\n",
              fmtMs(addDel[2].median - addDel[0].median).c_str());

  // Binary sizes.
  auto size = [](const std::string& path) -> std::string {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return "-";
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(st.st_size) / (1024.0 * 1024.0));
    return buf;
  };
  const std::string ibcniIpam = fs::path(p.ibcni).parent_path().string() + "/ibcni-ipam";
  std::printf("\n| binary (file size) | ibcni | ibcni-ipam | host-device | host-local |\n|---|---|---|---|---|\n");
  std::printf("| | %s | %s | %s | %s |\n", size(p.ibcni).c_str(), size(ibcniIpam).c_str(),
              size(p.ref + "/host-device").c_str(), size(p.ref + "/host-local").c_str());

  if (o.targets) {
    speedVerdict("exec", addDel, o.targetRatio);
    char what[256];
    std::snprintf(what, sizeof what, "exec: ibcni peak RSS of an ADD (max %s) under half of host-device's (median %s)",
                  mib(static_cast<long>(addRss[0].max)).c_str(), mib(static_cast<long>(addRss[1].median)).c_str());
    verdict(addRss[0].max < 0.5 * addRss[1].median, what);
  }
  return true;
}

}  // namespace ibcni::bench
