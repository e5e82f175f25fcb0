// SPDX-License-Identifier: Apache-2.0
// The cost of the verbs check that CNI ADD and CHECK run (verbsCheck), measured as the plugin pays
// it: DlopenVerbsProbe::probe (fork, setns into the pod's netns, dlopen libibverbs.so.1, list the
// devices, open the device, query the port, pkey and GID tables, answer through a pipe) followed by
// evaluateVerbs. Side by side in the same run, interleaved sample by sample, the reference: what a
// person would run by hand in that netns, `ibv_devinfo -v -d DEV` (`ibv_devices` without a device),
// forked, joined to the netns and exec'd the same way. Also a yardstick of the machine: fork, setns
// and exec of /bin/true.
//
//   verbs_bench [--samples N] [--warmup N] [--netns PATH] [--device DEV] [--port N] [--ip ADDR]...
//               [--timeout-ms MS] [--target-ms MS] [--target-ratio R]
//
//   --netns PATH      the netns to probe from; default a fresh one (anonymous, gone when the bench ends)
//   --device DEV      RDMA device; default none: the "no device" path (fork, setns, dlopen and
//                     ibv_get_device_list are still paid), with ibv_devices as the reference
//   --ip ADDR         an address the port must carry as a RoCE v2 GID (evaluateVerbs checks it)
//   --target-ms MS    PASS/FAIL line: passive check median below MS (default 20; 0: no such line)
//   --target-ratio R  PASS/FAIL line: passive check median below R x the reference's (default: none)
//
// With a device it also times the check with the QP probe on (PD, CQ, UD QP to RTS), without a
// target. Prints median, p95 and max in ms; exits 1 when a target is missed or the probe did not
// see what it was asked to look at (a device given but not opened), 2 on a usage or setup error.
// Needs CAP_SYS_ADMIN (setns), as the plugin does.
#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench_stats.h"
#include "plugin/modes/verbs_check.h"
#include "ibcni/os/netns.h"
#include "plugin/verbs/dlopen_verbs_probe.h"

namespace {

using Clock = std::chrono::steady_clock;
using ibcni::plugin::VerbsExpectations;
using ibcni::plugin::VerbsFinding;
using ibcni::verbs::ProbeRequest;
using ibcni::verbs::ProbeResult;

using ibcni::bench::ms;
using ibcni::bench::Stats;
using ibcni::bench::stats;
// The medians printed are Stats::upperMedian, the sample at index n/2, as this bench has always
// reported them (with the default 50 samples, the upper of the two middle ones).

/// `name` looked up in PATH once, so that the timed runs exec a path (as a shell does after its
/// first lookup) instead of timing the search.
std::string which(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return {};
}

struct ProcRun {
  int status = -1;  ///< exit status, 128 + signal, or -1 when it could not be started
  std::string out;  ///< standard output and error, when captured
};

/// fork; the child joins the netns at `nsPath`, then execs `argv` with stdout and stderr on a pipe
/// (`capture`) or /dev/null; the parent waits. The same steps as the probe's child up to its dlopen.
ProcRun runIn(const std::string& nsPath, const std::vector<std::string>& argv, bool capture) {
  ProcRun r;
  int out[2] = {-1, -1};
  if (capture && ::pipe2(out, O_CLOEXEC) != 0) {
    return r;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    return r;
  }
  if (pid == 0) {
    const int ns = ::open(nsPath.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
      ::_exit(126);
    }
    const int sink = capture ? out[1] : ::open("/dev/null", O_WRONLY);
    ::dup2(sink, STDOUT_FILENO);
    ::dup2(sink, STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) {
      args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  if (capture) {
    ::close(out[1]);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(out[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) {
        r.out.append(buf, static_cast<std::size_t>(n));
      }
    }
    ::close(out[0]);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string join(const std::vector<std::string>& v, const char* sep = " ") {
  std::string s;
  for (const auto& x : v) {
    s += (s.empty() ? "" : sep) + x;
  }
  return s;
}

const char* portState(int s) {
  static const char* names[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  return s >= 0 && s <= 5 ? names[s] : "?";
}

/// One line about what the probe saw, so that a figure is known to be of the intended path.
std::string describe(const ProbeResult& r, const std::vector<VerbsFinding>& findings) {
  std::string s;
  if (!r.available) {
    s = "libibverbs not loaded (" + r.unavailableReason + ")";
  } else {
    s = "devices [" + join(r.devices, ", ") + "]";
    if (r.opened && r.port) {
      const auto& p = *r.port;
      s += "; " + p.device + " opened; port " + std::to_string(p.port) + " " + portState(p.state) + ", " +
           (p.linkLayer == ibcni::verbs::LinkLayer::kEthernet     ? "Ethernet"
            : p.linkLayer == ibcni::verbs::LinkLayer::kInfiniband ? "InfiniBand"
                                                                  : "link layer unknown") +
           ", " + std::to_string(p.pkeys.size()) + " pkeys, " + std::to_string(p.gids.size()) + " GIDs";
    } else if (!r.openError.empty()) {
      s += "; " + r.openError;
    } else {
      s += "; nothing opened";
    }
    if (r.qpProbeOk) {
      s += *r.qpProbeOk ? "; UD QP reached RTS" : "; QP probe failed: " + r.qpProbeError;
    }
  }
  s += "; evaluateVerbs: ";
  if (findings.empty()) {
    s += "no findings";
  } else {
    std::vector<std::string> what;
    for (const auto& f : findings) {
      what.push_back(f.check + ": " + f.problem);
    }
    s += std::to_string(findings.size()) + " finding(s): " + join(what, "; ");
  }
  return s;
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--samples N] [--warmup N] [--netns PATH] [--device DEV] [--port N] [--ip ADDR]...\n"
               "          [--timeout-ms MS] [--target-ms MS] [--target-ratio R]\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int samples = 50;
  int warmup = 2;
  std::string netnsArg;
  std::string device;
  std::uint32_t port = 1;
  std::vector<std::string> ipArgs;
  int timeoutMs = 10'000;
  double targetMs = 20;
  double targetRatio = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      return usage(argv[0]);
    }
    const std::string v = argv[++i];
    if (a == "--samples") {
      samples = std::atoi(v.c_str());
    } else if (a == "--warmup") {
      warmup = std::atoi(v.c_str());
    } else if (a == "--netns") {
      netnsArg = v;
    } else if (a == "--device") {
      device = v;
    } else if (a == "--port") {
      port = static_cast<std::uint32_t>(std::atoi(v.c_str()));
    } else if (a == "--ip") {
      ipArgs.push_back(v);
    } else if (a == "--timeout-ms") {
      timeoutMs = std::atoi(v.c_str());
    } else if (a == "--target-ms") {
      targetMs = std::atof(v.c_str());
    } else if (a == "--target-ratio") {
      targetRatio = std::atof(v.c_str());
    } else {
      return usage(argv[0]);
    }
  }
  if (samples < 1 || warmup < 0 || timeoutMs < 1) {
    return usage(argv[0]);
  }

  // The netns: the one given, or a fresh anonymous one reached through our own fd on it (the probe
  // opens the path in the parent and the child inherits it; the reference's child opens it itself).
  std::optional<ibcni::os::Netns> fresh;
  std::string nsPath = netnsArg;
  std::string nsText = netnsArg;
  if (nsPath.empty()) {
    auto created = ibcni::os::Netns::createAnonymous();
    if (!created) {
      std::fprintf(stderr, "verbs_bench: cannot create a netns: %s\n", created.error().describe().c_str());
      return 2;
    }
    fresh.emplace(std::move(*created));
    nsPath = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fresh->fd());
    nsText = "a fresh netns (" + nsPath + ")";
  }

  VerbsExpectations want;
  want.device = device;
  want.port = port;
  for (const auto& text : ipArgs) {
    auto ip = ibcni::net::IpAddress::parse(text);
    if (!ip) {
      std::fprintf(stderr, "verbs_bench: --ip %s is not an address\n", text.c_str());
      return 2;
    }
    want.ips.push_back(*ip);
  }
  ProbeRequest req;
  req.netnsPath = nsPath;
  req.device = device;
  req.port = port;
  req.timeout = std::chrono::milliseconds(timeoutMs);
  ProbeRequest qpReq = req;
  qpReq.qpProbe = true;
  VerbsExpectations qpWant = want;
  qpWant.qpProbe = true;

  const std::vector<std::string> refArgv =
      device.empty() ? std::vector<std::string>{which("ibv_devices")}
                     : std::vector<std::string>{which("ibv_devinfo"), "-v", "-d", device};
  const std::vector<std::string> trueArgv{which("true")};
  if (refArgv[0].empty() || trueArgv[0].empty()) {
    const char* missing = trueArgv[0].empty() ? "true"
                          : device.empty()    ? "ibv_devices (ibverbs-utils)"
                                              : "ibv_devinfo (ibverbs-utils)";
    std::fprintf(stderr, "verbs_bench: %s not found in PATH\n", missing);
    return 2;
  }
  const std::string refText = device.empty() ? "ibv_devices" : "ibv_devinfo -v -d " + device;

  ibcni::verbs::DlopenVerbsProbe probe;
  bool ok = true;
  auto require = [&](bool cond, const std::string& what) {
    std::printf("%s %s\n", cond ? "PASS" : "FAIL", what.c_str());
    ok = ok && cond;
  };
  std::string probeFailure;
  // One timed passive check, as CNI ADD runs it: probe, then judge. Its findings are what they are
  // (none on a healthy port; "device not visible" on the no-device path): the figure is the cost.
  auto check = [&](const ProbeRequest& r, const VerbsExpectations& w, ProbeResult* seen,
                   std::vector<VerbsFinding>* findings) -> double {
    const auto t0 = Clock::now();
    auto res = probe.probe(r);
    std::vector<VerbsFinding> f;
    if (res) {
      f = ibcni::plugin::evaluateVerbs(*res, w);
    }
    const double t = ms(Clock::now() - t0);
    if (!res) {
      probeFailure = res.error().describe();
    } else {
      if (seen != nullptr) {
        *seen = *res;
      }
      if (findings != nullptr) {
        *findings = std::move(f);
      }
    }
    return t;
  };

  std::printf("verbs_bench: %d samples each (after %d warm-up), interleaved; from %s; device %s port %u\n", samples,
              warmup, nsText.c_str(), device.empty() ? "(none: the no-device path)" : device.c_str(), port);

  // What each timed thing does, seen once (this run also warms the page cache).
  ProbeResult seen;
  std::vector<VerbsFinding> findings;
  const double firstMs = check(req, want, &seen, &findings);
  if (!probeFailure.empty()) {
    std::printf("passive check: the probe failed: %s\n", probeFailure.c_str());
    require(false, "the probe answers");
    return 1;
  }
  std::printf("passive check saw: %s\n", describe(seen, findings).c_str());
  ProbeResult qpSeen;
  std::vector<VerbsFinding> qpFindings;
  if (!device.empty()) {
    (void)check(qpReq, qpWant, &qpSeen, &qpFindings);
    std::printf("qp probe saw: %s\n",
                probeFailure.empty() ? describe(qpSeen, qpFindings).c_str() : probeFailure.c_str());
  }
  const ProcRun refRun = runIn(nsPath, refArgv, true);
  std::size_t lines = static_cast<std::size_t>(std::count(refRun.out.begin(), refRun.out.end(), '\n'));
  std::string firstLine = refRun.out.substr(0, refRun.out.find('\n'));
  std::printf("reference %s (in the same netns) printed %zu lines, exit %d: %s%s\n", refText.c_str(), lines,
              refRun.status, firstLine.c_str(), lines > 1 ? " ..." : "");
  std::printf("first passive check (cold, not counted): %.2f ms\n", firstMs);

  // evaluateVerbs alone, in process: the judging part of the check.
  double evalUs = 0;
  {
    constexpr int kEvalRuns = 10'000;
    std::size_t sink = 0;
    const auto t0 = Clock::now();
    for (int i = 0; i < kEvalRuns; ++i) {
      sink += ibcni::plugin::evaluateVerbs(seen, want).size();
    }
    evalUs = ms(Clock::now() - t0) * 1000.0 / kEvalRuns;
    if (sink == static_cast<std::size_t>(-1)) {
      std::puts("");
    }
  }

  std::vector<double> passive, qp, ref, yard;
  std::vector<std::function<void(bool)>> steps;
  steps.emplace_back([&](bool keep) {
    const double t = check(req, want, nullptr, nullptr);
    if (keep) {
      passive.push_back(t);
    }
  });
  steps.emplace_back([&](bool keep) {
    const auto t0 = Clock::now();
    (void)runIn(nsPath, refArgv, false);
    if (keep) {
      ref.push_back(ms(Clock::now() - t0));
    }
  });
  steps.emplace_back([&](bool keep) {
    const auto t0 = Clock::now();
    (void)runIn(nsPath, trueArgv, false);
    if (keep) {
      yard.push_back(ms(Clock::now() - t0));
    }
  });
  if (!device.empty()) {
    steps.emplace_back([&](bool keep) {
      const double t = check(qpReq, qpWant, nullptr, nullptr);
      if (keep) {
      qp.push_back(t);
    }
    });
  }
  // Each round runs every step once, starting at a different one, so that no step always follows
  // the same other step.
  for (int i = 0; i < warmup + samples; ++i) {
    for (std::size_t k = 0; k < steps.size(); ++k) {
      steps[(k + static_cast<std::size_t>(i)) % steps.size()](i >= warmup);
    }
  }
  if (!probeFailure.empty()) {
    std::printf("a timed probe failed: %s\n", probeFailure.c_str());
  }

  const Stats sp = stats(passive);
  const Stats sr = stats(ref);
  const Stats sy = stats(yard);
  std::printf("\n| figure (%d samples) | median | p95 | max |\n|---|---|---|---|\n", samples);
  auto row = [](const std::string& what, const Stats& s) {
    std::printf("| %s | %.2f ms | %.2f ms | %.2f ms |\n", what.c_str(), s.upperMedian, s.p95, s.max);
  };
  row("passive check (probe + evaluateVerbs)", sp);
  if (!device.empty()) {
    row("check with the QP probe (no target)", stats(qp));
  }
  row("reference: " + refText + " process", sr);
  row("yardstick: fork, setns, exec /bin/true", sy);
  std::printf("evaluateVerbs alone: %.2f us per call\n", evalUs);
  const double ratio = sp.upperMedian / sr.upperMedian;
  std::printf("ratio passive check / %s (medians): %.2f (ours %.1fx %s)\n", refText.c_str(), ratio,
              ratio <= 1 ? 1 / ratio : ratio, ratio <= 1 ? "faster" : "slower");
  std::printf("passive check / yardstick (medians): %.2f\n\n", sp.upperMedian / sy.upperMedian);

  require(probeFailure.empty(), "every probe answered");
  if (!device.empty()) {
    require(seen.opened && seen.port.has_value() && !seen.port->gids.empty(),
            "the probe opened " + device + ", queried port " + std::to_string(port) + " and read its GIDs");
    require(qpSeen.qpProbeOk.has_value(), "the QP probe ran");
  }
  const std::string what = device.empty() ? "no device" : device + " port " + std::to_string(port);
  char buf[512];
  if (targetMs > 0) {
    std::snprintf(buf, sizeof buf, "passive check (%s) median %.2f ms < %.0f ms", what.c_str(), sp.upperMedian,
                  targetMs);
    require(sp.upperMedian < targetMs, buf);
  }
  if (targetRatio > 0) {
    std::snprintf(buf, sizeof buf, "passive check (%s) median %.2f ms < %.2f x %s median %.2f ms (ratio %.2f)",
                  what.c_str(), sp.upperMedian, targetRatio, refText.c_str(), sr.upperMedian, ratio);
    require(ratio < targetRatio, buf);
  }
  return ok ? 0 : 1;
}
