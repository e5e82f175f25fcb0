// SPDX-License-Identifier: Apache-2.0
// The repository's example manifests (deploy/examples/, e2e/hw/manifests/ and the yaml blocks of
// README.md and docs/*.md holding a NetworkAttachmentDefinition), read with libyaml (lib/yaml, as the product reads
// kubeconfigs) and checked the way a cluster would use them: every ibcni config goes through the plugin's own parser as Multus delivers it,
// every pod's networks annotation must name an existing network, and the objects that go with the
// networks (device plugin config, nv-ipam IPPool, Services) must agree with them.
//
// Every check returns its problems as text instead of failing a test, so that the tests can also
// feed deliberately broken copies through the same code and expect problems.
#pragma once

#include <expected>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/config/net_conf.h"

namespace ibcni::testing::examples {

using nlohmann::json;

/// Where Multus' stand-in VF sits: the PCI address the test injects as deviceID and pciBusID.
inline constexpr const char* kStandInPci = "0000:3b:00.2";

/// The groups of manifests: a pod's networks are looked up in its own group (the blocks of the
/// documentation may also name the networks of deploy/examples).
inline constexpr const char* kExamplesGroup = "deploy/examples";
inline constexpr const char* kHwGroup = "e2e/hw/manifests";
inline constexpr const char* kDocsGroup = "README.md and docs/";

/// One Kubernetes object: one YAML document.
struct Object {
  std::string group;       ///< kExamplesGroup, kHwGroup or kDocsGroup
  std::string where;       ///< "deploy/examples/pod-ipoib.yaml:17": the file and the document's first line
  std::string kind;        ///< "Pod"
  std::string apiVersion;  ///< "v1"
  std::string ns;          ///< metadata.namespace, "default" when absent
  std::string name;        ///< metadata.name
  json tree;               ///< the whole document
};

/// A NetworkAttachmentDefinition.
struct Nad {
  Object obj;
  std::string resourceName;  ///< annotation k8s.v1.cni.cncf.io/resourceName, or ""
  std::string config;        ///< spec.config as written (JSON text)
};

/// One element of a pod's k8s.v1.cni.cncf.io/networks annotation (Multus' NetworkSelectionElement).
struct NetworkElement {
  std::string name;
  std::string ns;         ///< the element's namespace, else the pod's
  std::string interface;  ///< "" when Multus picks net<N>
  json element;           ///< the element as JSON (the comma form converted)
};

struct Pod {
  Object obj;
  std::vector<NetworkElement> networks;
};

/// A ConfigMap's data value whose key ends in ".json", parsed.
struct ConfigJson {
  Object obj;
  std::string key;
  json value;
};

struct Catalog {
  std::vector<Nad> nads;
  std::vector<Pod> pods;
  std::vector<ConfigJson> configJson;
  std::vector<Object> others;         ///< ConfigMaps, Services, IPPools
  int files = 0;                      ///< manifest files read
  int templates = 0;                  ///< of which templates with ${...} placeholders
  int docBlocks = 0;                  ///< yaml blocks of README.md and docs/*.md read (those holding a NAD)
  int documents = 0;                  ///< YAML documents read
  int nadKindLines = 0;               ///< "kind: NetworkAttachmentDefinition" lines in what was read
  std::vector<std::string> problems;  ///< everything that could not be read
};

/// Reads the YAML `text` (a file, or a Markdown block starting at line `firstLine` of `where`) into
/// `catalog`. Anything unreadable or of an unknown shape is a problem.
void addManifest(Catalog& catalog, const std::string& group, const std::string& where, std::string_view text,
                 int firstLine = 1);

/// Reads every ```yaml (or ```yml) block of `markdown` that contains "kind:
/// NetworkAttachmentDefinition" into the group kDocsGroup; other blocks are left alone. `where`
/// names the file ("docs/configuration.md").
void addMarkdown(Catalog& catalog, const std::string& where, std::string_view markdown);

/// A template of e2e/hw/manifests with its ${...} placeholders replaced by the defaults of the
/// script that renders it (`relPath` is the file's path in the repository). Text without
/// placeholders comes back unchanged; unknown templates or placeholders are an error.
[[nodiscard]] std::expected<std::string, std::string> renderTemplate(const std::string& relPath, std::string_view text);

/// Every *.yaml/*.yml under deploy/examples/ and e2e/hw/manifests/ of `sourceDir`, and the blocks of
/// README.md and of every docs/*.md (in name order).
[[nodiscard]] Catalog loadRepository(const std::filesystem::path& sourceDir);

/// One invocation of ibcni as Multus makes it, after parsing.
struct Invocation {
  std::string nad;       ///< where of the NAD
  std::string pod;       ///< where of the pod, "" for the NAD alone
  std::string name;      ///< the NAD's metadata.name
  json stdinConfig;      ///< what ibcni reads on stdin
  config::NetConf conf;  ///< config::parseNetConf's result for ADD
};

struct Stats {
  int ibcniConfigs = 0;   ///< ibcni plugin configs found in NADs
  int otherConfigs = 0;   ///< configs of other plugins (not parsed by ibcni)
  int invocations = 0;    ///< ADDs (and DELs) parsed: one per NAD, plus one per pod attachment
  int ipamConfigs = 0;    ///< ipam objects also accepted by ibcni-ipam's parser
  int podNetworks = 0;    ///< networks annotation elements checked
  int deviceConfigs = 0;  ///< device plugin resourceList entries checked
};

/// For every NAD: its config is JSON; for every ibcni config in it, Multus' delegate config (the
/// NAD alone, then with each pod's request) parses with config::parseNetConf for ADD and DEL, and
/// the parsed values are those written; capabilities are ones ibcni uses and cover what pods
/// request; the IPAM config is checked by type (ibcni-ipam and host-local with ibcni-ipam's parser,
/// whereabouts, nv-ipam against the IPPools). `scratch` receives the device-info file.
[[nodiscard]] std::vector<std::string> checkNetworks(const Catalog& catalog, const std::filesystem::path& scratch,
                                                     Stats* stats = nullptr, std::vector<Invocation>* out = nullptr);

/// For every pod: its networks annotation names existing NADs with valid interface names and GUIDs
/// (unique per group), and a pod on an SR-IOV network with a resourceName requests that resource
/// in requests and limits and adds IPC_LOCK.
[[nodiscard]] std::vector<std::string> checkPods(const Catalog& catalog, Stats* stats = nullptr);

/// The objects around the networks: device plugin configs (resourceList) define the NADs'
/// resources, IPPools are valid, Services select a pod, the subnets of one group do not overlap.
[[nodiscard]] std::vector<std::string> checkSupportingObjects(const Catalog& catalog, Stats* stats = nullptr);

/// The NAD named `name` in namespace `ns` as seen from `group`, or nullptr.
[[nodiscard]] const Nad* findNad(const Catalog& catalog, const std::string& group, const std::string& ns,
                                 const std::string& name);

}  // namespace ibcni::testing::examples
