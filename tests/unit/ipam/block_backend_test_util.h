// SPDX-License-Identifier: Apache-2.0
// What the block backend suites share (against a real etcd, against a real kube-apiserver,
// against scripted HTTP answers): calls that must succeed, error kinds, every call naming a
// malformed name, racers started at once and their one winner, and claims as the tests compare them.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ibcni/ipam/block_backend.h"

namespace ibcni::ipam {

/// The value of a call that must succeed (a failure is reported and T{} returned).
template <class T>
T must(BackendResult<T> r, const std::string& what) {
  if (!r) {
    ADD_FAILURE() << what << ": " << r.error().describe();
    return T{};
  }
  return std::move(*r);
}
inline void must(const BackendResult<void>& r, const std::string& what) {
  if (!r) {
    ADD_FAILURE() << what << ": " << r.error().describe();
  }
}

/// The kind of a call's error; nullopt when it succeeded.
template <class T>
std::optional<BackendErrc> errc(const BackendResult<T>& r) {
  return r ? std::nullopt : std::optional<BackendErrc>(r.error().kind);
}

/// Every call of `b` that takes a name but forgetNode, each with `bad` as one of its names (`seen`
/// the holder a takeover or removal expects): what was called and the kind of its error.
inline std::vector<std::pair<const char*, std::optional<BackendErrc>>> callsNaming(BlockBackend& b,
                                                                                  const std::string& bad,
                                                                                  const Holder& seen) {
  return {
      {"claim pool", errc(b.claim(ClaimKind::kBlock, bad, "b", "n", {}))},
      {"claim name", errc(b.claim(ClaimKind::kAddress, "p", bad, "n", {}))},
      {"claim node", errc(b.claim(ClaimKind::kBlock, "p", "b", bad, {}))},
      {"list", errc(b.list(ClaimKind::kBlock, bad, std::nullopt))},
      {"release", errc(b.release(ClaimKind::kBlock, "p", bad, "n", ""))},
      {"renew node", errc(b.renew(bad, "p", {}))},
      {"renew held", errc(b.renew("n", "p", {{ClaimKind::kBlock, bad, "", ""}}))},
      {"takeOver", errc(b.takeOver(ClaimKind::kBlock, "p", "b", bad, seen, {}))},
      {"removeGone", errc(b.removeGone(ClaimKind::kBlock, "p", bad, seen))},
      {"definePool", errc(b.definePool({bad, "F", "o", "", false}))},
      {"definition", errc(b.definition(bad))},
      {"replaceDefinition", errc(b.replaceDefinition({bad, "F", "o", "", false}, "9"))},
      {"demand", errc(b.demand("p", bad, 1))},
      {"demands", errc(b.demands(bad))},
      {"withdraw", errc(b.withdraw(bad, "n"))},
  };
}

/// Runs `racer(i, waitForStart)` for each i in [0, n) on a thread of its own and returns what each
/// returned, in the order of i. A racer makes what it needs, then calls waitForStart(): they all
/// start at once when every thread is running.
template <class Racer>
std::vector<BackendResult<ClaimOutcome>> raceAtOnce(int n, Racer racer) {
  std::vector<BackendResult<ClaimOutcome>> results(static_cast<std::size_t>(n), std::unexpected(BackendError{}));
  std::atomic<bool> go{false};
  const auto waitForStart = [&go] {
    while (!go.load()) {
      std::this_thread::yield();
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] { results[static_cast<std::size_t>(i)] = racer(i, waitForStart); });
  }
  go = true;
  for (auto& t : threads) {
    t.join();
  }
  return results;
}

/// Expects each of `results` to be an outcome, exactly one of them a claim (a fatal failure
/// otherwise), and each to name that claim's node, `winner`, as the holder.
inline void expectOneWinner(const std::vector<BackendResult<ClaimOutcome>>& results, std::string& winner) {
  int claimed = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r) << r.error().describe();
    if (r->state == ClaimState::kClaimed) {
      ++claimed;
      winner = r->holder.node;
    }
  }
  ASSERT_EQ(claimed, 1);
  for (const auto& r : results) {
    EXPECT_EQ(r->holder.node, winner);
  }
}

/// "name@node" for each claim, " lapsed" added when its holder lapsed.
inline std::vector<std::string> namesOf(const std::vector<Claim>& claims) {
  std::vector<std::string> out;
  for (const auto& c : claims) {
    out.push_back(c.name + "@" + c.holder.node + (c.holder.lapsed ? " lapsed" : ""));
  }
  return out;
}

}  // namespace ibcni::ipam
