// SPDX-License-Identifier: Apache-2.0
// The status.devices[] of prepared claims: Ready once prepared, networkData once ibcni's CNI ADD
// attached the VF (its attachment record), applied only when it changed, retried when it failed.
#include "plugin/dra/claim_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "unit/dra/memory_claims.h"

namespace ibcni::dra {
namespace {

using nlohmann::json;

ClaimRecord prepared(const std::string& uid) {
  ClaimRecord r;
  r.ref = {"ml", uid, "rails"};
  r.state = ClaimRecord::State::kPrepared;
  r.devices = {{{"rail-0"}, "node-a", "vf-0000-3b-01-2", {"ibcni.io/vf=" + uid + "-vf-0000-3b-01-2"}, "0000:3b:01.2"},
               {{"rail-1"}, "node-a", "vf-0000-3b-01-3", {"ibcni.io/vf=" + uid + "-vf-0000-3b-01-3"}, "0000:3b:01.3"}};
  return r;
}

/// What ibcni's ADD records for VF `pci` attached as `ifName` with `ip`.
state::AttachmentRecord attached(const std::string& pci, const std::string& ifName, const std::string& ip) {
  state::AttachmentRecord a;
  a.mode = "sriov";
  a.ifName = ifName;
  a.pciAddress = net::PciAddress::parse(pci).value();
  cni::Interface i;
  i.name = ifName;
  i.mac = "80:00:00:48:fe:80:00:00:00:00:00:00:02:00:00:00:00:00:0a:01";
  i.sandbox = "/var/run/netns/p";
  a.result.interfaces.push_back(i);
  a.result.ips.push_back({net::IpPrefix::parse(ip).value(), std::nullopt, 0});
  return a;
}

TEST(DeviceStatuses, EachDeviceIsReadyAndAnAttachedOneCarriesItsNetworkData) {
  json s = deviceStatuses(prepared("u1"), {attached("0000:3b:01.3", "net2", "10.1.0.7/16")}, "ibcni.io");
  ASSERT_EQ(s.size(), 2U);
  EXPECT_EQ(s[0]["device"], "vf-0000-3b-01-2");
  EXPECT_EQ(s[0]["conditions"][0]["reason"], "Prepared");
  EXPECT_FALSE(s[0].contains("networkData"));
  EXPECT_EQ(s[1]["driver"], "ibcni.io");
  EXPECT_EQ(s[1]["pool"], "node-a");
  EXPECT_EQ(s[1]["conditions"][0]["reason"], "Attached");
  EXPECT_EQ(s[1]["networkData"], json::parse(R"({"interfaceName": "net2", "ips": ["10.1.0.7/16"],
      "hardwareAddress": "80:00:00:48:fe:80:00:00:00:00:00:00:02:00:00:00:00:00:0a:01"})"));
}

TEST(DeviceStatuses, AnotherModesRecordOfTheSamePciIsNotTheVfs) {
  auto a = attached("0000:3b:01.2", "net1", "10.1.0.8/16");
  a.mode = "ipoib";
  EXPECT_FALSE(deviceStatuses(prepared("u1"), {a}, "ibcni.io")[0].contains("networkData"));
}

TEST(StatusReporter, AppliesOnceAgainOnlyWhenSomethingChangedAndRetriesAFailure) {
  MemoryClaims api;
  StatusReporter reporter(api, "ibcni.io");
  ClaimRecords records{{"u1", prepared("u1")}};
  records["u2"] = prepared("u2");
  records["u2"].state = ClaimRecord::State::kPreparing;  // not prepared: no status
  EXPECT_TRUE(reporter.report(records, {}, "2026-12-03T00:00:00Z").empty());
  ASSERT_EQ(api.applied.size(), 1U);
  EXPECT_EQ(api.applied[0]["uid"], "u1");
  EXPECT_EQ(api.applied[0]["devices"][0]["conditions"][0]["lastTransitionTime"], "2026-12-03T00:00:00Z");

  EXPECT_TRUE(reporter.report(records, {}, "2026-12-03T00:00:10Z").empty());
  EXPECT_EQ(api.applied.size(), 1U);  // unchanged: nothing written

  const std::vector<state::AttachmentRecord> attachments{attached("0000:3b:01.2", "net1", "10.1.0.9/16")};
  api.failWith = "PATCH ...: 500";
  EXPECT_THAT(reporter.report(records, attachments, "2026-12-03T00:00:20Z"),
              ::testing::ElementsAre("status of claim ml/rails: PATCH ...: 500"));
  api.failWith.clear();
  EXPECT_TRUE(reporter.report(records, attachments, "2026-12-03T00:00:30Z").empty());
  ASSERT_EQ(api.applied.size(), 2U);
  EXPECT_EQ(api.applied[1]["devices"][0]["networkData"]["interfaceName"], "net1");
}

// A claim deleted (404) or made again under its name (409 for the uid) before the kubelet or the
// sweep undoes it: nothing to report and no warning every pass; written again only if it changes.
TEST(StatusReporter, AClaimTheServerNoLongerHasIsNoErrorAndNotWrittenAgainWhileUnchanged) {
  for (const auto kind : {ApiError::Kind::kNotFound, ApiError::Kind::kConflict}) {
    MemoryClaims api;
    StatusReporter reporter(api, "ibcni.io");
    const ClaimRecords records{{"u1", prepared("u1")}};
    api.failWith = "PATCH ...: gone";
    api.failKind = kind;
    EXPECT_TRUE(reporter.report(records, {}, "2026-12-03T00:00:00Z").empty());
    EXPECT_TRUE(reporter.report(records, {}, "2026-12-03T00:00:10Z").empty());
    EXPECT_EQ(api.applyCalls, 1);
    const std::vector<state::AttachmentRecord> attachments{attached("0000:3b:01.2", "net1", "10.1.0.9/16")};
    EXPECT_TRUE(reporter.report(records, attachments, "2026-12-03T00:00:20Z").empty());
    EXPECT_EQ(api.applyCalls, 2);
  }
}

}  // namespace
}  // namespace ibcni::dra
