// SPDX-License-Identifier: Apache-2.0
// Order statistics of a benchmark's samples (milliseconds, KiB, ...): one definition for the
// benches of this folder.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <vector>

namespace ibcni::bench {

/// A duration in milliseconds, the unit of the benches' timings.
[[nodiscard]] inline double ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

struct Stats {
  std::size_t n = 0;
  double median = 0;  ///< the middle sample; the mean of the two middle ones when n is even
  /// The sample at index n/2: the upper of the two middle ones when n is even, else the median.
  /// What ipam_bench and verbs_bench have always reported as their median.
  double upperMedian = 0;
  double p95 = 0;  ///< nearest rank: the smallest sample with at least 95% of them at or below it
  double p99 = 0;  ///< nearest rank, as p95
  double max = 0;
};

/// The statistics of `samples`; all zero when there are none.
[[nodiscard]] inline Stats stats(std::vector<double> samples) {
  Stats s;
  s.n = samples.size();
  if (samples.empty()) {
    return s;
  }
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  s.upperMedian = samples[n / 2];
  s.median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  auto nearestRank = [&](double q) {
    return samples[static_cast<std::size_t>(std::ceil(q * static_cast<double>(n))) - 1];
  };
  s.p95 = nearestRank(0.95);
  s.p99 = nearestRank(0.99);
  s.max = samples.back();
  return s;
}

}  // namespace ibcni::bench
