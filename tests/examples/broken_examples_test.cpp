// SPDX-License-Identifier: Apache-2.0
// The checks of deploy_examples_test can fail: deliberately broken copies of the real examples go
// through the same reader and checks and must come out with the problem named.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "manifests.h"

namespace ibcni::testing::examples {
namespace {

namespace fs = std::filesystem;

std::string example(const std::string& file) {
  std::ifstream in(fs::path(IBCNI_SOURCE_DIR) / "deploy/examples" / file);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << "deploy/examples/" << file << " is missing";
  return ss.str();
}

// `text` with the first `from` outside comment lines replaced by `to`; the test fails when `from`
// is not there, so that a changed example cannot turn a negative test into one that checks nothing.
std::string broken(const std::string& text, const std::string& from, const std::string& to) {
  auto inComment = [&](std::size_t p) {
    std::size_t start = 0;
    if (p > 0) {
      auto nl = text.rfind('\n', p - 1);
      start = nl == std::string::npos ? 0 : nl + 1;
    }
    auto first = text.find_first_not_of(' ', start);
    return first != std::string::npos && first <= p && text[first] == '#';
  };
  auto pos = text.find(from);
  while (pos != std::string::npos && inComment(pos + (from.starts_with('\n') ? 1 : 0))) {
    pos = text.find(from, pos + 1);
  }
  EXPECT_NE(pos, std::string::npos) << "the example no longer holds: " << from;
  if (pos == std::string::npos) {
    return text;
  }
  return text.substr(0, pos) + to + text.substr(pos + from.size());
}

Catalog catalogOf(const std::vector<std::pair<std::string, std::string>>& files) {
  Catalog c;
  for (const auto& [name, text] : files) {
    addManifest(c, kExamplesGroup, "deploy/examples/" + name, text);
  }
  return c;
}

fs::path scratch() { return fs::path(::testing::TempDir()) / ("broken_examples_test." + std::to_string(getpid())); }

std::string all(const std::vector<std::string>& problems) {
  std::string out;
  for (const auto& p : problems) {
    out += p + "\n";
  }
  return out;
}

// Every problem list must hold one that mentions `needle`.
#define EXPECT_PROBLEM(problems, needle)                                                                              \
  do {                                                                                                                \
    const std::string all_ = all(problems);                                                                           \
    EXPECT_NE(all_.find(needle), std::string::npos) << "no problem mentions " << (needle) << "; problems:\n" << all_; \
  } while (0)

class BrokenExamples : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(scratch(), ec);
  }
  std::string nad_ = example("sriov-rdma-isolation.yaml");
  std::string pod_ = example("pod-sriov-rdma.yaml");
  std::string guidNad_ = example("sriov-guid-per-pod.yaml");
  std::string guidPod_ = example("pod-sriov-guid.yaml");
};

TEST_F(BrokenExamples, TheUnbrokenCopiesPass) {
  Catalog c = catalogOf({{"a.yaml", nad_}, {"b.yaml", pod_}, {"c.yaml", guidNad_}, {"d.yaml", guidPod_}});
  EXPECT_TRUE(c.problems.empty()) << all(c.problems);
  EXPECT_TRUE(checkNetworks(c, scratch()).empty());
  EXPECT_TRUE(checkPods(c).empty());
}

TEST_F(BrokenExamples, InvalidPkeyIsRefusedByTheParser) {
  Catalog c = catalogOf({{"nad.yaml", broken(nad_, R"("pkey": "0x7fff")", R"("pkey": "0x0000")")}});
  ASSERT_TRUE(c.problems.empty()) << all(c.problems);
  auto problems = checkNetworks(c, scratch());
  EXPECT_PROBLEM(problems, "ibcni refuses the config for ADD");
  EXPECT_PROBLEM(problems, "invalid pkey = \"0x0000\"");
}

TEST_F(BrokenExamples, ModeTypoIsRefusedByTheParser) {
  Catalog c = catalogOf({{"nad.yaml", broken(nad_, R"("mode": "sriov")", R"("mode": "sriovx")")}});
  EXPECT_PROBLEM(checkNetworks(c, scratch()), "invalid mode = \"sriovx\"");
}

TEST_F(BrokenExamples, KeyTypoIsReported) {
  Catalog c = catalogOf({{"nad.yaml", broken(nad_, R"("linkState")", R"("linkstate")")}});
  EXPECT_PROBLEM(checkNetworks(c, scratch()), "ibcni does not know the keys linkstate");
}

TEST_F(BrokenExamples, RdmaIsolationNotABoolIsRefused) {
  Catalog c = catalogOf({{"nad.yaml", broken(nad_, R"("rdmaIsolation": true)", R"("rdmaIsolation": "yes")")}});
  EXPECT_PROBLEM(checkNetworks(c, scratch()), "invalid rdmaIsolation");
}

TEST_F(BrokenExamples, ConfigThatIsNoJson) {
  Catalog c = catalogOf({{"nad.yaml", broken(nad_, R"("mtu": 4092,)", R"("mtu": 4092,,)")}});
  EXPECT_PROBLEM(checkNetworks(c, scratch()), "spec.config is not a JSON object");
}

TEST_F(BrokenExamples, SriovNadWithoutResourceHasNoDevice) {
  Catalog c =
      catalogOf({{"nad.yaml", broken(nad_, "    k8s.v1.cni.cncf.io/resourceName: nvidia.com/mlnx_ib_vf\n", "")}});
  EXPECT_PROBLEM(checkNetworks(c, scratch()), "no device selected");
}

TEST_F(BrokenExamples, BadBlockScalarIndentationIsNotSkipped) {
  Catalog c = catalogOf({{"nad.yaml", broken(nad_, "\n      \"mtu\": 4092,", "\n   \"mtu\": 4092,")}});
  EXPECT_PROBLEM(c.problems, "did not find expected key");  // libyaml: the block scalar ended early
  EXPECT_PROBLEM(c.problems, "deploy/examples/nad.yaml: line ");
  EXPECT_NE(static_cast<int>(c.nads.size()), c.nadKindLines) << "the NAD count must show the NAD that was lost";
}

TEST_F(BrokenExamples, ConfigMustBeAString) {
  const std::string flow = R"(  config: {"cniVersion": "1.0.0", "name": "x", "type": "ibcni"})";
  std::string text = nad_.substr(0, nad_.find("  config: |")) + flow + "\n";
  Catalog c = catalogOf({{"nad.yaml", text}});
  EXPECT_PROBLEM(c.problems, "spec.config must be a string");
  EXPECT_EQ(c.nads.size(), 0u);
  EXPECT_EQ(c.nadKindLines, 1);
}

TEST_F(BrokenExamples, QuotedOneLineConfigIsReadToo) {
  Catalog c = catalogOf({{"nad.yaml", R"(# SPDX-License-Identifier: Apache-2.0
apiVersion: k8s.cni.cncf.io/v1
kind: "NetworkAttachmentDefinition"
metadata:
  name: quoted
spec:
  config: '{"cniVersion": "1.0.0", "name": "quoted", "type": "ibcni", "mode": "ipoib", "master": "ib0", "ipam": {}}'
)"}});
  ASSERT_TRUE(c.problems.empty()) << all(c.problems);
  ASSERT_EQ(c.nads.size(), 1u);
  EXPECT_EQ(c.nadKindLines, 1);
  std::vector<Invocation> out;
  EXPECT_TRUE(checkNetworks(c, scratch(), nullptr, &out).empty());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].conf.master, "ib0");
  // The same with a broken quote is refused, not skipped.
  Catalog bad = catalogOf({{"nad.yaml", "kind: NetworkAttachmentDefinition\nspec:\n  config: '{\"a\": 1}\n"}});
  EXPECT_PROBLEM(bad.problems, "while scanning a quoted scalar: found unexpected end of stream");
  EXPECT_NE(static_cast<int>(bad.nads.size()), bad.nadKindLines);
}

TEST_F(BrokenExamples, PodNamingAMissingNetwork) {
  Catalog c = catalogOf(
      {{"nad.yaml", nad_}, {"pod.yaml", broken(pod_, R"("name": "ib-sriov-rdma")", R"("name": "ib-sriov-rdmx")")}});
  EXPECT_PROBLEM(checkPods(c), "names network default/ib-sriov-rdmx, which no NetworkAttachmentDefinition");
}

TEST_F(BrokenExamples, PodInAnotherNamespaceThanItsNetwork) {
  Catalog c =
      catalogOf({{"nad.yaml", nad_}, {"pod.yaml", broken(pod_, "  namespace: default\n", "  namespace: team-a\n")}});
  EXPECT_PROBLEM(checkPods(c), "names network team-a/ib-sriov-rdma");
}

TEST_F(BrokenExamples, PodWithoutTheVfResourceOrIpcLock) {
  Catalog noLimit = catalogOf(
      {{"nad.yaml", nad_}, {"pod.yaml", broken(pod_, "        limits:\n          nvidia.com/mlnx_ib_vf: 1\n", "")}});
  EXPECT_PROBLEM(checkPods(noLimit), "missing from resources.limits");
  Catalog noRequest = catalogOf(
      {{"nad.yaml", nad_},
       {"pod.yaml", broken(pod_, "          nvidia.com/mlnx_ib_vf: 1\n", "          nvidia.com/other: 1\n")}});
  EXPECT_PROBLEM(checkPods(noRequest), "need 1 nvidia.com/mlnx_ib_vf in resources.requests and resources.limits");
  Catalog noLock =
      catalogOf({{"nad.yaml", nad_}, {"pod.yaml", broken(pod_, R"(add: ["IPC_LOCK"])", R"(add: ["NET_RAW"])")}});
  EXPECT_PROBLEM(checkPods(noLock), "must add IPC_LOCK");
}

TEST_F(BrokenExamples, BadInterfaceName) {
  Catalog c =
      catalogOf({{"nad.yaml", nad_}, {"pod.yaml", broken(pod_, R"("interface": "net1")", R"("interface": "net/1")")}});
  EXPECT_PROBLEM(checkPods(c), "interface \"net/1\" is not a valid interface name");
}

TEST_F(BrokenExamples, NetworksAnnotationThatIsNoList) {
  Catalog c = catalogOf({{"nad.yaml", nad_},
                         {"pod.yaml", broken(pod_, R"('[{"name": "ib-sriov-rdma", "interface": "net1"}]')",
                                             R"('{"name": "ib-sriov-rdma"}')")}});
  EXPECT_PROBLEM(c.problems, "must be a list of objects");
  Catalog typo =
      catalogOf({{"nad.yaml", nad_}, {"pod.yaml", broken(pod_, R"("interface": "net1")", R"("interfce": "net1")")}});
  EXPECT_PROBLEM(typo.problems, "has key \"interfce\", which Multus does not know");
}

TEST_F(BrokenExamples, CommaFormIsReadToo) {
  Catalog c = catalogOf({{"nad.yaml", nad_},
                         {"pod.yaml", broken(pod_, R"('[{"name": "ib-sriov-rdma", "interface": "net1"}]')",
                                             "default/ib-sriov-rdma@net1")}});
  ASSERT_TRUE(c.problems.empty()) << all(c.problems);
  ASSERT_EQ(c.pods.size(), 1u);
  ASSERT_EQ(c.pods[0].networks.size(), 1u);
  EXPECT_EQ(c.pods[0].networks[0].interface, "net1");
  EXPECT_TRUE(checkPods(c).empty());
  Catalog missing = catalogOf({{"nad.yaml", nad_},
                               {"pod.yaml", broken(pod_, R"('[{"name": "ib-sriov-rdma", "interface": "net1"}]')",
                                                   "ib-sriov-rdma, other-net")}});
  EXPECT_PROBLEM(checkPods(missing), "default/other-net");
}

TEST_F(BrokenExamples, GuidRules) {
  const std::string good = "02:00:00:00:00:00:01:01";
  Catalog allOnes =
      catalogOf({{"nad.yaml", guidNad_}, {"pod.yaml", broken(guidPod_, good, "ff:ff:ff:ff:ff:ff:ff:ff")}});
  EXPECT_PROBLEM(checkPods(allOnes), "all-zero and all-ones GUIDs");
  EXPECT_PROBLEM(checkNetworks(allOnes, scratch()), "runtimeConfig.infinibandGUID");
  Catalog shortGuid = catalogOf({{"nad.yaml", guidNad_}, {"pod.yaml", broken(guidPod_, good, "02:00:00:01")}});
  EXPECT_PROBLEM(checkPods(shortGuid), "8 colon-separated hex octets");
  Catalog twice = catalogOf({{"nad.yaml", guidNad_},
                             {"pod.yaml", guidPod_},
                             {"pod2.yaml", broken(guidPod_, "name: sriov-guid-pod", "name: sriov-guid-pod-2")}});
  EXPECT_PROBLEM(checkPods(twice), "must be unique on the fabric");
}

TEST_F(BrokenExamples, PodRequestWithoutTheCapabilityWouldBeDropped) {
  Catalog c = catalogOf({{"nad.yaml", broken(guidNad_, R"("infinibandGUID": true)", R"("infinibandGUID": false)")},
                         {"pod.yaml", guidPod_}});
  EXPECT_PROBLEM(checkNetworks(c, scratch()), "does not declare capability infinibandGUID");
  Catalog unknownCap = catalogOf({{"nad.yaml", broken(guidNad_, R"("ips": true)", R"("portMappings": true)")}});
  EXPECT_PROBLEM(checkNetworks(unknownCap, scratch()), "capability portMappings is not one ibcni uses");
}

TEST_F(BrokenExamples, RequestedAddressOutsideTheRange) {
  Catalog c =
      catalogOf({{"nad.yaml", guidNad_}, {"pod.yaml", broken(guidPod_, "192.168.30.11/24", "192.168.31.11/24")}});
  EXPECT_PROBLEM(checkNetworks(c, scratch()), "outside every range");
}

TEST_F(BrokenExamples, IbcniIpamRefusesItsPart) {
  Catalog c = catalogOf({{"nad.yaml", broken(nad_, "192.168.20.0/24", "192.168.20.1/24")}});
  EXPECT_PROBLEM(checkNetworks(c, scratch()), "ibcni-ipam's parser refuses the ipam object");
}

TEST_F(BrokenExamples, DelegatedIpamShapes) {
  std::string wa = example("ipoib-whereabouts.yaml");
  Catalog gw = catalogOf({{"nad.yaml", broken(wa, R"("range": "192.168.64.0/18",)",
                                              R"("range": "192.168.64.0/18", "gateway": "192.168.64.1",)")}});
  EXPECT_PROBLEM(checkNetworks(gw, scratch()), "whereabouts#601");
  std::string nv = example("sriov-nv-ipam.yaml");
  Catalog pool = catalogOf({{"nad.yaml", broken(nv, R"("poolName": "ib-pool")", R"("poolName": "ib-pool-2")")}});
  EXPECT_PROBLEM(checkNetworks(pool, scratch()), "\"ib-pool-2\" has no IPPool");
  Catalog block = catalogOf({{"nad.yaml", broken(nv, "perNodeBlockSize: 64", "perNodeBlockSize: 1")}});
  EXPECT_PROBLEM(checkSupportingObjects(block), "perNodeBlockSize");
}

TEST_F(BrokenExamples, DevicePluginConfig) {
  std::string dp = example("sriov-device-plugin-config.yaml");
  Catalog badJson = catalogOf({{"dp.yaml", broken(dp, R"("isRdma": true)", R"("isRdma": true,)")}});
  EXPECT_PROBLEM(badJson.problems, "data.config.json is not valid JSON");
  Catalog otherResource = catalogOf(
      {{"dp.yaml", broken(dp, R"("resourceName": "mlnx_ib_vf")", R"("resourceName": "ib_vf")")}, {"nad.yaml", nad_}});
  EXPECT_PROBLEM(checkSupportingObjects(otherResource),
                 "resource nvidia.com/mlnx_ib_vf is not defined by the device plugin");
  Catalog typo = catalogOf({{"dp.yaml", broken(dp, R"("linkTypes")", R"("linkType")")}});
  EXPECT_PROBLEM(checkSupportingObjects(typo), "unknown selector linkType");
  Catalog badId = catalogOf({{"dp.yaml", broken(dp, R"(["101c"])", R"(["0x101c"])")}});
  EXPECT_PROBLEM(checkSupportingObjects(badId), "not a 4-digit hex PCI id");
}

TEST_F(BrokenExamples, ServiceSelectingNoPodAndOverlappingSubnets) {
  std::string pair = example("ib-write-bw-pair.yaml");
  Catalog svc = catalogOf(
      {{"nad.yaml", nad_}, {"pair.yaml", broken(pair, "    role: server\n  ports:", "    role: srv\n  ports:")}});
  EXPECT_PROBLEM(checkSupportingObjects(svc), "selects no pod");
  Catalog overlap =
      catalogOf({{"nad.yaml", nad_}, {"nad2.yaml", broken(guidNad_, "192.168.30.0/24", "192.168.20.128/25")}});
  EXPECT_PROBLEM(checkSupportingObjects(overlap), "overlaps");
  Catalog twice = catalogOf({{"nad.yaml", nad_}, {"nad2.yaml", nad_}});
  EXPECT_PROBLEM(checkSupportingObjects(twice), "is also defined at");
  // The rails share their subnet through one cluster pool; naming two pools, they overlap.
  const std::string rails = example("sriov-multi-rail.yaml");
  EXPECT_TRUE(checkSupportingObjects(catalogOf({{"rails.yaml", rails}})).empty());
  std::string twoPoolsText = rails;
  const std::string pool = R"("pool": "ib-rails")";
  twoPoolsText.replace(twoPoolsText.rfind(pool), pool.size(), R"("pool": "ib-rails2")");  // the second rail's
  Catalog twoPools = catalogOf({{"rails.yaml", twoPoolsText}});
  EXPECT_PROBLEM(checkSupportingObjects(twoPools), "overlaps");
}

TEST_F(BrokenExamples, UnknownKindsAndApiVersions) {
  Catalog c =
      catalogOf({{"d.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n"},
                 {"n.yaml", broken(nad_, "apiVersion: k8s.cni.cncf.io/v1", "apiVersion: k8s.cni.cncf.io/v1beta1")}});
  EXPECT_PROBLEM(c.problems, "kind Deployment is not one this test reads");
  EXPECT_PROBLEM(c.problems, "expected k8s.cni.cncf.io/v1");
  EXPECT_NE(static_cast<int>(c.nads.size()), c.nadKindLines);
}

TEST_F(BrokenExamples, MarkdownBlocks) {
  Catalog none;
  addMarkdown(none, "README.md", "# Title\n\nNo blocks.\n\n```sh\nkubectl apply -f x.yaml\n```\n");
  EXPECT_TRUE(none.problems.empty());
  EXPECT_EQ(none.docBlocks, 0);
  EXPECT_EQ(none.nads.size(), 0u);

  const std::string text = "Intro\n\n```yaml\n" + nad_ + "```\n\n```yaml\napiVersion: v1\nkind: Pod\n```\n";
  Catalog good;
  addMarkdown(good, "README.md", text);
  EXPECT_TRUE(good.problems.empty()) << all(good.problems);
  EXPECT_EQ(good.docBlocks, 1) << "only the block with a NAD is read";
  ASSERT_EQ(good.nads.size(), 1u);
  EXPECT_EQ(good.nads[0].obj.group, kDocsGroup);
  EXPECT_EQ(good.nads[0].obj.where.substr(0, 10), "README.md:");

  Catalog indented;
  std::string list = "1. Apply:\n\n   ```yaml\n";
  std::istringstream in(nad_);
  for (std::string l; std::getline(in, l);) {
    list += (l.empty() ? "" : "   ") + l + "\n";
  }
  list += "   ```\n";
  addMarkdown(indented, "README.md", list);
  EXPECT_TRUE(indented.problems.empty()) << all(indented.problems);
  EXPECT_EQ(indented.nads.size(), 1u);

  Catalog bad;
  addMarkdown(bad, "README.md",
            "```yaml\n" + broken(nad_, R"("cniVersion": "1.0.0",)", R"("cniVersion": "1.0.0")") + "```\n");
  ASSERT_TRUE(bad.problems.empty()) << all(bad.problems);
  EXPECT_PROBLEM(checkNetworks(bad, scratch()), "README.md:");

  Catalog unreadable;
  addMarkdown(unreadable, "README.md",
            "```yaml\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: x\n   bad: indent\n```\n");
  EXPECT_FALSE(unreadable.problems.empty());
  EXPECT_NE(static_cast<int>(unreadable.nads.size()), unreadable.nadKindLines);

  Catalog open;
  addMarkdown(open, "README.md", "```yaml\n" + nad_);
  EXPECT_PROBLEM(open.problems, "never closed");
}

// loadRepository reads the blocks of README.md and of every docs/*.md, and misses no page: a broken
// NAD in a page of docs/ is named by its file and line.
TEST_F(BrokenExamples, DocsPagesAreReadToo) {
  const fs::path root = scratch() / "repo";
  auto write = [&](const std::string& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  const std::string spdx = "# SPDX-License-Identifier: Apache-2.0\n";
  write("deploy/examples/net.yaml", spdx + nad_);
  write("e2e/hw/manifests/net.yaml", spdx + nad_);
  write("README.md", "# Title\n\nNo blocks.\n");
  write("docs/a.md", "# A\n\n```yaml\n" + broken(nad_, "name: ib-sriov-rdma\n", "name: docs-net\n") + "```\n");
  write("docs/b.md", "# B\n\n```yaml\n" +
                         broken(broken(nad_, "name: ib-sriov-rdma\n", "name: docs-bad\n"), R"("pkey": "0x7fff")",
                                R"("pkey": "0x0000")") +
                         "```\n");
  write("docs/notes.txt", "```yaml\n" + nad_ + "```\n");  // not Markdown: not read
  Catalog c = loadRepository(root);
  EXPECT_TRUE(c.problems.empty()) << all(c.problems);
  EXPECT_EQ(c.docBlocks, 2);
  ASSERT_EQ(c.nads.size(), 4u);
  EXPECT_EQ(c.nads[2].obj.group, kDocsGroup);
  EXPECT_EQ(c.nads[2].obj.where.substr(0, 10), "docs/a.md:");
  const auto problems = checkNetworks(c, scratch());
  EXPECT_PROBLEM(problems, "(NetworkAttachmentDefinition docs-bad)");
  EXPECT_PROBLEM(problems, "docs/b.md:");

  fs::remove_all(root / "docs");
  EXPECT_PROBLEM(loadRepository(root).problems, "docs: no such directory");
}

TEST_F(BrokenExamples, Templates) {
  EXPECT_FALSE(renderTemplate("deploy/examples/x.yaml", "metadata:\n  name: ${NAME}\n").has_value());
  auto unknown = renderTemplate("e2e/hw/manifests/pod-template.yaml", "metadata:\n  name: ${NEW}\n");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().find("${NEW}"), std::string::npos);
  auto ok = renderTemplate("e2e/hw/manifests/pod-template.yaml", "# ${ANY} in a comment\nname: ${NAME}\n");
  ASSERT_TRUE(ok.has_value()) << ok.error();
  EXPECT_EQ(*ok, "# ${ANY} in a comment\nname: ibcni-hw-a\n");
}

}  // namespace
}  // namespace ibcni::testing::examples
