// SPDX-License-Identifier: Apache-2.0
// readPodPorts: the RDMA port of each attachment record that names one, with its pod, over a fake
// sysfs tree (the host's view: no namespace change).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fakes/fake_sysfs_tree.h"
#include "plugin/agent/pod_ports.h"

namespace ibcni::plugin {
namespace {

using ::ibcni::testing::FakeSysfsTree;

state::AttachmentRecord record(const std::string& pod, const std::string& device) {
  state::AttachmentRecord r;
  r.network = "ibnet";
  r.containerId = "c-" + pod;
  r.ifName = "net1";
  r.mode = "sriov";
  r.cniArgs = "IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=" + pod + ";K8S_POD_INFRA_CONTAINER_ID=x";
  r.rdmaDevice = device;
  return r;
}

TEST(PodPorts, EachRecordsRdmaPortWithItsPodAndNetwork) {
  FakeSysfsTree tree;
  tree.addRdmaDevice("0000:3b:01.0", "mlx5_3")
      .writeFile("class/infiniband/mlx5_3/ports/1/state", "4: ACTIVE\n")
      .writeFile("class/infiniband/mlx5_3/ports/1/counters/port_xmit_data", "100\n");
  ASSERT_TRUE(tree.ok()) << tree.error();
  rdma::CounterSource source;
  source.sysfsRoot = tree.root();
  source.netnsSysfsRoot = tree.root();
  source.mountFreshSysfs = false;
  state::AttachmentRecord noRdma = record("web", "");
  const PodPorts got = readPodPorts({record("trainer-0", "mlx5_3"), noRdma, record("gone", "mlx5_9")}, source);
  ASSERT_EQ(got.ports.size(), 1u);
  EXPECT_EQ(got.ports[0].pod, "trainer-0");
  EXPECT_EQ(got.ports[0].podNamespace, "team-a");
  EXPECT_EQ(got.ports[0].network, "ibnet");
  EXPECT_EQ(got.ports[0].port.device, "mlx5_3");
  EXPECT_EQ(got.ports[0].port.counters.at("port_xmit_data"), 100u);
  ASSERT_EQ(got.errors.size(), 1u) << "the record whose device is not there";
  EXPECT_NE(got.errors[0].find("c-gone/net1"), std::string::npos) << got.errors[0];
  EXPECT_NE(got.errors[0].find("mlx5_9"), std::string::npos) << got.errors[0];
}

}  // namespace
}  // namespace ibcni::plugin
