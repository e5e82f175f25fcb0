// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sys/stat.h>

#include "plugin/state/file_attachment_store.h"
#include "support/temp_dir.h"

namespace ibcni::state {
namespace {

namespace fs = std::filesystem;

class StoreTest : public testing::TempDirTest {
 protected:
  StoreTest() : TempDirTest("ibcni-store") {}

  static AttachmentRecord record(const std::string& cid, const std::string& ifName) {
    AttachmentRecord r;
    r.network = "ibnet";
    r.containerId = cid;
    r.ifName = ifName;
    r.netns = "/var/run/netns/p";
    r.mode = "sriov";
    r.deviceKey = "pci-0000:af:06.1";
    r.pciAddress = net::PciAddress::parse("0000:af:06.1");
    r.hostName = "ib2";
    r.hostIndex = 7;
    r.hostMtu = 2044;
    r.hostUp = true;
    r.hostAlias = "admin alias";
    r.hostMac = "00:11";
    r.podIndex = 9;
    r.podMtu = 4092;
    r.ipamType = "host-local";
    r.result.interfaces.push_back({ifName, "", r.netns, 4092, r.pciAddress->text, ""});
    r.result.ips.push_back({*net::IpPrefix::parse("10.1.2.3/24"), std::nullopt, 0});
    return r;
  }
};

TEST_F(StoreTest, SaveLoadRemove) {
  FileAttachmentStore store(dir_);
  auto rec = record("c1", "net1");
  ASSERT_TRUE(store.save(rec));
  auto loaded = store.load("ibnet", "c1", "net1");
  ASSERT_TRUE(loaded);
  ASSERT_TRUE(*loaded);
  const auto& r = **loaded;
  EXPECT_EQ(r.hostName, "ib2");
  EXPECT_EQ(r.hostIndex, 7);
  EXPECT_EQ(r.hostMtu, 2044u);
  EXPECT_TRUE(r.hostUp);
  EXPECT_EQ(r.hostAlias, "admin alias");
  EXPECT_EQ(r.podMtu, 4092u);
  EXPECT_EQ(r.result.ips, rec.result.ips);
  EXPECT_EQ(r.result.interfaces[0].pciId, "0000:af:06.1");

  struct stat st {};
  ASSERT_EQ(::stat(store.pathOf("ibnet", "c1", "net1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(fs::exists(store.pathOf("ibnet", "c1", "net1") + ".tmp"));

  ASSERT_TRUE(store.remove("ibnet", "c1", "net1"));
  auto gone = store.load("ibnet", "c1", "net1");
  ASSERT_TRUE(gone);
  EXPECT_FALSE(*gone);
  EXPECT_TRUE(store.remove("ibnet", "c1", "net1")) << "removing twice succeeds";
}

TEST_F(StoreTest, AttachmentsWithUnderscoresDoNotCollide) {
  FileAttachmentStore store(dir_);
  ASSERT_TRUE(store.save(record("a_b", "c")));
  auto other = store.load("ibnet", "a", "b_c");
  ASSERT_TRUE(other);
  EXPECT_FALSE(*other) << "(a, b_c) is not (a_b, c)";
  ASSERT_TRUE(store.remove("ibnet", "a", "b_c"));
  auto kept = store.load("ibnet", "a_b", "c");
  ASSERT_TRUE(kept && *kept);
  EXPECT_EQ(store.list("ibnet")->size(), 1u);
}

TEST_F(StoreTest, RecordOfAnotherAttachmentIsRefused) {
  FileAttachmentStore store(dir_);
  ASSERT_TRUE(store.save(record("c1", "net1")));
  fs::create_directories(dir_ + "/attachments/ibnet/c2");
  fs::copy_file(store.pathOf("ibnet", "c1", "net1"), store.pathOf("ibnet", "c2", "net1"));
  auto r = store.load("ibnet", "c2", "net1");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().err, EINVAL);
}

TEST_F(StoreTest, MissingIsNotAnError) {
  FileAttachmentStore store(dir_ + "/never-created");
  auto r = store.load("ibnet", "c1", "net1");
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
  auto list = store.list("");
  ASSERT_TRUE(list);
  EXPECT_TRUE(list->empty());
}

TEST_F(StoreTest, ListsPerNetworkAndSkipsGarbage) {
  FileAttachmentStore store(dir_);
  ASSERT_TRUE(store.save(record("c1", "net1")));
  ASSERT_TRUE(store.save(record("c2", "net1")));
  auto other = record("c3", "net1");
  other.network = "other";
  ASSERT_TRUE(store.save(other));
  std::ofstream(dir_ + "/attachments/ibnet/c1/junk.json") << "{not json";
  auto mine = store.list("ibnet");
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->size(), 2u);
  auto all = store.list("");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 3u);
}

TEST_F(StoreTest, UndecodableRecordIsEinval) {
  FileAttachmentStore store(dir_);
  ASSERT_TRUE(store.save(record("c1", "net1")));
  std::ofstream(store.pathOf("ibnet", "c1", "net1"), std::ios::trunc) << "{\"format\": 1}";
  auto r = store.load("ibnet", "c1", "net1");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().err, EINVAL);
}

TEST_F(StoreTest, NewerFormatIsRefusedClearly) {
  auto text = FileAttachmentStore::encode(record("c1", "net1"));
  auto pos = text.find("\"format\": 1");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 11, "\"format\": 99");
  auto r = FileAttachmentStore::decode(text, "x");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().op.find("newer"), std::string::npos);
}

// PCI addresses are typed once read: the record keeps them as text, and text that is not one makes
// the record unreadable, named with its field (never a device that no one can find later).
TEST_F(StoreTest, PciAddressesAreReadTypedAndABadOneIsRefusedByName) {
  auto rec = record("c1", "net1");
  rec.pfPci = net::PciAddress::parse("AF:00.0");  // the short form, any case: kept canonical
  rec.vfIndex = 3;
  auto back = FileAttachmentStore::decode(FileAttachmentStore::encode(rec), "x");
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(back->pciAddress, net::PciAddress::parse("0000:af:06.1"));
  ASSERT_TRUE(back->pfPci);
  EXPECT_EQ(back->pfPci->text, "0000:af:00.0");
  for (const auto& [from, field] : std::vector<std::pair<std::string, std::string>>{
           {"\"pciAddress\": \"0000:af:06.1\"", "host.pciAddress"}, {"\"pfPciAddress\": \"0000:af:00.0\"", "vf.pfPciAddress"}}) {
    auto text = FileAttachmentStore::encode(rec);
    auto pos = text.find(from);
    ASSERT_NE(pos, std::string::npos) << from << " in " << text;
    text.replace(pos, from.size(), from.substr(0, from.find(':') + 2) + "\"af:06\"");
    auto bad = FileAttachmentStore::decode(text, "x");
    ASSERT_FALSE(bad) << field;
    EXPECT_NE(bad.error().op.find(field + " \"af:06\" is not a PCI address"), std::string::npos) << bad.error().op;
  }
  rec.pciAddress.reset();
  rec.pfPci.reset();
  back = FileAttachmentStore::decode(FileAttachmentStore::encode(rec), "x");
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_FALSE(back->pciAddress);
  EXPECT_FALSE(back->pfPci);
}

TEST_F(StoreTest, ReadsTheVersion1FormatAsWritten) {
  // The first released record format, byte for byte: later versions must keep reading it.
  const char* v1 = R"({"format":1,"network":"ibnet","containerID":"c1","ifname":"net1","netns":"/ns",
    "mode":"sriov","deviceKey":"netdev-vf0","host":{"pciAddress":"","name":"vf0","index":4,"mtu":1500,
    "up":false,"alias":"","mac":"aa:bb:cc:dd:ee:ff"},"pod":{"index":4,"mac":""},"ipamType":"",
    "result":{"cniVersion":"1.1.0","interfaces":[{"name":"net1","sandbox":"/ns"}]},"createdAt":"2026-11-21T00:00:00Z"})";
  auto r = FileAttachmentStore::decode(v1, "v1");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->hostName, "vf0");
  EXPECT_EQ(r->hostMtu, 1500u);
  EXPECT_FALSE(r->podMtu);
  EXPECT_EQ(r->result.interfaces[0].sandbox, "/ns");
  EXPECT_EQ(r->deviceInfoFile, "") << "a record of an older ibcni: ADD wrote no device-info file";
}

// The device-info file ADD wrote is kept (DEL removes only that one), and left out when none.
TEST_F(StoreTest, DeviceInfoFileRoundTrips) {
  auto rec = record("c1", "net1");
  EXPECT_EQ(FileAttachmentStore::encode(rec).find("deviceInfoFile"), std::string::npos);
  rec.deviceInfoFile = "/var/run/k8s.cni.cncf.io/devinfo/cni/default-ib-c1_net1";
  auto back = FileAttachmentStore::decode(FileAttachmentStore::encode(rec), "x");
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(back->deviceInfoFile, rec.deviceInfoFile);
}

// policyRouting's table and priority, which DEL deletes the rules by; none written without it.
TEST_F(StoreTest, PolicyTableAndPriorityRoundTrip) {
  auto rec = record("c1", "net1");
  EXPECT_EQ(FileAttachmentStore::encode(rec).find("policyRouting"), std::string::npos);
  auto back = FileAttachmentStore::decode(FileAttachmentStore::encode(rec), "x");
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_FALSE(back->policyTable);
  rec.policyTable = 101;
  rec.policyPriority = 1000;
  back = FileAttachmentStore::decode(FileAttachmentStore::encode(rec), "x");
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(back->policyTable, 101u);
  EXPECT_EQ(back->policyPriority, 1000u);
}

// A GUID from guidPool keeps the pool and its store beside the VF's GUIDs, so that DEL releases it
// where ADD took it; a record without one writes no such key.
TEST_F(StoreTest, GuidPoolAndItsStoreRoundTrip) {
  auto rec = record("c1", "net1");
  rec.pfPci = net::PciAddress::parse("0000:3b:00.0");
  rec.vfIndex = 2;
  EXPECT_EQ(FileAttachmentStore::encode(rec).find("guidPool"), std::string::npos);
  rec.guid = "02:00:00:00:00:00:01:05";
  rec.guidPool = "gpool";
  rec.guidPoolDir = "/run/ibcni-ipam/.guid/gpool";
  auto back = FileAttachmentStore::decode(FileAttachmentStore::encode(rec), "x");
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(back->guid, rec.guid);
  EXPECT_EQ(back->guidPool, "gpool");
  EXPECT_EQ(back->guidPoolDir, "/run/ibcni-ipam/.guid/gpool");
  const auto text = FileAttachmentStore::encode(rec);
  EXPECT_NE(text.find("\"dir\": \"/run/ibcni-ipam/.guid/gpool\""), std::string::npos) << text;
}

// An ipoib record keeps its pkey as the number of the key (no membership bit), as the first
// version wrote it; anything else in that field is no record ibcni wrote.
TEST_F(StoreTest, IpoibPkeyIsTheNumberOfTheKey) {
  auto rec = record("c1", "net1");
  rec.mode = "ipoib";
  rec.pkey = net::Pkey::fromWire(0x0123);
  rec.ipoibMode = "connected";
  const std::string text = FileAttachmentStore::encode(rec);
  EXPECT_NE(text.find("\"ipoib\": {\n    \"mode\": \"connected\",\n    \"pkey\": 291,\n    \"umcast\": false\n  }"),
            std::string::npos)
      << text;
  auto back = FileAttachmentStore::decode(text, "x");
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(back->pkey, net::Pkey::fromWire(0x0123));

  std::string v1 = text;
  v1.replace(v1.find("\"pkey\": 291"), 11, "\"pkey\": 32767");
  back = FileAttachmentStore::decode(v1, "x");
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(back->pkey, net::Pkey::fromWire(0x7fff));
  for (const char* bad : {"32768", "65535", "65536", "4294967295"}) {
    std::string odd = text;
    odd.replace(odd.find("\"pkey\": 291"), 11, std::string("\"pkey\": ") + bad);
    auto r = FileAttachmentStore::decode(odd, "x");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().err, EINVAL);
    EXPECT_NE(r.error().op.find("ipoib.pkey " + std::string(bad)), std::string::npos) << r.error().op;
  }
}

}  // namespace
}  // namespace ibcni::state
