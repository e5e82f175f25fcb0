// SPDX-License-Identifier: Apache-2.0
// The one RFC 3339 reader and its two writers (whole seconds for records and ledgers, microseconds
// for the Kubernetes API's MicroTime fields).
#include <gtest/gtest.h>

#include <chrono>

#include "ibcni/os/time_text.h"

namespace ibcni::os {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::system_clock;

const Clock::time_point kT = Clock::from_time_t(1795666884);  // 2026-11-26T04:21:24Z

TEST(Rfc3339, WritesWholeSecondsAndMicroseconds) {
  EXPECT_EQ(rfc3339(kT + 999ms), "2026-11-26T04:21:24Z");
  EXPECT_EQ(rfc3339Micros(kT + 123456us), "2026-11-26T04:21:24.123456Z");
  EXPECT_EQ(rfc3339Micros(kT), "2026-11-26T04:21:24.000000Z");
  EXPECT_EQ(rfc3339Micros(Clock::from_time_t(0) - 1us), "1969-12-31T23:59:59.999999Z");
}

TEST(Rfc3339, ReadsWhatItWrites) {
  EXPECT_EQ(parseRfc3339(rfc3339(kT)), kT);
  EXPECT_EQ(parseRfc3339(rfc3339Micros(kT + 123456us)), kT + 123456us);
}

TEST(Rfc3339, ReadsFractionsOffsetsAndLowerCaseZ) {
  EXPECT_EQ(parseRfc3339("2026-11-26T04:21:24.5Z"), kT + 500ms);
  EXPECT_EQ(parseRfc3339("2026-11-26T04:21:24.123456789Z"), kT + 123456us);  // to the microsecond
  EXPECT_EQ(parseRfc3339("2026-11-26T04:21:24z"), kT);
  EXPECT_EQ(parseRfc3339("2026-11-26T06:21:24+02:00"), kT);
  EXPECT_EQ(parseRfc3339("2026-11-26T00:51:24.25-03:30"), kT + 250ms);
}

TEST(Rfc3339, RefusesAnythingElse) {
  for (const char* bad : {"", "2026-11-26", "2026-11-26T04:21:24", "2026-11-26T04:21:24.Z", "2026-11-26T04:21:24ZZ",
                          "2026-11-26T04:21:24+0200", "2026-11-26T04:21:24+02:0x", "2026-11-26 04:21:24Z",
                          "yesterday"}) {
    EXPECT_FALSE(parseRfc3339(bad)) << bad;
  }
}

}  // namespace
}  // namespace ibcni::os
