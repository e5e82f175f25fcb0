// SPDX-License-Identifier: Apache-2.0
// The device-info file ADD writes for Multus (device-info spec v1.1.0, section 5.1.2) over the
// plugin fixture and a fake InfiniBand VF: written when runtimeConfig.CNIDeviceInfoFile names a
// file that is not there, never when the device plugin's copy is; removed by DEL only when ADD wrote
// it; a hostile path is error 7 before any change; a failed ADD leaves no file. And the device the
// runtime's file names, read by ADD and CHECK only (withDeviceFromInfoFile).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ibcni/config/net_conf.h"
#include "plugin/commands/device_info.h"
#include "support/temp_dir.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

constexpr const char* kDpCopy = R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:00.3"}})";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The attachment store, except that the final (durable) save fails: the last step of ADD.
class FailingSaveStore final : public state::AttachmentStore {
 public:
  explicit FailingSaveStore(const std::string& dir) : inner_(dir) {}
  os::SysResult<void> save(const state::AttachmentRecord&) override { return os::sysFail(ENOSPC, "write record"); }
  os::SysResult<void> saveVolatile(const state::AttachmentRecord& r) override { return inner_.saveVolatile(r); }
  os::SysResult<std::optional<state::AttachmentRecord>> load(const std::string& n, const std::string& c,
                                                             const std::string& i) override {
    return inner_.load(n, c, i);
  }
  os::SysResult<void> remove(const std::string& n, const std::string& c, const std::string& i) override {
    return inner_.remove(n, c, i);
  }
  os::SysResult<std::vector<state::AttachmentRecord>> list(const std::string& n) override { return inner_.list(n); }

 private:
  state::FileAttachmentStore inner_;
};

class DeviceInfoTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    addIbPfWithVf(kPf, kVfNumber, kVf, kOldGuid);
    sysfs_.setPkeys("mlx5_3", 1, {"0xffff"});
    ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
    nl_.clearCalls();
  }

  /// Multus' name for the file: devinfo/cni/<namespace>-<network>-<containerID>_<ifname>.
  std::string infoPath() const { return devinfoRoot() + "cni/default-ibnet-c1_net1"; }

  json vfConfig(const std::string& infoFile) const {
    json c = config();
    c.erase("device");
    c.erase("mtu");
    c["deviceID"] = kVf;
    c["capabilities"] = {{"deviceID", true}, {"CNIDeviceInfoFile", true}};
    c["runtimeConfig"] = {{"deviceID", kVf}, {"CNIDeviceInfoFile", infoFile}};
    return c;
  }

  std::string nodeState() {
    return snapshot(host_) + snapshot(pod_) + "mlx5_3 in " + std::to_string(rdma_.nsOf("mlx5_3")) +
           " records " + std::to_string(records().size()) + " allocations " + std::to_string(ipam_.allocations.size());
  }
  /// Every entry under the test's directory but the lock files.
  std::string tree() const {
    std::string s;
    for (const auto& e : std::filesystem::recursive_directory_iterator(stateDir_)) {
      if (e.path().string().find("/locks") == std::string::npos) {
        s += e.path().string() + "\n";
      }
    }
    return s;
  }
};

TEST_F(DeviceInfoTest, AddWritesTheVfDeviceInfoAndDelRemovesIt) {
  const json c = vfConfig(infoPath());
  add(c);
  ASSERT_TRUE(std::filesystem::is_regular_file(infoPath()));
  const json doc = json::parse(slurp(infoPath()), nullptr, false);
  ASSERT_TRUE(doc.is_object()) << slurp(infoPath());
  EXPECT_EQ(doc["type"], "pci");
  EXPECT_EQ(doc["version"], "1.1.0");
  EXPECT_EQ(doc["pci"]["pci-address"], kVf);
  EXPECT_EQ(doc["pci"]["pf-pci-address"], kPf);
  EXPECT_EQ(doc["pci"]["rdma-device"], "mlx5_3");
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(records()[0].deviceInfoFile, infoPath());

  ASSERT_EQ(run("DEL", c).exitCode, 0);
  EXPECT_FALSE(std::filesystem::exists(infoPath()));
  EXPECT_TRUE(records().empty());
  EXPECT_EQ(run("DEL", c).exitCode, 0) << "DEL again, the file gone";
}

// rdmaIsolation (the node in exclusive mode): the RDMA device is in the pod, under the name the
// file gives.
TEST_F(DeviceInfoTest, RdmaDeviceIsTheOneThePodSees) {
  rdma_.setMode(rdma::NetnsMode::kExclusive);
  const auto hostNs = rdma_.nsOf("mlx5_3");
  add(vfConfig(infoPath()));
  EXPECT_NE(rdma_.nsOf("mlx5_3"), hostNs) << "moved into the pod";
  const json doc = json::parse(slurp(infoPath()), nullptr, false);
  EXPECT_EQ(doc["pci"]["rdma-device"], "mlx5_3");
  ASSERT_EQ(records().size(), 1u);
  EXPECT_TRUE(records()[0].rdmaMoved);
  EXPECT_EQ(records()[0].rdmaDevice, "mlx5_3");
}

// The device plugin's copy (written there by Multus before ADD) is read, never overwritten, and
// left for Multus to remove: DEL does not touch it.
TEST_F(DeviceInfoTest, TheDevicePluginsFileIsNeverOverwrittenNorRemoved) {
  std::filesystem::create_directories(devinfoRoot() + "cni");
  std::ofstream(infoPath()) << kDpCopy;
  json c = vfConfig(infoPath());
  c.erase("deviceID");
  c["runtimeConfig"].erase("deviceID");  // the file alone names the device
  add(c);
  EXPECT_TRUE(nl_.findLink(pod_, "net1"));
  EXPECT_EQ(slurp(infoPath()), kDpCopy);
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(records()[0].deviceInfoFile, "");
  ASSERT_EQ(run("DEL", c).exitCode, 0);
  EXPECT_EQ(slurp(infoPath()), kDpCopy);
}

// ipoib mode: the child's traffic goes through its parent, whose PCI function and RDMA device the
// file names (rdmaDevice/port, or sysfs when the parent is named by `master`).
TEST_F(DeviceInfoTest, IpoibNamesTheParentsFunctionAndRdmaDevice) {
  addIpoibParent("ibp94s0", "0000:5e:00.0", "mlx5_1");
  json c = config();
  c.erase("device");
  c.erase("mtu");
  c["mode"] = "ipoib";
  c["master"] = "ibp94s0";
  c["runtimeConfig"] = {{"CNIDeviceInfoFile", infoPath()}};
  add(c);
  const json doc = json::parse(slurp(infoPath()), nullptr, false);
  ASSERT_TRUE(doc.is_object()) << slurp(infoPath());
  EXPECT_EQ(doc["type"], "pci");
  EXPECT_EQ(doc["version"], "1.1.0");
  EXPECT_EQ(doc["pci"], json({{"pci-address", "0000:5e:00.0"}, {"rdma-device", "mlx5_1"}})) << doc.dump();
  ASSERT_EQ(run("DEL", c).exitCode, 0);
  EXPECT_FALSE(std::filesystem::exists(infoPath()));
}

// Without the capability (no runtimeConfig.CNIDeviceInfoFile), nothing is written.
TEST_F(DeviceInfoTest, NoPathNoFile) {
  json c = vfConfig(infoPath());
  c["runtimeConfig"].erase("CNIDeviceInfoFile");
  add(c);
  EXPECT_FALSE(std::filesystem::exists(devinfoRoot()));
  EXPECT_EQ(records()[0].deviceInfoFile, "");
}

// Hostile paths: error 7 naming the field, and nothing changed (links, RDMA device, records,
// IPAM, files).
TEST_F(DeviceInfoTest, HostilePathsAreErrorSevenBeforeAnyChange) {
  std::filesystem::create_directories(devinfoRoot() + "cni");
  std::filesystem::create_directories(stateDir_ + "/elsewhere");
  const std::string victim = stateDir_ + "/elsewhere/victim";
  std::ofstream(victim) << "precious";
  const std::string link = devinfoRoot() + "cni/link";
  ASSERT_EQ(::symlink((stateDir_ + "/elsewhere/new").c_str(), link.c_str()), 0);  // dangling: ADD would create it
  const std::string fifo = devinfoRoot() + "cni/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string before = nodeState();
  const std::string files = tree();
  for (const std::string& path : {link, fifo, std::string("devinfo/cni/relative"),
                                  stateDir_ + "/elsewhere/outside", devinfoRoot() + "cni/../../elsewhere/x"}) {
    auto out = run("ADD", vfConfig(path));
    EXPECT_EQ(out.exitCode, 1) << path;
    const json err = errorOf(out);
    EXPECT_EQ(err["code"], 7) << path << ": " << out.stdoutText;
    EXPECT_NE(err.value("msg", "").find("CNIDeviceInfoFile"), std::string::npos) << out.stdoutText;
    EXPECT_EQ(nodeState(), before) << path;
    EXPECT_EQ(tree(), files) << path;
    EXPECT_EQ(sysfs_.driverWrites("mlx5_core", "bind"), "") << path;
  }
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_FALSE(std::filesystem::exists(stateDir_ + "/elsewhere/new"));
}

// ADD fails after the file was written (its final record cannot be saved): the rollback removes
// the file with everything else.
TEST_F(DeviceInfoTest, AddFailingAfterTheFileWasWrittenLeavesNoFile) {
  deps_.makeStore = [](const std::string& dir) -> std::unique_ptr<state::AttachmentStore> {
    return std::make_unique<FailingSaveStore>(dir);
  };
  const std::string before = nodeState();
  auto out = run("ADD", vfConfig(infoPath()));
  EXPECT_EQ(errorOf(out)["code"], 106) << out.stdoutText;
  EXPECT_TRUE(std::filesystem::is_directory(devinfoRoot() + "cni")) << "the file was written: its directory is there";
  EXPECT_FALSE(std::filesystem::exists(infoPath()));
  EXPECT_TRUE(std::filesystem::is_empty(devinfoRoot() + "cni")) << "no temporary file either";
  EXPECT_EQ(nodeState(), before);
}

// The device-info file is read by ADD and CHECK (withDeviceFromInfoFile), never by the parse: a
// parse does no I/O, so a file that is missing, or a FIFO, never fails or blocks DEL, GC or STATUS.
class DeviceFromInfoFileTest : public TempDirTest {
 protected:
  DeviceFromInfoFileTest() : TempDirTest("ibcni-devinfo") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp());
    file_ = dir_ + "/info.json";
    std::ofstream(file_) << kDpCopy;
  }
  // The invocation an ADD parses from `extra` keys over a sriov config naming the device-info file.
  plugin::Invocation parsed(const json& extra, cni::Command command = cni::Command::kAdd) {
    json c = {{"cniVersion", "1.1.0"}, {"name", "ibnet"}, {"type", "ibcni"},
              {"runtimeConfig", {{"CNIDeviceInfoFile", file_}}}};
    if (extra.is_object()) {
      c.update(extra);
    }
    auto conf = config::parseNetConf(c.dump(), command);
    EXPECT_TRUE(conf) << conf.error().msg;
    plugin::Invocation inv;
    if (conf) {
      inv.conf = std::move(*conf);
    }
    return inv;
  }
  // The invocation ADD and CHECK run with.
  static cni::Result<plugin::Invocation> runWith(const plugin::Invocation& inv) {
    return plugin::withDeviceFromInfoFile(inv, [](const plugin::Invocation& used) -> cni::Result<plugin::Invocation> {
      return used;
    });
  }
  std::string file_;
};

TEST_F(DeviceFromInfoFileTest, AddTakesTheDeviceTheFileNamesWhenNothingElseDoes) {
  const auto inv = parsed({});
  EXPECT_FALSE(inv.conf.deviceId) << "the parse read the file";
  auto done = runWith(inv);
  ASSERT_TRUE(done) << done.error().msg;
  ASSERT_TRUE(done->conf.deviceId);
  EXPECT_EQ(done->conf.deviceId->text, kVf);
}

TEST_F(DeviceFromInfoFileTest, AMissingOrSpecialFileFailsOnlyTheVerbThatReadsIt) {
  std::filesystem::remove(file_);
  ASSERT_EQ(::mkfifo(file_.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  for (auto command : {cni::Command::kAdd, cni::Command::kCheck, cni::Command::kDel}) {
    (void)parsed({}, command);  // the parse succeeds and never opens the FIFO
  }
  auto fifo = runWith(parsed({}));
  ASSERT_FALSE(fifo);
  EXPECT_EQ(fifo.error().code, cni::Errc::kInvalidConfig);
  EXPECT_NE(fifo.error().msg.find("runtimeConfig.CNIDeviceInfoFile"), std::string::npos) << fifo.error().msg;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "something opened the FIFO";
  std::filesystem::remove(file_);
  auto missing = runWith(parsed({}));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().msg.find("cannot read the device-info file"), std::string::npos) << missing.error().msg;
  // Not required when deviceID names the device: a missing file is one ADD may write.
  auto named = runWith(parsed({{"deviceID", kVf}}));
  ASSERT_TRUE(named) << named.error().msg;
  EXPECT_EQ(named->conf.deviceId->text, kVf);
}

TEST_F(DeviceFromInfoFileTest, TheFileDisagreeingWithDeviceIdOrBesideDeviceIsSeven) {
  auto other = runWith(parsed({{"deviceID", kPf}}));
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, cni::Errc::kInvalidConfig);
  EXPECT_NE(other.error().msg.find("the device plugin and the configuration disagree"), std::string::npos)
      << other.error().msg;
  auto beside = runWith(parsed({{"device", "ib0"}}));
  ASSERT_FALSE(beside);
  EXPECT_NE(beside.error().msg.find("both deviceID"), std::string::npos) << beside.error().msg;
  // ipoib mode makes its device: the file names nothing it uses.
  auto ipoib = runWith(parsed({{"mode", "ipoib"}, {"master", "ib0"}, {"pkey", "0x8001"}}));
  ASSERT_TRUE(ipoib) << ipoib.error().msg;
  EXPECT_FALSE(ipoib->conf.deviceId);
}

}  // namespace
}  // namespace ibcni::testing
