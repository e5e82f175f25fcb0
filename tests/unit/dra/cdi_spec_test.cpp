// SPDX-License-Identifier: Apache-2.0
// The CDI spec of a prepared claim: its devices' nodes and env, IDs, and the file's life.
#include "plugin/dra/cdi_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "unit/dra/dra_devices.h"

namespace ibcni::dra {
namespace {

using nlohmann::json;

constexpr const char* kUid = "6a1c0f3e-1b2c-4d5e-8f90-0123456789ab";

sysfs::RdmaCharDevices chars() {
  sysfs::RdmaCharDevices c;
  c.uverbs = sysfs::CharDevice{"uverbs3", 231, 195};
  c.umad = {{"umad3", 231, 3}};
  c.issm = {{"issm3", 231, 67}};
  return c;
}

TEST(CdiSpec, AVfGetsItsRdmaNodesRdmaCmAndEnvByRequest) {
  CdiDevice d = vfCdiDevice(kUid, "rail-0", vf(2), chars(), sysfs::CharDevice{"rdma_cm", 10, 58});
  EXPECT_EQ(d.name, std::string(kUid) + "-vf-0000-3b-00-2");
  json spec = cdiSpec({d});
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  EXPECT_EQ(spec["kind"], "ibcni.io/vf");
  ASSERT_EQ(spec["devices"].size(), 1U);
  const json& edits = spec["devices"][0]["containerEdits"];
  EXPECT_EQ(edits["env"], json({"IBCNI_RAIL_0_RDMA_DEVICE=mlx5_3", "IBCNI_RAIL_0_NETDEV=ib3",
                                "IBCNI_RAIL_0_PCI_ADDRESS=0000:3b:00.2"}));
  EXPECT_EQ(edits["deviceNodes"], json::parse(R"([
    {"path": "/dev/infiniband/uverbs3", "type": "c", "major": 231, "minor": 195, "permissions": "rw"},
    {"path": "/dev/infiniband/umad3", "type": "c", "major": 231, "minor": 3, "permissions": "rw"},
    {"path": "/dev/infiniband/issm3", "type": "c", "major": 231, "minor": 67, "permissions": "rw"},
    {"path": "/dev/infiniband/rdma_cm", "type": "c", "major": 10, "minor": 58, "permissions": "rw"}])"));
}

TEST(CdiSpec, WhatDoesNotExistIsLeftOut) {
  IbDevice d = vf(0);
  d.ifName.clear();
  CdiDevice c = vfCdiDevice(kUid, "vf", d, {}, std::nullopt);
  EXPECT_THAT(c.nodes, ::testing::IsEmpty());
  EXPECT_EQ(c.env, std::vector<std::string>({"IBCNI_VF_RDMA_DEVICE=mlx5_1", "IBCNI_VF_PCI_ADDRESS=0000:3b:00.0"}));
}

TEST(CdiSpec, IdsAndPath) {
  EXPECT_EQ(cdiDeviceId("abc-vf-0000-3b-00-2"), "ibcni.io/vf=abc-vf-0000-3b-00-2");
  EXPECT_EQ(cdiSpecPath("/var/run/cdi", kUid), std::string("/var/run/cdi/ibcni.io-vf-") + kUid + ".json");
}

TEST(CdiSpec, TheFileIsWrittenWholeAndRemovedOnce) {
  const std::string dir = ::testing::TempDir() + "cdi-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::vector<CdiDevice> devices = {vfCdiDevice(kUid, "vf", vf(1), chars(), std::nullopt)};
  ASSERT_TRUE(writeCdiSpec(dir, kUid, devices));
  std::ifstream in(cdiSpecPath(dir, kUid));
  EXPECT_EQ(json::parse(in), cdiSpec(devices));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // no temporary file left
  ASSERT_TRUE(removeCdiSpec(dir, kUid));
  EXPECT_FALSE(std::filesystem::exists(cdiSpecPath(dir, kUid)));
  EXPECT_TRUE(removeCdiSpec(dir, kUid));  // gone already
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ibcni::dra
