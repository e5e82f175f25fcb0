// SPDX-License-Identifier: Apache-2.0
// CniEventDrain: the plugin's call events of each state directory turned into observations, each
// once, from the agent's start on.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "plugin/agent/cni_events.h"
#include "plugin/state/call_event_ring.h"

namespace ibcni::plugin {
namespace {

namespace fs = std::filesystem;

class CniEvents : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ibcni-cni-events-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    a_ = root_ + "/a";
    b_ = root_ + "/b";
    fallback_ = root_ + "/default";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void append(const std::string& dir, cni::Command verb, const std::string& network, int code, double seconds) {
    state::CallEvent e;
    e.verb = verb;
    e.network = network;
    e.code = code;
    e.durationSeconds = seconds;
    ASSERT_TRUE(ring_.append(dir, e).has_value());
  }

  std::string root_, a_, b_, fallback_;
  state::FileCallEvents ring_;
};

TEST_F(CniEvents, EachCallOfEachStateDirectoryOnceFromTheAgentsStartOn) {
  append(a_, cni::Command::kAdd, "before", 0, 0.1);  // before the agent started: not counted
  CniEventDrain drain({a_, b_}, fallback_);             // b has no ring yet
  EXPECT_TRUE(drain.drain().calls.empty());
  append(a_, cni::Command::kAdd, "net1", 0, 0.25);
  append(b_, cni::Command::kDel, "net2", 0, 0.5);
  append(a_, cni::Command::kAdd, "net1", 7, 0.01);
  const auto got = drain.drain().calls;
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].verb, "ADD");
  EXPECT_EQ(got[0].network, "net1");
  EXPECT_EQ(got[0].code, 0);
  EXPECT_DOUBLE_EQ(got[0].seconds, 0.25);
  EXPECT_EQ(got[1].verb, "ADD");
  EXPECT_EQ(got[1].code, 7);
  EXPECT_EQ(got[2].verb, "DEL");  // b's events after a's
  EXPECT_EQ(got[2].network, "net2");
  EXPECT_TRUE(drain.drain().calls.empty()) << "an event is counted once";
  append(b_, cni::Command::kCheck, "net2", 0, 0.02);
  const auto more = drain.drain();
  ASSERT_EQ(more.calls.size(), 1u);
  EXPECT_EQ(more.calls[0].verb, "CHECK");
  EXPECT_EQ(more.lost, 0u);
}

TEST_F(CniEvents, EventsTheRingNoLongerHeldAreCountedLost) {
  CniEventDrain drain({a_}, fallback_);
  const int calls = static_cast<int>(state::kCallEventSlots) + 10;
  for (int i = 0; i < calls; ++i) {
    append(a_, cni::Command::kAdd, "net1", 0, 0.001);
  }
  const auto got = drain.drain();
  EXPECT_EQ(got.calls.size(), state::kCallEventSlots);
  EXPECT_EQ(got.lost, 10u);
  EXPECT_EQ(drain.drain().lost, 0u) << "each loss is reported once";
}

// A call that fails before its configuration names a state directory appends its event to the
// default one: the agent reads it there too, though told to look elsewhere, and only once when
// told to look there.
TEST_F(CniEvents, TheDefaultDirectoryIsReadTooAndOnlyOnce) {
  CniEventDrain drain({a_}, fallback_);
  EXPECT_EQ(drain.dirs(), (std::vector<std::string>{a_, fallback_}));
  append(fallback_, cni::Command::kAdd, "", 7, 0.001);
  const auto got = drain.drain().calls;
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].network, "");
  EXPECT_EQ(got[0].code, 7);
  CniEventDrain named({fallback_, a_}, fallback_);
  EXPECT_EQ(named.dirs(), (std::vector<std::string>{fallback_, a_}));
  append(fallback_, cni::Command::kDel, "", 7, 0.001);
  EXPECT_EQ(named.drain().calls.size(), 1u);
}

}  // namespace
}  // namespace ibcni::plugin
