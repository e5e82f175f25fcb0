// SPDX-License-Identifier: Apache-2.0
// Exactly what Multus sends a delegate for a NetworkAttachmentDefinition with a
// `k8s.v1.cni.cncf.io/resourceName` annotation, fed to plugin::dispatch over the plugin fixture and
// a fake InfiniBand VF (as in sriov_vf_test.cpp). The shape follows
// ../shared/reference/ipam-multus-aks.md Part B ("B1".."B5" below are its tables; line numbers are
// that file's) and multus-cni's pkg/types/conf.go and pkg/multus/multus.go:
//
//   stdin       the NAD's spec.config (B1 line 140) with top-level `deviceID` and `pciBusID` injected
//               (B1 line 141, delegateAddDeviceID) and, added by libcni, `runtimeConfig` holding only
//               the capabilities the config declares (B1 line 142): `ips` and `mac` from the pod's
//               `k8s.v1.cni.cncf.io/networks` entry (B2 lines 158-159), `infinibandGUID` from its
//               `infiniband-guid` (B2 line 160), `deviceID` (the resource's device, B1 line 141) and
//               `CNIDeviceInfoFile` (set whenever there is a deviceID, B1 line 143; the device
//               plugin's file holds only type and pci-address, B4 line 196); CHECK and DEL also get
//               libcni's cached result as prevResult.
//   CNI_ARGS    `IgnoreUnknown=true;K8S_POD_NAMESPACE;K8S_POD_NAME;K8S_POD_INFRA_CONTAINER_ID;
//               K8S_POD_UID`, then the runtime's own CNI_ARGS passed through (B1 line 145;
//               createRuntimeConf puts its five keys first and appends every runtime key whose
//               value it already has, so containerd's `IgnoreUnknown=1;K8S_POD_...` follows in
//               full), then on ADD only the legacy `MAC=` and `IP=` (comma-joined) when the
//               annotation has mac/ips (B1 line 145; delegateAdd appends them to the ADD's args,
//               delegateCheck/delegateDel do not).
//   CNI_IFNAME  the annotation's `interface`, else net<N> (B1 line 146, B2 line 157): net1.
//
// An IPoIB address is 20 bytes and derived from the port GUID, so a `mac` cannot apply to an IB VF:
// ibcni refuses it with code 7 and leaves the node as it was (MacRequestOnAnIbVf...). The `mac` path is
// exercised with the same Multus shape on a whole Ethernet PCI function, the kind of device
// HostDeviceNetwork NADs name through a resourceName (B notes, lines 209-212).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "fakes/forwarding_devices.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

constexpr const char* kEthFn = "0000:5e:00.0";  // a whole Ethernet function (no VF)
constexpr const char* kPodGuid = "c2:11:22:33:44:55:66:77";  // the pod's infiniband-guid
constexpr const char* kPodIp = "10.56.217.10/24";            // the pod's ips
constexpr const char* kPodMac = "0a:58:0a:38:d9:0a";         // the pod's mac
// containerd's sandbox ID: CNI_CONTAINERID and K8S_POD_INFRA_CONTAINER_ID.
constexpr const char* kSandbox = "5f3e0b2f8a9c4d1e7b6a5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f";
constexpr const char* kPodUid = "8d2b8c3e-1f4a-4b6c-9e2d-7a1b3c5d7e9f";

/// An IPAM that honours the `ips` capability as host-local, static and whereabouts do: it hands out
/// exactly runtimeConfig.ips of the configuration it is given (the complete stdin, by the spec).
class IpsCapabilityIpam final : public ipam::Ipam {
 public:
  std::vector<std::string> rawConfigs;  ///< every request's configuration
  std::set<std::pair<std::string, std::string>> allocations;

  cni::Result<cni::AddResult> add(const ipam::Request& r) override {
    rawConfigs.emplace_back(r.rawConfig);
    auto conf = json::parse(r.rawConfig, nullptr, false);
    cni::AddResult result;
    if (conf.is_object() && conf.contains("runtimeConfig") && conf["runtimeConfig"].contains("ips")) {
      for (const auto& ip : conf["runtimeConfig"]["ips"]) {
        auto prefix = net::IpPrefix::parse(ip.get<std::string>());
        if (!prefix) {
          return cni::fail(cni::Errc::kInvalidConfig, "bad ip " + ip.dump());
        }
        result.ips.push_back({*prefix, std::nullopt, std::nullopt});
      }
    }
    if (result.ips.empty()) {
      return cni::fail(cni::Errc::kInvalidConfig, "test IPAM: no runtimeConfig.ips");
    }
    allocations.insert({r.args.containerId, r.args.ifName});
    return result;
  }
  cni::Result<void> del(const ipam::Request& r) override {
    rawConfigs.emplace_back(r.rawConfig);
    allocations.erase({r.args.containerId, r.args.ifName});
    return {};
  }
  cni::Result<void> check(const ipam::Request& r) override {
    rawConfigs.emplace_back(r.rawConfig);
    if (!allocations.contains({r.args.containerId, r.args.ifName})) {
      return cni::fail(cni::Errc::kInvalidConfig, "no allocation for " + r.args.containerId);
    }
    return {};
  }
  cni::Result<void> gc(const ipam::Request&) override { return {}; }
  cni::Result<void> status(const ipam::Request&) override { return {}; }
};

/// The fixture's sysfs, plus what mlx5 does on a VF rebind: the VF's IPoIB address (its last 8
/// bytes are the port GUID) takes the port GUID the PF now holds for the VF. The fake netlink keeps
/// the GUID in the PF's VF table only; without this, CHECK would see the old GUID on net1.
class Mlx5Devices final : public ForwardingDevices {
 public:
  Mlx5Devices(sysfs::Devices& inner, FakeNetlink& nl, const os::Netns& host, const os::Netns& pod, int pfIndex,
              int vfLinkIndex)
      : ForwardingDevices(inner), nl_(nl), namespaces_{&host, &pod}, pfIndex_(pfIndex), vfLinkIndex_(vfLinkIndex) {}

  os::SysResult<void> rebind(const net::PciAddress& pci) override {
    auto r = inner_.rebind(pci);
    if (!r || pci.text != kVf) {
      return r;
    }
    auto vf = nl_.vf(*namespaces_.front(), pfIndex_, kVfNumber);
    if (!vf || !vf->portGuid) {
      return r;
    }
    for (const os::Netns* ns : namespaces_) {
      auto links = nl_.links(*ns);
      if (std::any_of(links.begin(), links.end(), [&](const nl::Link& l) { return l.index == vfLinkIndex_; })) {
        (void)nl_.setHwAddress(*ns, vfLinkIndex_, *net::HwAddress::parse(ipoibAddress(vf->portGuid->toString())));
      }
    }
    return r;
  }

 private:
  FakeNetlink& nl_;
  std::vector<const os::Netns*> namespaces_;
  int pfIndex_;
  int vfLinkIndex_;
};

class MultusShapeTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    // The InfiniBand PF and its VF 2, as in SriovVfTest::SetUp.
    const IbVf made = addIbPfWithVf(kPf, kVfNumber, kVf, kOldGuid);
    pfIndex_ = made.pfIndex;
    vfLinkIndex_ = made.vfLink;
    sysfs_.setPkeys("mlx5_3", 1, {"0xffff"});
    // A whole Ethernet function, for the mac path.
    ethIndex_ = nl_.addLink(host_, fakeLink("enp94s0"));
    sysfs_.addPciNetdev(kEthFn, "enp94s0", ethIndex_);
    ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
    mlx5_ = std::make_unique<Mlx5Devices>(devices_, nl_, host_, pod_, pfIndex_, vfLinkIndex_);
    multusDeps_ =
        std::make_unique<plugin::Deps>(plugin::Deps{nl_, netns_, *mlx5_, rdma_, capIpam_, deps_.makeStore,
                                                    deps_.lockTimeout, deps_.now, deps_.bootId, deps_.settleTimeout});
    multusDeps_->deviceInfo = deps_.deviceInfo;
    nl_.clearCalls();
  }

  /// The NAD's spec.config (B1 line 140; deploy/examples/sriov-guid-per-pod.yaml), declaring
  /// `capabilities`.
  json nadConfig(const json& capabilities) const {
    return json{
        {"cniVersion", "1.0.0"},
        {"name", "ib-sriov"},
        {"type", "ibcni"},
        {"mode", "sriov"},
        {"stateDir", stateDir_},
        {"capabilities", capabilities},
        {"ipam", {{"type", "host-local"}, {"ranges", json::array({json::array({{{"subnet", "10.56.217.0/24"}}})})}}}};
  }

  /// The CNIDeviceInfoFile Multus names (B1 line 143: devinfo/cni/<ns>-<nad>-<containerID>_<ifname>,
  /// here below the test's directory instead of /var/run/k8s.cni.cncf.io) after copying the device
  /// plugin's file into it (B4 line 196: type and pci-address only).
  /// Without `dpPublishes_` the device plugin published no file for the device, so Multus' copy
  /// (best effort, B1 line 143) made none and the path names nothing.
  std::string deviceInfoFile(const std::string& pci) {
    const std::string dir = devinfoRoot() + "cni";
    const std::string file = dir + "/default-ib-sriov-" + kSandbox + "_net1";
    if (dpPublishes_) {
      std::filesystem::create_directories(dir);
      std::ofstream(file) << R"({"type":"pci","version":"1.1.0","pci":{"pci-address":")" << pci << R"("}})";
    }
    return file;
  }

  /// What ibcni reads on stdin: the NAD's config with deviceID/pciBusID injected (B1 line 141) and
  /// libcni's runtimeConfig: the pod's requests (B2 lines 158-160) and the resource's deviceID with
  /// its CNIDeviceInfoFile (B1 lines 141, 143), kept only where `capabilities` says true (B1 line 142).
  json delegateStdin(const json& capabilities, const std::string& pci, const json& podRequest) {
    json c = nadConfig(capabilities);
    c["deviceID"] = pci;
    c["pciBusID"] = pci;
    json offered = {{"deviceID", pci}, {"CNIDeviceInfoFile", deviceInfoFile(pci)}};
    if (podRequest.contains("ips")) {
      offered["ips"] = podRequest["ips"];
    }
    if (podRequest.contains("mac")) {
      offered["mac"] = podRequest["mac"];
    }
    if (podRequest.contains("infiniband-guid")) {
      offered["infinibandGUID"] = podRequest["infiniband-guid"];
    }
    json rc = json::object();
    for (auto& [k, v] : offered.items()) {
      if (capabilities.value(k, false)) {
        rc[k] = v;
      }
    }
    if (!rc.empty()) {
      c["runtimeConfig"] = rc;
    }
    return c;
  }

  /// CNI_ARGS as Multus builds it (B1 line 145): its own five keys, containerd's CNI_ARGS passed
  /// through, then on ADD the legacy MAC= and IP=.
  static std::string cniArgs(const json& podRequest, bool add) {
    const std::string k8s = std::string("K8S_POD_NAMESPACE=default;K8S_POD_NAME=ib-pod;K8S_POD_INFRA_CONTAINER_ID=") +
                            kSandbox + ";K8S_POD_UID=" + kPodUid;
    std::string s = "IgnoreUnknown=true;" + k8s + ";IgnoreUnknown=1;" + k8s;
    if (add && podRequest.contains("mac")) {
      s += ";MAC=" + podRequest["mac"].get<std::string>();
    }
    if (add && podRequest.contains("ips")) {
      std::string ips;
      for (const auto& ip : podRequest["ips"]) {
        ips += (ips.empty() ? "" : ",") + ip.get<std::string>();
      }
      s += ";IP=" + ips;
    }
    return s;
  }

  /// Runs one verb as Multus (through libcni) does: CNI_CONTAINERID = the sandbox, CNI_IFNAME net1.
  plugin::Outcome multus(const std::string& verb, const json& stdinConf, const std::string& args) {
    std::map<std::string, std::string> vars = {{"CNI_COMMAND", verb},        {"CNI_CONTAINERID", kSandbox},
                                               {"CNI_NETNS", kPodPath},      {"CNI_IFNAME", "net1"},
                                               {"CNI_PATH", "/opt/cni/bin"}, {"CNI_ARGS", args}};
    auto getenv = [&vars](const char* name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end() || it->second.empty()) {
        return std::nullopt;
      }
      return it->second;
    };
    lastStdin_ = stdinConf.dump();
    return plugin::dispatch(getenv, lastStdin_, true, *multusDeps_);
  }

  /// The file at `path` as JSON (a discarded value when it is missing or not JSON).
  static json readJson(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in, nullptr, false);
  }

  nl::VfInfo vfState() { return nl_.vf(host_, pfIndex_, kVfNumber).value_or(nl::VfInfo{}); }
  std::vector<std::string> podAddrs() {
    std::vector<std::string> out;
    auto net1 = nl_.findLink(pod_, "net1");
    for (const auto& a : nl_.addresses(pod_)) {
      if (net1 && a.ifIndex == net1->index) {
        out.push_back(a.prefix.toString());
      }
    }
    return out;
  }
  /// What a refused ADD must leave as it was: links, addresses and the VF's GUIDs.
  std::string nodeState() {
    auto v = vfState();
    return snapshot(host_) + snapshot(pod_) + "vf node=" + (v.nodeGuid ? v.nodeGuid->toString() : "-") +
           " port=" + (v.portGuid ? v.portGuid->toString() : "-");
  }

  IpsCapabilityIpam capIpam_;
  std::unique_ptr<Mlx5Devices> mlx5_;
  std::unique_ptr<plugin::Deps> multusDeps_;
  std::string lastStdin_;
  bool dpPublishes_ = true;
  int pfIndex_ = 0;
  int vfLinkIndex_ = 0;
  int ethIndex_ = 0;
};

// The IB case: pod annotation {"name": "ib-sriov", "interface": "net1", "ips": [...],
// "infiniband-guid": ...}; the NAD declares deviceID, CNIDeviceInfoFile, ips, mac and infinibandGUID.
TEST_F(MultusShapeTest, IbVfFromResourceNameGetsTheGuidAndTheIpsAndIsRestored) {
  const json caps = {
      {"deviceID", true}, {"CNIDeviceInfoFile", true}, {"ips", true}, {"mac", true}, {"infinibandGUID", true}};
  const json pod = {{"name", "ib-sriov"}, {"interface", "net1"}, {"ips", {kPodIp}}, {"infiniband-guid", kPodGuid}};
  const json conf = delegateStdin(caps, kVf, pod);
  ASSERT_EQ(conf["runtimeConfig"].size(), 4u) << conf.dump();  // deviceID, CNIDeviceInfoFile, ips, infinibandGUID

  auto out = multus("ADD", conf, cniArgs(pod, true));
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  const json result = json::parse(out.stdoutText);

  // The VF got the pod's GUID (node and port, through the PF), and mlx5 shows it in the address.
  EXPECT_EQ(vfState().nodeGuid, guid(kPodGuid));
  EXPECT_EQ(vfState().portGuid, guid(kPodGuid));
  auto net1 = nl_.findLink(pod_, "net1");
  ASSERT_TRUE(net1);
  EXPECT_EQ(net1->mac.text, ipoibAddress(kPodGuid));
  EXPECT_TRUE(net1->adminUp);
  EXPECT_FALSE(nl_.findLink(host_, "ibp59s0v2"));
  // The IPAM got the whole stdin, runtimeConfig.ips included, and net1 has exactly that address.
  ASSERT_FALSE(capIpam_.rawConfigs.empty());
  EXPECT_EQ(capIpam_.rawConfigs[0], lastStdin_);
  EXPECT_EQ(podAddrs(), std::vector<std::string>{kPodIp});
  // The result: net1 in the pod with its IPoIB address, the pod's IP pointing at it.
  EXPECT_EQ(result["cniVersion"], "1.0.0");
  ASSERT_EQ(result["interfaces"].size(), 1u) << result.dump();
  EXPECT_EQ(result["interfaces"][0]["name"], "net1");
  EXPECT_EQ(result["interfaces"][0]["sandbox"], kPodPath);
  EXPECT_EQ(result["interfaces"][0]["mac"], ipoibAddress(kPodGuid));
  ASSERT_EQ(result["ips"].size(), 1u) << result.dump();
  EXPECT_EQ(result["ips"][0]["address"], kPodIp);
  EXPECT_EQ(result["ips"][0]["interface"], 0);
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(records()[0].guid, kPodGuid);
  EXPECT_EQ(records()[0].containerId, kSandbox);

  // CHECK and DEL: same stdin plus libcni's cached result; CNI_ARGS without MAC=/IP=.
  json withPrev = conf;
  withPrev["prevResult"] = result;
  auto check = multus("CHECK", withPrev, cniArgs(pod, false));
  EXPECT_EQ(check.exitCode, 0) << check.stdoutText;

  auto del = multus("DEL", withPrev, cniArgs(pod, false));
  ASSERT_EQ(del.exitCode, 0) << del.stdoutText;
  EXPECT_EQ(vfState().nodeGuid, guid(kOldGuid));
  EXPECT_EQ(vfState().portGuid, guid(kOldGuid));
  auto back = nl_.findLink(host_, "ibp59s0v2");
  ASSERT_TRUE(back) << "the VF is back in the host under its own name";
  EXPECT_EQ(back->mtu, 2044u);
  EXPECT_EQ(back->mac.text, ipoibAddress(kOldGuid));
  EXPECT_FALSE(nl_.findLink(pod_, "net1"));
  EXPECT_TRUE(capIpam_.allocations.empty());
  EXPECT_TRUE(records().empty());
  // A repeated DEL without prevResult, as after a lost cache (B1 line 147), succeeds too.
  EXPECT_EQ(multus("DEL", conf, cniArgs(pod, false)).exitCode, 0);
}

// The device-info file (device-info spec 1.1.0, section 5.1.2): the NAD declares CNIDeviceInfoFile,
// the device plugin published nothing, so Multus' path names no file and ibcni writes it for the
// network-status annotation: the VF, its PF and its RDMA device. DEL removes it. When the device
// plugin's copy is there, it is read and left exactly as it is.
TEST_F(MultusShapeTest, DeviceInfoFileIsWrittenForNetworkStatusWhenTheDevicePluginGaveNone) {
  const json caps = {{"deviceID", true}, {"CNIDeviceInfoFile", true}, {"ips", true}};
  const json pod = {{"name", "ib-sriov"}, {"interface", "net1"}, {"ips", {kPodIp}}};
  dpPublishes_ = false;
  const json conf = delegateStdin(caps, kVf, pod);
  const std::string file = conf["runtimeConfig"]["CNIDeviceInfoFile"];
  ASSERT_FALSE(std::filesystem::exists(file));
  auto out = multus("ADD", conf, cniArgs(pod, true));
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_EQ(readJson(file), json::parse(R"({"type": "pci", "version": "1.1.0",
      "pci": {"pci-address": "0000:3b:00.3", "pf-pci-address": "0000:3b:00.0", "rdma-device": "mlx5_3"}})"));
  json withPrev = conf;
  withPrev["prevResult"] = json::parse(out.stdoutText);
  EXPECT_EQ(multus("CHECK", withPrev, cniArgs(pod, false)).exitCode, 0);
  ASSERT_EQ(multus("DEL", withPrev, cniArgs(pod, false)).exitCode, 0);
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_TRUE(records().empty());

  // The device plugin's copy: read, not overwritten, not removed by DEL.
  dpPublishes_ = true;
  const json withDp = delegateStdin(caps, kVf, pod);
  const std::string dpText = R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:00.3"}})";
  out = multus("ADD", withDp, cniArgs(pod, true));
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  auto slurp = [&] {
    std::ifstream f(file);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_EQ(slurp(), dpText);
  ASSERT_EQ(multus("DEL", withDp, cniArgs(pod, false)).exitCode, 0);
  EXPECT_EQ(slurp(), dpText);
}

// An ipoib NAD that names the RDMA shared device plugin's resource (so that every pod on it gets
// /dev/infiniband through the network resources injector): Multus injects that plugin's device ID, "0",
// which is no PCI address, and with the capability a device-info path (it derives the path from the
// device ID). ipoib mode selects nothing by the ID; ADD writes the parent's HCA into the file. Before,
// ADD failed with 7 ("deviceID must be a PCI address"). sriov mode still requires a PCI address.
TEST_F(MultusShapeTest, IpoibOnASharedRdmaResourceIgnoresItsDeviceIdAndWritesTheParentsDeviceInfo) {
  addIpoibParent("ibp94s1", "0000:5e:00.0", "mlx5_1");
  const std::string host = snapshot(host_);
  dpPublishes_ = false;  // the shared device plugin publishes no device-info
  const json caps = {{"deviceID", true}, {"CNIDeviceInfoFile", true}, {"ips", true}};
  const json pod = {{"name", "ib-ipoib"}, {"ips", {kPodIp}}};
  json conf = delegateStdin(caps, "0", pod);
  conf["mode"] = "ipoib";
  conf["master"] = "ibp94s1";
  ASSERT_EQ(conf["deviceID"], "0");
  ASSERT_EQ(conf["runtimeConfig"]["deviceID"], "0");
  const std::string file = conf["runtimeConfig"]["CNIDeviceInfoFile"];
  auto out = multus("ADD", conf, cniArgs(pod, true));
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_EQ(readJson(file), json::parse(R"({"type": "pci", "version": "1.1.0",
      "pci": {"pci-address": "0000:5e:00.0", "rdma-device": "mlx5_1"}})"));
  EXPECT_TRUE(nl_.findLink(pod_, "net1").has_value());
  json withPrev = conf;
  withPrev["prevResult"] = json::parse(out.stdoutText);
  EXPECT_EQ(multus("CHECK", withPrev, cniArgs(pod, false)).exitCode, 0);
  ASSERT_EQ(multus("DEL", withPrev, cniArgs(pod, false)).exitCode, 0);
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_EQ(snapshot(host_), host);

  // The same IDs in sriov mode select the VF: "0" is refused there, naming the field.
  json sriov = delegateStdin(caps, "0", pod);
  out = multus("ADD", sriov, cniArgs(pod, true));
  EXPECT_EQ(errorOf(out)["code"], 7) << out.stdoutText;
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("deviceID = \"0\""), std::string::npos) << out.stdoutText;
}

// The NAD of README's example (capabilities deviceID, infinibandGUID, ips; no CNIDeviceInfoFile):
// the same pod works, the GUID coming only from runtimeConfig.
TEST_F(MultusShapeTest, ReadmeNadCapabilitiesWork) {
  const json caps = {{"deviceID", true}, {"infinibandGUID", true}, {"ips", true}};
  const json pod = {{"name", "ib-sriov"}, {"ips", {kPodIp}}, {"infiniband-guid", kPodGuid}};
  const json conf = delegateStdin(caps, kVf, pod);
  EXPECT_FALSE(conf["runtimeConfig"].contains("CNIDeviceInfoFile"));
  auto out = multus("ADD", conf, cniArgs(pod, true));
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_EQ(vfState().portGuid, guid(kPodGuid));
  EXPECT_EQ(podAddrs(), std::vector<std::string>{kPodIp});
  json withPrev = conf;
  withPrev["prevResult"] = json::parse(out.stdoutText);
  EXPECT_EQ(multus("CHECK", withPrev, cniArgs(pod, false)).exitCode, 0);
  ASSERT_EQ(multus("DEL", withPrev, cniArgs(pod, false)).exitCode, 0);
  EXPECT_EQ(vfState().portGuid, guid(kOldGuid));
  EXPECT_TRUE(nl_.findLink(host_, "ibp59s0v2"));
}

// A pod that also asks for a `mac` on the IB network: Multus sends it in runtimeConfig (declared)
// and as CNI_ARGS MAC= (always, B1 line 145). An IPoIB address cannot be set: code 7, and the node
// ends as it was (GUID, links, IPAM, records). Without the capability, the legacy MAC= alone is refused the
// same way (the spec wants a request nobody can honour to fail, B2 lines 167-169).
TEST_F(MultusShapeTest, MacRequestOnAnIbVfIsRefusedAndNothingIsLeftChanged) {
  const json pod = {{"name", "ib-sriov"}, {"ips", {kPodIp}}, {"mac", kPodMac}, {"infiniband-guid", kPodGuid}};
  for (const json& caps : {json{{"deviceID", true}, {"ips", true}, {"mac", true}, {"infinibandGUID", true}},
                           json{{"deviceID", true}, {"ips", true}, {"infinibandGUID", true}}}) {
    const std::string before = nodeState();
    const json conf = delegateStdin(caps, kVf, pod);
    auto out = multus("ADD", conf, cniArgs(pod, true));
    EXPECT_EQ(out.exitCode, 1) << caps.dump();
    const json err = errorOf(out);
    EXPECT_EQ(err["code"], 7) << out.stdoutText;
    const std::string msg = err.value("msg", "");
    EXPECT_NE(msg.find(kPodMac), std::string::npos) << msg;
    EXPECT_NE(msg.find("infinibandGUID"), std::string::npos) << "the message points at the fix: " << msg;
    EXPECT_EQ(sysfs_.driverWrites("mlx5_core", "bind"), "") << "refused before the GUID was set: no rebind";
    EXPECT_EQ(nodeState(), before) << caps.dump();
    EXPECT_TRUE(capIpam_.allocations.empty());
    EXPECT_TRUE(records().empty());
    EXPECT_EQ(multus("DEL", conf, cniArgs(pod, false)).exitCode, 0) << "the runtime's DEL after a failed ADD";
    EXPECT_EQ(nodeState(), before);
  }
}

// The mac path with the same Multus shape: a whole Ethernet function named by the resource
// (HostDeviceNetwork-style NAD): runtimeConfig mac and ips applied, in the result, restored on DEL.
// An infiniband-guid for it is code 7 (no VF), nothing changed.
TEST_F(MultusShapeTest, EthernetFunctionFromResourceNameGetsTheMacAndTheIps) {
  const json caps = {
      {"deviceID", true}, {"CNIDeviceInfoFile", true}, {"ips", true}, {"mac", true}, {"infinibandGUID", true}};
  const json pod = {{"name", "ib-sriov"}, {"interface", "net1"}, {"ips", {kPodIp}}, {"mac", kPodMac}};
  const std::string hostMac = nl_.findLink(host_, "enp94s0")->mac.text;
  const json conf = delegateStdin(caps, kEthFn, pod);
  auto out = multus("ADD", conf, cniArgs(pod, true));
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  const json result = json::parse(out.stdoutText);
  auto net1 = nl_.findLink(pod_, "net1");
  ASSERT_TRUE(net1);
  EXPECT_EQ(net1->mac.text, kPodMac);
  EXPECT_EQ(podAddrs(), std::vector<std::string>{kPodIp});
  ASSERT_EQ(result["interfaces"].size(), 1u);
  EXPECT_EQ(result["interfaces"][0]["mac"], kPodMac);
  EXPECT_EQ(result["interfaces"][0]["sandbox"], kPodPath);
  EXPECT_EQ(result["ips"][0]["address"], kPodIp);
  EXPECT_EQ(result["ips"][0]["interface"], 0);

  json withPrev = conf;
  withPrev["prevResult"] = result;
  auto check = multus("CHECK", withPrev, cniArgs(pod, false));
  EXPECT_EQ(check.exitCode, 0) << check.stdoutText;
  auto del = multus("DEL", withPrev, cniArgs(pod, false));
  ASSERT_EQ(del.exitCode, 0) << del.stdoutText;
  auto back = nl_.findLink(host_, "enp94s0");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->mac.text, hostMac);
  EXPECT_TRUE(capIpam_.allocations.empty());
  EXPECT_TRUE(records().empty());

  const json withGuid = {{"name", "ib-sriov"}, {"ips", {kPodIp}}, {"infiniband-guid", kPodGuid}};
  const std::string before = nodeState();
  auto refused = multus("ADD", delegateStdin(caps, kEthFn, withGuid), cniArgs(withGuid, true));
  EXPECT_EQ(errorOf(refused)["code"], 7) << refused.stdoutText;
  EXPECT_EQ(nodeState(), before);
  EXPECT_TRUE(capIpam_.allocations.empty());
}

}  // namespace
}  // namespace ibcni::testing
