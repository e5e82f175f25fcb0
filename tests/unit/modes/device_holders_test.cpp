// SPDX-License-Identifier: Apache-2.0
// plugin/modes/device_holders: the records of a device sorted by their pod's netns (alive, cannot be
// checked, gone; this invocation's own left out) and error 101 naming the holder.
#include "plugin/modes/device_holders.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

class DeviceHoldersTest : public PluginTest {
 protected:
  static state::AttachmentRecord recordOf(const std::string& container, const std::string& netns,
                                          const std::string& host = "vf0") {
    state::AttachmentRecord r;
    r.network = "ibnet";
    r.containerId = container;
    r.ifName = "net1";
    r.netns = netns;
    r.hostName = host;
    return r;
  }
  /// The invocation of an ADD of container `container` on network ibnet, net1.
  plugin::Invocation invocation(const std::string& container) const {
    plugin::Invocation inv;
    inv.conf.name = "ibnet";
    inv.args.containerId = container;
    inv.args.ifName = "net1";
    return inv;
  }
  static bool onVf0(const state::AttachmentRecord& r) { return r.hostName == "vf0"; }
};

TEST_F(DeviceHoldersTest, RecordsAreSortedByTheirPodsNetnsAndTheInvocationsOwnIsLeftOut) {
  netns_.addNetns("/var/run/netns/alive");
  netns_.addNetns("/var/run/netns/also-alive");
  netns_.hideDirectory("/hidden");
  const std::vector<state::AttachmentRecord> records = {
      recordOf("dead", "/var/run/netns/gone"),    recordOf("other-device", "/var/run/netns/alive", "vf9"),
      recordOf("self", "/var/run/netns/alive"),   recordOf("unknown", "/hidden/ns"),
      recordOf("live", "/var/run/netns/alive"),   recordOf("live2", "/var/run/netns/also-alive"),
      recordOf("dead2", "/var/run/netns/gone2")};
  const auto holders = plugin::deviceHolders(invocation("self"), deps_, records, onVf0);
  ASSERT_NE(holders.live, nullptr);
  EXPECT_EQ(holders.live->containerId, "live") << "the first live one";
  ASSERT_NE(holders.uncheckable, nullptr);
  EXPECT_EQ(holders.uncheckable->containerId, "unknown");
  ASSERT_EQ(holders.gone.size(), 2u);
  EXPECT_EQ(holders.gone[0]->containerId, "dead");
  EXPECT_EQ(holders.gone[1]->containerId, "dead2");
  EXPECT_EQ(holders.holder(), holders.live) << "a live holder before one that cannot be checked";

  auto e = plugin::busyWith("device = \"vf0\"", holders);
  EXPECT_EQ(e.code, cni::Errc::kDeviceBusy);
  EXPECT_EQ(e.msg, "device = \"vf0\" is attached to container live (network ibnet, ifname net1, netns "
                   "/var/run/netns/alive); DEL that attachment first");
}

TEST_F(DeviceHoldersTest, AHolderWhoseNetnsCannotBeCheckedIsOneAndTheMessageSaysSo) {
  netns_.hideDirectory("/hidden");
  const std::vector<state::AttachmentRecord> records = {recordOf("dead", "/var/run/netns/gone"),
                                                        recordOf("unknown", "/hidden/ns")};
  const auto holders = plugin::deviceHolders(invocation("new"), deps_, records, onVf0);
  EXPECT_EQ(holders.live, nullptr);
  ASSERT_EQ(holders.holder(), &records[1]);
  EXPECT_NE(plugin::busyWith("x", holders).msg.find(", whose netns cannot be checked from here (it may be alive)"),
            std::string::npos);
  const auto none = plugin::deviceHolders(invocation("new"), deps_, {records[0]}, onVf0);
  EXPECT_EQ(none.holder(), nullptr) << "a dead pod holds nothing";
}

}  // namespace
}  // namespace ibcni::testing
