// SPDX-License-Identifier: Apache-2.0
// The ResourceSlices of a node with 64 InfiniBand VFs (a FakeSysfsTree read by the production
// readers) sent to a real kube-apiserver (tests/support/control_plane.h): taken as valid by its
// own validation, with nothing dropped, shown by kubectl, and what they say matches sysfs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "unit/dra/dra_devices.h"
#include "fakes/fake_sysfs_tree.h"
#include "lib/http/curl_http_client.h"
#include "plugin/dra/kube_slice_api.h"
#include "plugin/dra/resource_slices.h"
#include "support/control_plane.h"
#include "support/exec_program.h"

namespace ibcni::dra {
namespace {

using ::ibcni::testing::ApiProxy;
using ::ibcni::testing::ControlPlane;
using ::ibcni::testing::FakeSysfsTree;
using nlohmann::json;

constexpr int kVfs = 64;
constexpr const char* kSlices = "/apis/resource.k8s.io/v1/resourceslices";

std::string vfPci(int n) {
  char text[16];
  std::snprintf(text, sizeof text, "0000:3b:%02x.%x", 1 + n / 8, n % 8);
  return text;
}

/// "0200:0000:0000:0a05" for VF 5.
std::string vfGuid(int n) {
  char text[24];
  std::snprintf(text, sizeof text, "0200:0000:0000:%04x", 0x0a00 + n);
  return text;
}

class ResourceSlicesServerTest : public ::testing::Test {
 protected:
  /// PF 0000:3b:00.0 (ib0, mlx5_0, NUMA node 1) with 64 VFs: VF n is ib<n+1> on mlx5_<n+1> with
  /// GUID vfGuid(n), except VF 7 (all-zero GUID) and VF 9 (port down).
  void SetUp() override {
    if (!ControlPlane::built()) {
      GTEST_SKIP() << ControlPlane::kNotBuilt;
    }
    ASSERT_TRUE(startApi(cp_, api_));
    node_ = "dra-node-" + std::to_string(::getpid());
    // The driver's ServiceAccount, with the ResourceSlice rights the chart will give it.
    auto ns = api_.freshNamespace("dra");
    ASSERT_TRUE(ns) << ns.error();
    auto token = api_.serviceAccount(*ns, "ibcni-dra", json::array(),
                                     json::parse(R"([{"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
                                                      "verbs": ["get", "list", "watch", "create", "update", "delete"]}])"));
    ASSERT_TRUE(token) << token.error();
    token_ = *token;
    sys_.addPf("0000:3b:00.0", "ib0", "mlx5_0", kVfs)
        .setNodeGuid("mlx5_0", "0002:c903:00a1:b2c2")
        .setRdmaPort("mlx5_0", 1, "InfiniBand", "4: ACTIVE", "400 Gb/sec (4X NDR)",
                     "fe80:0000:0000:0000:0002:c903:00a1:b2c3")
        .setNumaNode("0000:3b:00.0", 1)
        .setMtu("ib0", 4092);
    for (int n = 0; n < kVfs; ++n) {
      const std::string rdma = "mlx5_" + std::to_string(n + 1);
      const std::string guid = n == 7 ? "0000:0000:0000:0000" : vfGuid(n);
      sys_.addVf("0000:3b:00.0", n, vfPci(n), "ib" + std::to_string(n + 1), rdma)
          .setNodeGuid(rdma, guid)
          .setRdmaPort(rdma, 1, "InfiniBand", n == 9 ? "1: DOWN" : "4: ACTIVE", "400 Gb/sec (4X NDR)",
                       "fe80:0000:0000:0000:" + guid)
          .setNumaNode(vfPci(n), 1)
          .setMtu("ib" + std::to_string(n + 1), 4092);
    }
    ASSERT_TRUE(sys_.ok()) << sys_.error();
  }

  void TearDown() override {
    for (const auto& name : created_) {
      (void)api_.admin("DELETE", std::string(kSlices) + "/" + name);
    }
  }

  std::vector<IbDevice> discover() { return discoverIn(sys_); }

  /// POSTs every slice as the driver's ServiceAccount, through the proxy that counts what the
  /// server answered; the names of those created.
  void publish(const std::vector<json>& slices) {
    for (const auto& s : slices) {
      auto [status, body] = api_.call("POST", kSlices, s, token_);
      ASSERT_EQ(status, 201) << body.dump();
      created_.push_back(s["metadata"]["name"]);
    }
  }

  /// This node's slices as the server has them, devices by name.
  std::map<std::string, json> devicesOnServer() {
    auto [status, list] = api_.admin("GET", std::string(kSlices) + "?fieldSelector=spec.nodeName%3D" + node_);
    EXPECT_EQ(status, 200) << list.dump();
    std::map<std::string, json> out;
    for (const auto& s : list.value("items", json::array())) {
      for (const auto& d : s["spec"].value("devices", json::array())) {
        out[d["name"]] = d;
      }
    }
    return out;
  }

  ControlPlane cp_;
  ApiProxy api_;
  FakeSysfsTree sys_;
  std::string node_;
  std::string token_;
  std::vector<std::string> created_;
};

TEST_F(ResourceSlicesServerTest, SixtyFourVfsAreTakenAsValidWithNothingDropped) {
  auto devices = discover();
  ASSERT_EQ(devices.size(), static_cast<std::size_t>(kVfs) + 1);  // the VFs and the IPoIB port
  SliceOptions options;
  options.nodeName = node_;
  options.generation = 1;
  auto slices = buildSlices(devices, options);
  // 65 devices, two of them tainted: the first slice holds 64, the second the last one.
  ASSERT_EQ(slices.size(), 2U);
  publish(slices);
  EXPECT_TRUE(api_.allValid());

  auto onServer = devicesOnServer();
  ASSERT_EQ(onServer.size(), devices.size());
  for (const auto& d : devices) {
    ASSERT_TRUE(onServer.contains(d.name)) << d.name;
    const json sent = sliceDevice(d, options);
    const json& got = onServer[d.name];
    EXPECT_EQ(got["attributes"], sent["attributes"]) << d.name;
    EXPECT_EQ(got.value("allowMultipleAllocations", false), sent.value("allowMultipleAllocations", false)) << d.name;
    ASSERT_EQ(got.value("taints", json::array()).size(), sent.value("taints", json::array()).size()) << d.name;
  }
}

TEST_F(ResourceSlicesServerTest, WhatTheServerHoldsIsWhatSysfsSays) {
  SliceOptions options;
  options.nodeName = node_;
  publish(buildSlices(discover(), options));
  auto onServer = devicesOnServer();
  for (int n : {0, 7, 9, 33, kVfs - 1}) {
    const std::string name = deviceName(DeviceKind::kVf, net::PciAddress::parse(vfPci(n)).value());
    ASSERT_TRUE(onServer.contains(name)) << name;
    json a = onServer[name]["attributes"];  // a copy: a missing attribute reads as null
    EXPECT_EQ(a["resource.kubernetes.io/pciBusID"]["string"], vfPci(n));
    EXPECT_EQ(a["resource.kubernetes.io/pcieRoot"]["string"], "pci0000:00");
    EXPECT_EQ(a["resource.kubernetes.io/numaNode"]["int"], 1);
    EXPECT_EQ(a["vfIndex"]["int"], n);
    EXPECT_EQ(a["rdmaDevice"]["string"], "mlx5_" + std::to_string(n + 1));
    EXPECT_EQ(a["ifName"]["string"], "ib" + std::to_string(n + 1));
    EXPECT_EQ(a["pfName"]["string"], "ib0");
    EXPECT_EQ(a["rateGbps"]["int"], 400);
    EXPECT_EQ(a["mtu"]["int"], 4092);
    EXPECT_EQ(a["nodeGuid"]["string"], n == 7 ? "0000:0000:0000:0000" : vfGuid(n));
    EXPECT_EQ(a["guidSet"]["bool"], n != 7);
    EXPECT_EQ(a["portState"]["string"], n == 9 ? "DOWN" : "ACTIVE");
    const json taints = onServer[name].value("taints", json::array());
    std::vector<std::string> keys;
    for (const auto& t : taints) {
      keys.push_back(t["key"]);
      EXPECT_EQ(t["effect"], "NoSchedule");
    }
    std::vector<std::string> expected;
    if (n == 9) {
      expected.emplace_back(kTaintPortDown);
    }
    if (n == 7) {
      expected.emplace_back(kTaintGuidUnset);
    }
    EXPECT_EQ(keys, expected) << name;
  }
}

TEST_F(ResourceSlicesServerTest, KubectlShowsTheSlicesAndTheirDevices) {
  SliceOptions options;
  options.nodeName = node_;
  publish(buildSlices(discover(), options));
  auto kubectl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {cp_.kubectl(), "--kubeconfig", cp_.adminKubeconfig()});
    return ::ibcni::testing::runProgram(args, {::ibcni::testing::kPathEnv}, std::nullopt);
  };
  auto names = kubectl({"get", "resourceslices", "-o", "name", "--field-selector", "spec.nodeName=" + node_});
  ASSERT_EQ(names.status, 0) << names.describe();
  EXPECT_EQ(names.out, "resourceslice.resource.k8s.io/" + node_ + "-ibcni-io-0\nresourceslice.resource.k8s.io/" +
                           node_ + "-ibcni-io-1\n");
  auto devices = kubectl({"get", "resourceslice", node_ + "-ibcni-io-0", "-o", "jsonpath={.spec.devices[*].name}"});
  ASSERT_EQ(devices.status, 0) << devices.describe();
  EXPECT_THAT(devices.out, ::testing::StartsWith("ipoib-0000-3b-00-0-p1 vf-0000-3b-01-0 vf-0000-3b-01-1 "));
}

TEST_F(ResourceSlicesServerTest, ThePublisherKeepsTheServersSlicesEqualToTheDevices) {
  http::CurlHttpClient client;
  KubeTarget target;
  target.server = api_.url();
  target.token = token_;
  KubeSliceApi slices(client, target);
  SliceOptions options;
  options.nodeName = node_;
  SlicePublisher publisher(slices, options);
  auto devices = discover();

  auto first = publisher.publish(devices);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->generation, 1);
  EXPECT_EQ(first->created, 2U);
  created_ = {node_ + "-ibcni-io-0", node_ + "-ibcni-io-1"};
  EXPECT_EQ(devicesOnServer().size(), devices.size());

  auto same = publisher.publish(devices);  // nothing changed: nothing written, though the server added fields
  ASSERT_TRUE(same) << same.error().message;
  EXPECT_FALSE(same->changed());

  // VF 9's port comes up: its taint goes, and the 65 devices fit one slice of 128 minus one taint...
  // still two slices (VF 7 is tainted), at generation 2.
  sys_.setRdmaPort("mlx5_10", 1, "InfiniBand", "4: ACTIVE", "400 Gb/sec (4X NDR)", "fe80:0000:0000:0000:" + vfGuid(9));
  auto up = publisher.publish(discover());
  ASSERT_TRUE(up) << up.error().message;
  EXPECT_EQ(up->generation, 2);
  auto onServer = devicesOnServer();
  EXPECT_FALSE(onServer["vf-0000-3b-02-1"].contains("taints"));

  // The kubelet deletes every slice of its node when it starts: the next pass writes them again.
  for (const auto& name : created_) {
    ASSERT_EQ(api_.admin("DELETE", std::string(kSlices) + "/" + name).first, 200);
  }
  auto again = publisher.publish(discover());
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->created, 2U);
  EXPECT_EQ(devicesOnServer().size(), devices.size());

  // VF 7 gets a GUID: no device is tainted, one slice holds them all; the other is deleted.
  sys_.setNodeGuid("mlx5_8", vfGuid(7));
  auto one = publisher.publish(discover());
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->deleted, 1U);
  auto [status, list] = api_.admin("GET", std::string(kSlices) + "?fieldSelector=spec.nodeName%3D" + node_);
  ASSERT_EQ(list["items"].size(), 1U) << list.dump();
  EXPECT_EQ(list["items"][0]["spec"]["pool"]["resourceSliceCount"], 1);
  EXPECT_EQ(list["items"][0]["spec"]["devices"].size(), devices.size());
  EXPECT_TRUE(api_.allValid());
}

TEST_F(ResourceSlicesServerTest, TheServerRefusesASliceOverItsLimitAsTheBuilderExpects) {
  // The planted fault: one slice of 65 devices, two tainted, where the builder cuts at 64.
  SliceOptions options;
  options.nodeName = node_;
  auto devices = discover();
  json whole = buildSlices({}, options)[0];
  for (const auto& d : devices) {
    whole["spec"]["devices"].push_back(sliceDevice(d, options));
  }
  auto [status, body] = api_.call("POST", kSlices, whole, token_);
  if (status == 201) {
    created_.push_back(whole["metadata"]["name"]);
  }
  EXPECT_EQ(status, 422) << body.dump();
}

}  // namespace
}  // namespace ibcni::dra
