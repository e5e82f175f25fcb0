// SPDX-License-Identifier: Apache-2.0
#include "runner.h"

#include <chrono>
#include <stdexcept>

#include "generator.h"
#include "invariants.h"
#include "operations.h"

namespace ibcni::chaos {

namespace {

constexpr int kCompactEvery = 25;  // runs between two compactions of etcd's history

// Runs of this process so far: every run's tag is new, whichever Runner makes it.
std::atomic<long> runs{0};

}  // namespace

Runner::Runner(Backend& backend, const Tools& tools, Stats& stats, const std::atomic<bool>& stop)
    : backend_(backend), tools_(tools), stats_(stats), stop_(stop) {}

std::string Runner::newTag() {
  // Short: it is in every node, pool and Lease name ("<tag>-node-03", "ibcni-<tag>-shared--b--...").
  return tools_.runId + "-" + std::to_string(++runs);
}

void Runner::prepare(World& world) {
  for (const auto& n : world.nodes) {
    if (auto r = backend_.createNode(n.name); !r) {
      throw std::runtime_error("creating Node " + n.name + ": " + r.error());
    }
  }
}

void Runner::cleanUp(World& world) {
  world.pods.clear();
  if (auto r = backend_.heal(); !r) {
    throw std::runtime_error("healing the backend after a schedule: " + r.error());
  }
  if (backend_.kubernetes()) {
    for (const auto& n : world.nodes) {
      (void)backend_.deleteNode(n.name);
    }
    // kube-apiserver keeps Leases at /registry/leases/<namespace>/<name> (its etcd prefix /registry):
    // removed under it, as an etcd restore would; its watch sees them go.
    backend_.deletePrefix("/registry/leases/kube-system/ibcni-" + world.tag() + "-");
    // The pools' registry is one Lease for every pool of the namespace: each schedule starts
    // without one (the next schedule's pools are new pools over the same ranges).
    backend_.deletePrefix("/registry/leases/kube-system/ibcni-pool-registry");
    backend_.resetApiCounts();
  } else {
    backend_.deletePrefix(world.etcdPrefix());
  }
  if (runs % kCompactEvery == 0) {
    backend_.compact();
  }
}

template <typename NextStep>
RunResult Runner::execute(const ScheduleParams& params, NextStep next, std::size_t maxSteps) {
  const auto t0 = std::chrono::steady_clock::now();
  RunResult result;
  result.schedule.params = params;
  Stats stats;
  {
    World world(params, backend_, tools_, newTag(), stats);
    prepare(world);
    std::mt19937_64 endRng(params.seed ^ 0x5eedULL);
    while (result.schedule.steps.size() < maxSteps && !world.violation && !stop_) {
      std::optional<Step> step =
          next(world, result.schedule.steps.empty() ? nullptr : &result.schedule.steps.back());
      if (!step) {
        break;
      }
      world.step = static_cast<int>(result.schedule.steps.size()) + 1;
      runStep(world, *step);
      checkNoAddressTwice(world);
      result.schedule.steps.push_back(*step);
    }
    if (!world.violation && !stop_) {
      world.step = 0;
      result.end = endChecks(world, endRng);
    }
    result.violation = world.violation;
    cleanUp(world);
  }
  stats_.merge(stats);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

RunResult Runner::generate(const ScheduleParams& params, int steps) {
  const Profile* profile = findProfile(params.profile);
  if (profile == nullptr) {
    throw std::runtime_error("unknown profile " + params.profile);
  }
  Generator gen(*profile, mixSeed(params.seed ^ 0x9e3779b9ULL));
  return execute(
      params,
      [&](const World& world, const Step* previous) -> std::optional<Step> {
        if (previous != nullptr) {
          gen.observe(*previous, world);
        }
        return gen.next(world);
      },
      static_cast<std::size_t>(steps));
}

RunResult Runner::replay(const Schedule& schedule) {
  std::size_t i = 0;
  return execute(
      schedule.params,
      [&](const World&, const Step*) -> std::optional<Step> {
        if (i >= schedule.steps.size()) {
          return std::nullopt;
        }
        Step s = schedule.steps[i++];
        s.outcome.clear();
        return s;
      },
      schedule.steps.size());
}

std::optional<RunResult> Runner::reproduce(const Schedule& schedule, const std::string& kind, int tries) {
  for (int t = 0; t < tries && !stop_; ++t) {
    RunResult r = replay(schedule);
    if (r.violation && r.violation->kind == kind) {
      return r;
    }
  }
  return std::nullopt;
}

}  // namespace ibcni::chaos
