// SPDX-License-Identifier: Apache-2.0
// The fixture of the suites that compare our netlink requests byte for byte with iproute2's
// (vf_messages_test, ipoib_messages_test): a network namespace of its own holding a veth pair,
// strace and ip, and the one request `ip` sends for a command, captured with strace.
#pragma once

#include <unistd.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/netlink/libnl_netlink.h"
#include "nl_bytes.h"
#include "support/test_netns.h"

namespace ibcni::testing {

class Iproute2RequestTest : public ::testing::Test {
 protected:
  /// The namespace is labelled `label`; `device` is the veth end the requests name (its index is
  /// index_), `peer` the other end.
  Iproute2RequestTest(const char* label, const char* device, const char* peer)
      : label_(label), device_(device), peer_(peer) {}

  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root (a network namespace, a veth pair and strace)";
    }
    strace_ = nlbytes::findProgram("strace");
    ip_ = nlbytes::findProgram("ip");
    ASSERT_FALSE(strace_.empty()) << "strace is not installed; this test needs it";
    ASSERT_FALSE(ip_.empty()) << "ip (iproute2) is not installed; this test needs it";
    auto ns = TestNetns::create(label_);
    ASSERT_TRUE(ns.has_value()) << ns.error().describe();
    ns_.emplace(std::move(*ns));
    ASSERT_TRUE(createVethPair(ns_->netns(), device_, ns_->netns(), peer_).has_value());
    nl::LibnlNetlink netlink;
    auto link = netlink.linkByName(ns_->netns(), device_);
    ASSERT_TRUE(link.has_value()) << link.error().describe();
    index_ = link->index;
    ASSERT_GT(index_, 0);
  }

  /// The one message among those `ip <args>` sends inside the test namespace for which `wanted` is
  /// true; a failure naming `what` (and empty bytes) when there is not exactly one.
  nlbytes::Bytes iproute2RequestOf(const std::vector<std::string>& args, bool (*wanted)(const nlbytes::Bytes&),
                                   const std::string& what) {
    std::vector<std::string> command{ip_};
    command.insert(command.end(), args.begin(), args.end());
    const nlbytes::StraceRun run = nlbytes::straceSends(strace_, ns_->netns().fd(), command);
    EXPECT_TRUE(run.ran) << run.error;
    const std::string& trace = run.output;
    std::vector<nlbytes::Bytes> found;
    for (auto& b : nlbytes::dumpedBuffers(trace)) {
      if (wanted(b)) {
        found.push_back(std::move(b));
      }
    }
    if (found.size() != 1) {
      ADD_FAILURE() << "expected one " << what << " from ip, found " << found.size() << "; strace output:\n" << trace;
      return {};
    }
    return found[0];
  }

  std::string strace_;
  std::string ip_;
  std::optional<TestNetns> ns_;
  int index_ = 0;

 private:
  const char* label_;
  const char* device_;
  const char* peer_;
};

}  // namespace ibcni::testing
