// SPDX-License-Identifier: Apache-2.0
// What the node agent counts for its metrics, over records and pools written by the real store code:
// attachment records by network and mode, ibcni-ipam pools' used and free addresses, cluster pools'
// blocks by ledger state; and each pass's actions.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ipam/cluster/block_ledger.h"
#include "ipam/embedded_ipam.h"
#include "plugin/agent/node_counts.h"
#include "plugin/state/file_attachment_store.h"
#include "fakes/ipam_call.h"
#include "support/temp_dir.h"

namespace ibcni::testing {
namespace {

std::unique_ptr<state::AttachmentStore> fileStore(const std::string& dir) {
  return std::make_unique<state::FileAttachmentStore>(dir);
}

void saveRecord(const std::string& dir, const std::string& network, const std::string& mode, const std::string& cid) {
  state::AttachmentRecord r;
  r.network = network;
  r.mode = mode;
  r.containerId = cid;
  r.ifName = "net1";
  r.netns = "/var/run/netns/" + cid;
  r.hostName = "vf-" + cid;
  state::FileAttachmentStore store(dir);
  ASSERT_TRUE(store.save(r));
}

std::string netConf(const std::string& dataDir, const std::string& name, const std::string& subnet) {
  return R"({"cniVersion": "1.1.0", "name": ")" + name + R"(", "type": "ibcni", "ipam": {"type": "ibcni-ipam", "dataDir": ")" +
         dataDir + R"(", "ranges": [[{"subnet": ")" + subnet + R"("}]]}})";
}

TEST(NodeCounts, AttachmentsAreCountedPerNetworkAndModeAcrossStateDirs) {
  TempDir a("ibcni-agent-test");
  TempDir b("ibcni-agent-test");
  saveRecord(a.path(), "ibnet", "sriov", "c1");
  saveRecord(a.path(), "ibnet", "sriov", "c2");
  saveRecord(a.path(), "ipoibnet", "ipoib", "c3");
  saveRecord(b.path(), "ibnet", "sriov", "c4");
  plugin::NodeCounts c;
  plugin::countAttachments({a.path(), b.path(), a.path() + "/missing"}, fileStore, c);
  EXPECT_TRUE(c.errors.empty()) << c.errors.front();
  const std::vector<plugin::AttachmentCount> want{{"ibnet", "sriov", 3}, {"ipoibnet", "ipoib", 1}};
  EXPECT_EQ(c.attachments, want);
  ASSERT_TRUE(state::FileAttachmentStore(a.path()).remove("ibnet", "c1", "net1"));
  plugin::NodeCounts after;
  plugin::countAttachments({a.path(), b.path()}, fileStore, after);
  EXPECT_EQ(after.attachments.front().count, 2u) << "counted anew each time: a DEL shows at once";
}

TEST(NodeCounts, NodeLocalPoolsCountUsedAndFreeAddresses) {
  TempDir data("ibcni-agent-test");
  ipam::EmbeddedIpam ipam;
  const std::string small = netConf(data.path(), "small", "10.6.0.0/29");  // .2-.6: 5 addresses
  const std::string big = netConf(data.path(), "big", "10.7.0.0/24");      // .2-.254: 253
  for (const char* cid : {"a", "b", "c"}) {
    ASSERT_TRUE(ipam.add(IpamCall::fromText(small, cid, "/proc/self/ns/net")));
  }
  ASSERT_TRUE(ipam.add(IpamCall::fromText(big, "d", "/proc/self/ns/net")));
  std::filesystem::create_directories(data.path() + "/not-a-pool");
  plugin::NodeCounts c;
  plugin::countPools({data.path()}, std::chrono::milliseconds(100), c);
  EXPECT_TRUE(c.errors.empty()) << c.errors.front();
  const std::vector<plugin::AddressCount> want{{"big", "big", 1, 252}, {"small", "small", 3, 2}};
  EXPECT_EQ(c.addresses, want);
  EXPECT_TRUE(c.blocks.empty());
  ASSERT_TRUE(ipam.del(IpamCall::fromText(small, "a", "/proc/self/ns/net", "", "net1", cni::Command::kDel)));
  plugin::NodeCounts after;
  plugin::countPools({data.path()}, std::chrono::milliseconds(100), after);
  ASSERT_EQ(after.addresses.size(), 2u);
  EXPECT_EQ(after.addresses[1], (plugin::AddressCount{"small", "small", 2, 3}));
}

TEST(NodeCounts, ClusterPoolsCountTheLedgersBlocksByStateAndFreeInOwnedBlocks) {
  TempDir data("ibcni-agent-test");
  const std::string dir = data.path() + "/.cluster/cpool";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/network.json")
      << R"({"cniVersion": "1.1.0", "name": "cnet", "type": "ibcni", "ipam": {"type": "ibcni-ipam", "ranges": [[{"subnet": "10.56.0.0/24"}]],)"
      << R"( "cluster": {"pool": "cpool", "blockSize": 16, "backend": "etcd", "etcd": {"endpoints": ["http://127.0.0.1:1"]}}}})";
  ipam::Ledger l;
  l.pool = "cpool";
  l.node = "node-a";
  l.network = "cnet";
  l.backend = "etcd";
  using State = ipam::LedgerEntry::State;
  l.blocks.push_back({State::kOwned, 0, "10.56.0.0-28", {}, "3", "7", "", {}, {}});
  l.blocks.push_back({State::kOwned, 0, "10.56.0.16-28", {}, "4", "8", "", {}, {}});
  l.blocks.push_back({State::kLost, 0, "10.56.0.32-28", {}, "5", "9", "", {}, {}});
  ASSERT_TRUE(ipam::writeLedger(dir, l));
  plugin::NodeCounts c;
  plugin::countPools({data.path()}, std::chrono::milliseconds(100), c);
  EXPECT_TRUE(c.errors.empty()) << c.errors.front();
  const std::vector<plugin::BlockCount> blocks{{"cpool", "lost", 1}, {"cpool", "owned", 2}};
  EXPECT_EQ(c.blocks, blocks);
  const std::vector<plugin::AddressCount> addresses{{"cnet", "cpool", 0, 32}};
  EXPECT_EQ(c.addresses, addresses) << "free: the two owned blocks of 16";
}

TEST(NodeCounts, AnUnreadablePoolConfigurationIsNamed) {
  TempDir data("ibcni-agent-test");
  std::filesystem::create_directories(data.path() + "/broken");
  std::ofstream(data.path() + "/broken/network.json") << "{not json";
  plugin::NodeCounts c;
  plugin::countPools({data.path()}, std::chrono::milliseconds(100), c);
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_NE(c.errors[0].find("broken/network.json"), std::string::npos) << c.errors[0];
}

TEST(NodeCounts, ActionsOfAPassAreCountedPerAction) {
  plugin::ReconcileReport r;
  r.attachments.push_back({"undone", "", "n", "c1", "net1", "", "", ""});
  r.attachments.push_back({"alive", "", "n", "c2", "net1", "", "", ""});
  r.attachments.push_back({"undone", "", "n", "c3", "net1", "", "", ""});
  r.allocations.push_back({"released", "", "n", "c4", "net1", "", {}, "address"});
  const std::map<std::string, std::uint64_t> want{{"alive", 1}, {"released", 1}, {"undone", 2}};
  EXPECT_EQ(plugin::actionCounts(r), want);
}

}  // namespace
}  // namespace ibcni::testing
