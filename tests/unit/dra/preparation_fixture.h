// SPDX-License-Identifier: Apache-2.0
// The claim preparation tests' world: a FakeSysfsTree of eight VFs (read by the production sysfs
// readers), their PF's VF table in a FakeNetlink, an in-memory API, a real checkpoint file, CDI
// folder and GUID pool store in a temporary directory.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fakes/fake_netlink.h"
#include "fakes/fake_sysfs_tree.h"
#include "ipam/embedded_ipam_guids.h"
#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/claim_preparation.h"
#include "plugin/sysfs/sysfs_devices.h"
#include "plugin/sysfs/sysfs_inventory.h"
#include "support/temp_dir.h"
#include "unit/dra/dra_devices.h"
#include "unit/dra/memory_claims.h"

namespace ibcni::dra {

using nlohmann::json;

inline constexpr const char* kNode = "node-a";
inline constexpr const char* kUid = "0f5e2c9a-7d41-4b0e-9a43-5d6f7e8a9b01";

/// A claim of `uid` whose requests got `devices` (request "rail-<i>", this driver, pool `pool`).
inline json claimOf(const std::string& uid, const std::vector<std::string>& devices, const std::string& pool = kNode) {
  json results = json::array();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    results.push_back({{"request", "rail-" + std::to_string(i)}, {"driver", "ibcni.io"}, {"pool", pool},
                       {"device", devices[i]}});
  }
  return {{"metadata", {{"name", "nics"}, {"namespace", "ml"}, {"uid", uid}}},
          {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}};
}

/// `claim` with an opaque configuration entry of this driver: `parameters`, for `requests` (none:
/// every request), from the claim (source FromClaim) or its DeviceClass (FromClass).
inline json withConfig(json claim, const json& parameters, const std::vector<std::string>& requests = {},
                       const char* source = "FromClaim") {
  json entry = {{"source", source}, {"opaque", {{"driver", "ibcni.io"}, {"parameters", parameters}}}};
  if (!requests.empty()) {
    entry["requests"] = requests;
  }
  claim["status"]["allocation"]["devices"]["config"].push_back(entry);
  return claim;
}

inline std::string vfName(int n) { return eightVfsName(n); }

class ClaimPreparationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    addEightVfs(sys_);
    ASSERT_TRUE(sys_.ok()) << sys_.error();
    std::filesystem::create_directories(cdiDir());
    nl::Link pf;
    pf.name = "ib0";
    pf.adminUp = true;
    pfIndex_ = nl_.addLink(host_, pf);
    std::vector<nl::VfInfo> vfs;
    for (std::uint32_t n = 0; n < 8; ++n) {
      nl::VfInfo v;
      v.vf = n;
      v.linkState = nl::VfLinkState::kAuto;
      v.nodeGuid = v.portGuid = net::Guid{0x020000000000a000ULL + n};
      vfs.push_back(v);
    }
    nl_.setVfs(host_, pfIndex_, vfs);
  }

  std::string cdiDir() const { return dir_.path() + "/cdi"; }
  std::string checkpointPath() const { return dir_.path() + "/claims.json"; }
  ClaimPreparation preparation() {
    return ClaimPreparation(api_, devices_, inventory_, files_,
                            {.driver = "ibcni.io", .nodeName = kNode, .bootId = bootId_});
  }
  json specOnDisk() const {
    std::ifstream in(cdiSpecPath(cdiDir(), kUid));
    return json::parse(in, nullptr, false);
  }
  bool specExists() const { return std::filesystem::exists(cdiSpecPath(cdiDir(), kUid)); }
  ClaimRecords records() const { return ClaimCheckpoint(checkpointPath()).load().value(); }

  testing::FakeSysfsTree sys_;
  sysfs::SysfsDevices devices_{sys_.root()};
  sysfs::SysfsInventory inventory_{sys_.root()};
  MemoryClaims api_;
  testing::TempDir dir_{"ibcni-claims-"};
  const ClaimRef ref_{"ml", kUid, "nics"};
  std::string bootId_ = "boot-1";
  /// The PF's netdev ib0 in the host namespace, reporting the eight VFs with the GUIDs sysfs shows.
  testing::FakeNetlink nl_;
  const os::Netns host_ = os::Netns::fakeForTest("/proc/1/ns/net", 1);
  int pfIndex_ = 0;
  ipam::EmbeddedGuidPools guids_{guidOptions()};
  NodeClaimEffects files_{ClaimCheckpoint(checkpointPath()), {dir_.path(), cdiDir()}, {nl_, host_, devices_, guids_}};

  ipam::EmbeddedIpamOptions guidOptions() const {
    ipam::EmbeddedIpamOptions o;
    o.defaultDataDir = dir_.path() + "/ipam";
    return o;
  }
  /// VF `n` as the PF reports it now.
  nl::VfInfo vfNow(std::uint32_t n) { return nl_.vf(host_, pfIndex_, n).value_or(nl::VfInfo{}); }
};

}  // namespace ibcni::dra
