// SPDX-License-Identifier: Apache-2.0
// Longer than 600 lines on purpose: one catalogue of what every example manifest must hold (NADs, pods,
// device plugin config), checked the way Multus and the device plugins read them.
#include "manifests.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/net/ip.h"
#include "ibcni/config/net_conf.h"
#include "ibcni/yaml/yaml_json.h"

namespace ibcni::testing::examples {

namespace fs = std::filesystem;

namespace {

constexpr const char* kResourceAnnotation = "k8s.v1.cni.cncf.io/resourceName";
constexpr const char* kNetworksAnnotation = "k8s.v1.cni.cncf.io/networks";
// containerd's sandbox ID and a pod UID, as Multus passes them in CNI_ARGS.
constexpr const char* kSandbox = "5f3e0b2f8a9c4d1e7b6a5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f";
constexpr const char* kPodUid = "8d2b8c3e-1f4a-4b6c-9e2d-7a1b3c5d7e9f";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::vector<std::string_view> lines(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// "kind: NetworkAttachmentDefinition" (quoted or not, perhaps with a comment), at any indentation.
bool isNadKindLine(std::string_view line) {
  std::string_view t = trim(line);
  if (!t.starts_with("kind:")) {
    return false;
  }
  t = trim(t.substr(5));
  if (auto hash = t.find(" #"); hash != std::string_view::npos) {
    t = trim(t.substr(0, hash));
  }
  if (t.size() >= 2 && (t.front() == '"' || t.front() == '\'') && t.back() == t.front()) {
    t = t.substr(1, t.size() - 2);
  }
  return t == "NetworkAttachmentDefinition";
}

int countNadKindLines(std::string_view text) {
  int n = 0;
  for (auto l : lines(text)) {
    n += isNadKindLine(l) ? 1 : 0;
  }
  return n;
}

const json* at(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* k : path) {
    if (!cur->is_object()) {
      return nullptr;
    }
    auto it = cur->find(k);
    if (it == cur->end()) {
      return nullptr;
    }
    cur = &*it;
  }
  return cur;
}

std::string stringAt(const json& j, std::initializer_list<const char*> path) {
  const json* v = at(j, path);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

// A Kubernetes object name (DNS-1123 subdomain).
bool validObjectName(std::string_view n) {
  if (n.empty() || n.size() > 253) {
    return false;
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(n.front()) || !alnum(n.back())) {
    return false;
  }
  return std::all_of(n.begin(), n.end(), [&](char c) { return alnum(c) || c == '-' || c == '.'; });
}

std::string expectedApiVersion(const std::string& kind) {
  if (kind == "NetworkAttachmentDefinition") {
    return "k8s.cni.cncf.io/v1";
  }
  if (kind == "Pod" || kind == "ConfigMap" || kind == "Service") {
    return "v1";
  }
  if (kind == "IPPool") {
    return "nv-ipam.nvidia.com/v1alpha1";
  }
  return "";
}

// The keys of Multus' NetworkSelectionElement.
const std::set<std::string>& selectionKeys() {
  static const std::set<std::string> keys = {
      "name",     "namespace",    "ips",       "mac",           "infiniband-guid",     "interface",
      "cni-args", "portMappings", "bandwidth", "default-route", "ipam-claim-reference"};
  return keys;
}

// The k8s.v1.cni.cncf.io/networks annotation: a JSON list of NetworkSelectionElements, or the
// comma form "name, ns/name@ifname".
std::expected<std::vector<NetworkElement>, std::string> parseNetworks(std::string_view text, const std::string& podNs) {
  std::vector<NetworkElement> out;
  std::string_view t = trim(text);
  if (t.empty()) {
    return std::unexpected("the annotation is empty");
  }
  if (t.front() == '[' || t.front() == '{') {
    json list = json::parse(t, nullptr, false);
    if (list.is_discarded()) {
      return std::unexpected("the annotation starts like JSON but is not valid JSON");
    }
    if (!list.is_array()) {
      return std::unexpected("the JSON form must be a list of objects ([{\"name\": ...}]), got " + list.dump());
    }
    if (list.empty()) {
      return std::unexpected("the list is empty");
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      const json& e = list[i];
      const std::string p = "element " + std::to_string(i);
      if (!e.is_object()) {
        return std::unexpected(p + " is not an object: " + e.dump());
      }
      for (const auto& [k, v] : e.items()) {
        if (!selectionKeys().contains(k)) {
          return std::unexpected(p + " has key \"" + k + "\", which Multus does not know (it would be ignored)");
        }
      }
      NetworkElement n;
      n.element = e;
      if (!e.contains("name") || !e["name"].is_string() || e["name"].get<std::string>().empty()) {
        return std::unexpected(p + " has no \"name\"");
      }
      n.name = e["name"].get<std::string>();
      n.ns = podNs;
      if (e.contains("namespace")) {
        if (!e["namespace"].is_string()) {
          return std::unexpected(p + ": \"namespace\" must be a string");
        }
        n.ns = e["namespace"].get<std::string>();
      }
      if (e.contains("interface")) {
        if (!e["interface"].is_string()) {
          return std::unexpected(p + ": \"interface\" must be a string");
        }
        n.interface = e["interface"].get<std::string>();
      }
      out.push_back(std::move(n));
    }
    return out;
  }
  std::string s(t);
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    std::string_view it = trim(item);
    if (it.empty()) {
      return std::unexpected("an empty name in the comma form");
    }
    NetworkElement n;
    n.ns = podNs;
    if (auto at = it.find('@'); at != std::string_view::npos) {
      n.interface = std::string(it.substr(at + 1));
      it = it.substr(0, at);
    }
    if (auto slash = it.find('/'); slash != std::string_view::npos) {
      n.ns = std::string(it.substr(0, slash));
      it = it.substr(slash + 1);
    }
    n.name = std::string(it);
    if (n.name.empty() || n.ns.empty()) {
      return std::unexpected("\"" + std::string(trim(item)) + "\" is not [namespace/]name[@interface]");
    }
    n.element = json{{"name", n.name}, {"namespace", n.ns}};
    if (!n.interface.empty()) {
      n.element["interface"] = n.interface;
    }
    out.push_back(std::move(n));
  }
  return out;
}

// The ibcni plugin configs of a NAD's config (a single config or a conflist's ibcni entries),
// with the name and cniVersion libcni gives every plugin of a list.
std::vector<json> pluginsOf(const json& cfg) {
  std::vector<json> out;
  if (auto it = cfg.find("plugins"); it != cfg.end() && it->is_array()) {
    for (const auto& p : *it) {
      json c = p;
      if (c.is_object()) {
        if (cfg.contains("name")) {
          c["name"] = cfg["name"];
        }
        if (cfg.contains("cniVersion")) {
          c["cniVersion"] = cfg["cniVersion"];
        }
      }
      out.push_back(std::move(c));
    }
    return out;
  }
  out.push_back(cfg);
  return out;
}

bool isIbcni(const json& plugin) { return plugin.is_object() && plugin.value("type", std::string()) == "ibcni"; }

// True when the NAD's config has an ibcni plugin in sriov mode (the default).
bool isIbcniSriov(const Nad& nad) {
  json cfg = json::parse(nad.config, nullptr, false);
  if (!cfg.is_object()) {
    return false;
  }
  for (const auto& p : pluginsOf(cfg)) {
    if (isIbcni(p) && p.value("mode", std::string("sriov")) == "sriov") {
      return true;
    }
  }
  return false;
}

std::string label(const Nad& nad) { return nad.obj.where + " (NetworkAttachmentDefinition " + nad.obj.name + ")"; }
std::string label(const Pod& pod) { return pod.obj.where + " (Pod " + pod.obj.name + ")"; }

struct TemplateDefaults {
  const char* path;
  std::vector<std::pair<std::string, std::string>> values;
};

// The defaults of e2e/hw/validate-sriov-vf.sh and validate-ipoib.sh for the placeholders they
// replace in their pod templates (the node name stands for the kubernetes.io/hostname label).
const std::vector<TemplateDefaults>& templateDefaults() {
  static const std::vector<TemplateDefaults> t = {
      {"e2e/hw/manifests/pod-template.yaml",
       {{"NAME", "ibcni-hw-a"},
        {"RUN", "run-1"},
        {"NAD_NAMESPACE", "default"},
        {"NAD", "ib-sriov-hw"},
        {"GUID", "02:00:00:00:ac:00:00:01"},
        {"IP", "192.168.100.201/24"},
        {"IMAGE", "docker.io/mellanox/rping-test:latest"},
        {"RESOURCE", "nvidia.com/mlnx_ib_vf"},
        {"NODE", "node-a"}}},
      {"e2e/hw/manifests/pod-ipoib-template.yaml",
       {{"NAME", "ibcni-ipoib-a"},
        {"RUN", "run-1"},
        {"NAD_NAMESPACE", "default"},
        {"NAD", "ib-ipoib-hw"},
        {"IP", "192.168.110.201/24"},
        {"IMAGE", "docker.io/mellanox/rping-test:latest"},
        {"PRIVILEGED", "false"},
        {"RDMA_RESOURCE", "rdma/hca_shared_devices_a"},
        {"NODE", "node-a"}}},
  };
  return t;
}

void problem(std::vector<std::string>& out, std::string text) { out.push_back(std::move(text)); }

std::expected<std::uint64_t, std::string> quantity(const json& v) {
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
    return v.get<std::uint64_t>();
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::stoull(s);
    }
  }
  return std::unexpected("not a whole number of devices: " + v.dump());
}

}  // namespace

void addManifest(Catalog& catalog, const std::string& group, const std::string& where, std::string_view text,
                 int firstLine) {
  catalog.nadKindLines += countNadKindLines(text);
  // libyaml, as the product reads kubeconfigs (lib/yaml); its lines count from the text's first.
  auto docs = yaml::yamlDocumentsToJson(text, yaml::YamlReading::kAsKubernetesDoes);
  if (!docs) {
    yaml::YamlError e = docs.error();
    if (e.line != 0) {
      e.line += static_cast<std::size_t>(firstLine - 1);
    }
    catalog.problems.push_back(where + ": " + e.describe());
    return;
  }
  for (const auto& doc : *docs) {
    Object o;
    o.group = group;
    o.where = where + ":" + std::to_string(static_cast<std::size_t>(firstLine - 1) + doc.line);
    auto tree = json::parse(doc.json, nullptr, false);
    if (tree.is_discarded()) {
      catalog.problems.push_back(o.where + ": the YAML reader gave no JSON");
      continue;
    }
    ++catalog.documents;
    auto bad = [&](const std::string& what) { catalog.problems.push_back(o.where + ": " + what); };
    if (!tree.is_object()) {
      bad("the document is not a mapping (a Kubernetes object)");
      continue;
    }
    o.tree = std::move(tree);
    o.kind = stringAt(o.tree, {"kind"});
    o.apiVersion = stringAt(o.tree, {"apiVersion"});
    o.name = stringAt(o.tree, {"metadata", "name"});
    o.ns = stringAt(o.tree, {"metadata", "namespace"});
    if (const json* ns = at(o.tree, {"metadata", "namespace"}); ns && !ns->is_string()) {
      bad("metadata.namespace is not a string");
      continue;
    }
    if (o.ns.empty()) {
      o.ns = "default";
    }
    if (o.kind.empty()) {
      bad("no kind");
      continue;
    }
    const std::string api = expectedApiVersion(o.kind);
    if (api.empty()) {
      bad("kind " + o.kind +
          " is not one this test reads (NetworkAttachmentDefinition, Pod, ConfigMap, Service, IPPool): teach "
          "tests/examples/manifests.cpp to check it");
      continue;
    }
    if (o.apiVersion != api) {
      bad(o.kind + " with apiVersion \"" + o.apiVersion + "\": expected " + api);
      continue;
    }
    if (!validObjectName(o.name)) {
      bad("metadata.name \"" + o.name + "\" is missing or not a valid Kubernetes name");
      continue;
    }
    const json* annotations = at(o.tree, {"metadata", "annotations"});
    if (annotations && !annotations->is_null()) {
      if (!annotations->is_object()) {
        bad("metadata.annotations is not a mapping");
        continue;
      }
      bool allStrings = true;
      for (const auto& [k, v] : annotations->items()) {
        if (!v.is_string()) {
          bad("annotation " + k + " is not a string (quote it): " + v.dump());
          allStrings = false;
        }
      }
      if (!allStrings) {
        continue;
      }
    }
    if (o.kind == "NetworkAttachmentDefinition") {
      Nad nad;
      nad.resourceName = stringAt(o.tree, {"metadata", "annotations", kResourceAnnotation});
      const json* config = at(o.tree, {"spec", "config"});
      if (!config) {
        bad("NetworkAttachmentDefinition without spec.config");
        continue;
      }
      if (!config->is_string()) {
        bad("spec.config must be a string: a block scalar (config: |) or a quoted one-line string, got " +
            config->dump());
        continue;
      }
      nad.config = config->get<std::string>();
      if (trim(nad.config).empty()) {
        bad("spec.config is empty");
        continue;
      }
      nad.obj = std::move(o);
      catalog.nads.push_back(std::move(nad));
    } else if (o.kind == "Pod") {
      Pod pod;
      if (const json* n = annotations ? at(*annotations, {kNetworksAnnotation}) : nullptr) {
        auto networks = parseNetworks(n->get<std::string>(), o.ns);
        if (!networks) {
          bad(std::string("annotation ") + kNetworksAnnotation + ": " + networks.error());
          continue;
        }
        pod.networks = std::move(*networks);
      }
      pod.obj = std::move(o);
      catalog.pods.push_back(std::move(pod));
    } else if (o.kind == "ConfigMap") {
      const json* data = at(o.tree, {"data"});
      if (data && !data->is_object()) {
        bad("data is not a mapping");
        continue;
      }
      if (data) {
        for (const auto& [k, v] : data->items()) {
          if (!v.is_string()) {
            bad("data." + k + " is not a string");
            continue;
          }
          if (k.ends_with(".json")) {
            json parsed = json::parse(v.get<std::string>(), nullptr, false);
            if (parsed.is_discarded()) {
              bad("data." + k + " is not valid JSON");
              continue;
            }
            catalog.configJson.push_back(ConfigJson{o, k, std::move(parsed)});
          }
        }
      }
      catalog.others.push_back(std::move(o));
    } else {
      catalog.others.push_back(std::move(o));
    }
  }
}

void addMarkdown(Catalog& catalog, const std::string& where, std::string_view markdown) {
  auto ls = lines(markdown);
  for (std::size_t i = 0; i < ls.size(); ++i) {
    std::string_view l = ls[i];
    std::size_t indent = 0;
    while (indent < l.size() && l[indent] == ' ') {
      ++indent;
    }
    std::string_view t = l.substr(indent);
    if (!t.starts_with("```")) {
      continue;
    }
    std::size_t ticks = 0;
    while (ticks < t.size() && t[ticks] == '`') {
      ++ticks;
    }
    std::string_view info = trim(t.substr(ticks));
    std::string_view lang = info.substr(0, std::min(info.find_first_of(" {"), info.size()));
    const bool yaml = lang == "yaml" || lang == "yml";
    // The block's lines, up to the closing fence (as many backticks or more, nothing else).
    std::string block;
    std::size_t j = i + 1;
    bool closed = false;
    for (; j < ls.size(); ++j) {
      std::string_view b = ls[j];
      std::string_view bt = trim(b);
      if (bt.size() >= ticks && bt.find_first_not_of('`') == std::string_view::npos) {
        closed = true;
        break;
      }
      std::size_t strip = 0;
      while (strip < indent && strip < b.size() && b[strip] == ' ') {
        ++strip;
      }
      block += b.substr(strip);
      block += '\n';
    }
    if (yaml && countNadKindLines(block) > 0) {
      if (!closed) {
        catalog.problems.push_back(where + ":" + std::to_string(i + 1) +
                                   ": a yaml block with a NetworkAttachmentDefinition is never closed");
      } else {
        ++catalog.docBlocks;
        addManifest(catalog, kDocsGroup, where, block, static_cast<int>(i) + 2);
      }
    }
    i = j;
  }
}

std::expected<std::string, std::string> renderTemplate(const std::string& relPath, std::string_view text) {
  const TemplateDefaults* defaults = nullptr;
  for (const auto& t : templateDefaults()) {
    if (relPath == t.path) {
      defaults = &t;
    }
  }
  std::string out;
  int no = 0;
  for (auto l : lines(text)) {
    ++no;
    std::string_view t = trim(l);
    if (t.starts_with("#") || l.find("${") == std::string_view::npos) {
      out += l;
      out += '\n';
      continue;
    }
    if (!defaults) {
      return std::unexpected(relPath + ":" + std::to_string(no) +
                             ": ${...} placeholders in a file tests/examples/manifests.cpp does not know as a "
                             "template: add it with the values of the script that renders it to templateDefaults()");
    }
    std::string line(l);
    std::size_t pos = 0;
    while ((pos = line.find("${", pos)) != std::string::npos) {
      std::size_t end = line.find('}', pos);
      if (end == std::string::npos) {
        return std::unexpected(relPath + ":" + std::to_string(no) + ": unterminated ${");
      }
      const std::string name = line.substr(pos + 2, end - pos - 2);
      auto v = std::find_if(defaults->values.begin(), defaults->values.end(),
                            [&](const auto& kv) { return kv.first == name; });
      if (v == defaults->values.end()) {
        return std::unexpected(relPath + ":" + std::to_string(no) + ": placeholder ${" + name +
                               "} has no value in templateDefaults(): add the script's default");
      }
      line.replace(pos, end - pos + 1, v->second);
      pos += v->second.size();
    }
    out += line;
    out += '\n';
  }
  return out;
}

Catalog loadRepository(const fs::path& sourceDir) {
  Catalog catalog;
  for (const auto& [group, dir] :
       {std::pair{kExamplesGroup, "deploy/examples"}, std::pair{kHwGroup, "e2e/hw/manifests"}}) {
    const fs::path root = sourceDir / dir;
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      catalog.problems.push_back(std::string(dir) + ": no such directory");
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) {
        files.push_back(e.path());
      }
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      catalog.problems.push_back(std::string(dir) + ": no *.yaml file");
    }
    for (const auto& f : files) {
      const std::string rel = f.lexically_relative(sourceDir).generic_string();
      std::ifstream in(f, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string text = ss.str();
      ++catalog.files;
      if (!text.starts_with("# SPDX-License-Identifier: Apache-2.0\n")) {
        catalog.problems.push_back(rel + ":1: does not start with # SPDX-License-Identifier: Apache-2.0");
      }
      auto rendered = renderTemplate(rel, text);
      if (!rendered) {
        catalog.problems.push_back(rendered.error());
        catalog.nadKindLines += countNadKindLines(text);  // so that the NAD count shows the gap too
        continue;
      }
      if (*rendered != text) {
        ++catalog.templates;
      }
      addManifest(catalog, group, rel, *rendered);
    }
  }
  // The documentation: README.md, then docs/*.md in name order.
  std::vector<fs::path> pages = {sourceDir / "README.md"};
  std::error_code ec;
  if (!fs::is_directory(sourceDir / "docs", ec)) {
    catalog.problems.push_back("docs: no such directory");
  } else {
    std::vector<fs::path> docs;
    for (const auto& e : fs::directory_iterator(sourceDir / "docs")) {
      if (e.is_regular_file() && e.path().extension() == ".md") {
        docs.push_back(e.path());
      }
    }
    std::sort(docs.begin(), docs.end());
    pages.insert(pages.end(), docs.begin(), docs.end());
  }
  for (const auto& page : pages) {
    const std::string rel = page.lexically_relative(sourceDir).generic_string();
    std::ifstream in(page, std::ios::binary);
    if (!in) {
      catalog.problems.push_back(rel + ": cannot be read");
      continue;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    addMarkdown(catalog, rel, ss.str());
  }
  return catalog;
}

const Nad* findNad(const Catalog& catalog, const std::string& group, const std::string& ns, const std::string& name) {
  for (const char* g : {group.c_str(), group == kDocsGroup ? kExamplesGroup : ""}) {
    for (const auto& nad : catalog.nads) {
      if (nad.obj.group == g && nad.obj.ns == ns && nad.obj.name == name) {
        return &nad;
      }
    }
  }
  return nullptr;
}

namespace {

const Object* findObject(const Catalog& catalog, const std::string& group, const std::string& kind,
                         const std::string& name) {
  for (const char* g : {group.c_str(), group == kDocsGroup ? kExamplesGroup : ""}) {
    for (const auto& o : catalog.others) {
      if (o.group == g && o.kind == kind && o.name == name) {
        return &o;
      }
    }
  }
  return nullptr;
}

const std::set<std::string>& ibcniCapabilities() {
  static const std::set<std::string> caps = {"deviceID", "mac", "ips", "infinibandGUID", "CNIDeviceInfoFile"};
  return caps;
}

// CNI_ARGS as Multus builds it for a delegate's ADD: its own keys, then IP= and MAC= from the
// pod's request.
std::string multusCniArgs(const std::string& podNs, const std::string& podName, const NetworkElement* el) {
  std::string args = "IgnoreUnknown=true;K8S_POD_NAMESPACE=" + podNs + ";K8S_POD_NAME=" + podName +
                     ";K8S_POD_INFRA_CONTAINER_ID=" + kSandbox + ";K8S_POD_UID=" + kPodUid;
  if (el && el->element.contains("mac") && el->element["mac"].is_string()) {
    args += ";MAC=" + el->element["mac"].get<std::string>();
  }
  if (el && el->element.contains("ips") && el->element["ips"].is_array()) {
    std::string ips;
    for (const auto& ip : el->element["ips"]) {
      ips += (ips.empty() ? "" : ",") + (ip.is_string() ? ip.get<std::string>() : ip.dump());
    }
    args += ";IP=" + ips;
  }
  return args;
}

// The parsed values must be those written in the config (and given by the pod).
void compareParsed(const json& plugin, const Nad& nad, const NetworkElement* el, const config::NetConf& c,
                   const std::string& who, std::vector<std::string>& problems) {
  auto mismatch = [&](const std::string& what, const std::string& want, const std::string& got) {
    if (want != got) {
      problem(problems, who + ": " + what + " is parsed as \"" + got + "\", the config says \"" + want + "\"");
    }
  };
  mismatch("type", "ibcni", c.type);
  mismatch("mode", plugin.value("mode", std::string("sriov")), config::toString(c.mode));

  std::string wantPkey = "none";
  if (auto it = plugin.find("pkey"); it != plugin.end()) {
    std::uint64_t v = 0;
    if (it->is_string()) {
      const std::string s = it->get<std::string>();
      v = std::stoull(s, nullptr, s.starts_with("0x") || s.starts_with("0X") ? 16 : 10);
    } else {
      v = it->get<std::uint64_t>();
    }
    wantPkey = std::to_string(v & 0x7fff);
  }
  mismatch("pkey", wantPkey, c.pkey ? std::to_string(c.pkey->wire()) : "none");

  std::string wantIso = "auto";
  if (auto it = plugin.find("rdmaIsolation"); it != plugin.end() && it->is_boolean()) {
    wantIso = it->get<bool>() ? "on" : "off";
  }
  const char* gotIso = c.rdmaIsolation == config::RdmaIsolation::kOn    ? "on"
                       : c.rdmaIsolation == config::RdmaIsolation::kOff ? "off"
                                                                        : "auto";
  mismatch("rdmaIsolation", wantIso, gotIso);

  mismatch("mtu", plugin.contains("mtu") ? plugin["mtu"].dump() : "none", c.mtu ? std::to_string(*c.mtu) : "none");
  mismatch("linkState", plugin.value("linkState", plugin.value("link_state", std::string("unchanged"))),
           c.linkState ? config::toString(*c.linkState) : "unchanged");
  mismatch("ipam type", stringAt(plugin, {"ipam", "type"}), c.ipamType);
  if (c.mode == config::Mode::kIpoib) {
    mismatch("master", plugin.value("master", std::string()), c.master);
    mismatch("rdmaDevice", plugin.value("rdmaDevice", std::string()), c.rdmaDevice);
    mismatch("port", plugin.contains("port") ? plugin["port"].dump() : "1", std::to_string(c.port));
  }
  if (!nad.resourceName.empty()) {
    mismatch("deviceID (Multus' injection)", kStandInPci, c.deviceId ? c.deviceId->text : "none");
  }
  if (el && el->element.contains("infiniband-guid")) {
    auto want = net::Guid::parse(el->element["infiniband-guid"].get<std::string>());
    if (!want || !c.runtime.infinibandGuid || !(*want == *c.runtime.infinibandGuid)) {
      problem(problems, who + ": the pod's infiniband-guid " + el->element["infiniband-guid"].dump() +
                            " does not reach ibcni as runtimeConfig.infinibandGUID");
    }
  }
  if (el && el->element.contains("ips")) {
    if (c.runtime.ips.size() != el->element["ips"].size()) {
      problem(problems,
              who + ": the pod's ips " + el->element["ips"].dump() + " do not reach ibcni as runtimeConfig.ips");
    }
  }
  if (!c.unknownKeys.empty()) {
    std::string keys;
    for (const auto& k : c.unknownKeys) {
      keys += (keys.empty() ? "" : ", ") + k;
    }
    problem(problems, who + ": ibcni does not know the keys " + keys + " (a typo? ibcni would only log them)");
  }
}

// The IPAM object of an invocation, by type.
void checkIpam(const Catalog& catalog, const Nad& nad, const json& plugin, const std::string& stdinText, bool base,
               const std::string& who, std::vector<std::string>& problems, Stats* stats) {
  const json* ipamObj = at(plugin, {"ipam"});
  if (!ipamObj || !ipamObj->is_object() || !ipamObj->contains("type")) {
    return;
  }
  const std::string type = stringAt(*ipamObj, {"type"});
  if (type == "ibcni-ipam" || type == "host-local") {
    // Read as ibcni-ipam reads it (which reads the ipam object whatever its type).
    auto parsed = config::parseNetConf(stdinText, cni::Command::kAdd, config::Role::kIpamPlugin);
    if (parsed && parsed->embeddedIpam && !*parsed->embeddedIpam) {
      parsed = std::unexpected(parsed->embeddedIpam->error());
    }
    if (!parsed) {
      problem(problems, who + ": ibcni-ipam's parser refuses the ipam object: " + parsed.error().msg);
      return;
    }
    const config::IpamConfig& ipamConf = **parsed->embeddedIpam;
    for (const auto& w : ipamConf.warnings) {
      problem(problems, who + ": ibcni-ipam warns: " + w);
    }
    for (const auto& prefix : parsed->runtime.ips) {
      const net::IpAddress& ip = prefix.address;
      bool inRange = std::any_of(ipamConf.rangeSets.begin(), ipamConf.rangeSets.end(),
                                 [&](const config::RangeSet& rs) { return rs.find(ip) != nullptr; });
      if (!inRange) {
        problem(problems, who + ": the pod asks for " + ip.toString() + ", outside every range of the network");
      }
      for (const auto& ex : ipamConf.exclude) {
        if (ex.prefix.contains(ip)) {
          problem(problems, who + ": the pod asks for " + ip.toString() + ", excluded by " + ex.path);
        }
      }
    }
    if (base && stats) {
      ++stats->ipamConfigs;
    }
    return;
  }
  if (!base) {
    return;
  }
  if (type == "whereabouts") {
    const std::string range = stringAt(*ipamObj, {"range"});
    auto prefix = net::IpPrefix::parse(range);
    if (!prefix) {
      problem(problems, who + ": whereabouts' ipam.range \"" + range + "\" is not a CIDR");
      return;
    }
    if (ipamObj->contains("gateway")) {
      problem(problems, who +
                            ": whereabouts with a gateway: InfiniBand has no router here, and whereabouts hands the "
                            "gateway's address out to a pod (k8snetworkplumbingwg/whereabouts#601)");
    }
    if (const json* ex = at(*ipamObj, {"exclude"})) {
      if (!ex->is_array()) {
        problem(problems, who + ": whereabouts' ipam.exclude is not a list");
        return;
      }
      for (const auto& e : *ex) {
        auto p = e.is_string() ? net::IpPrefix::parse(e.get<std::string>()) : std::nullopt;
        if (!p || !prefix->contains(p->address)) {
          problem(problems, who + ": whereabouts' ipam.exclude entry " + e.dump() + " is not a CIDR inside " + range);
        }
      }
    }
  } else if (type == "nv-ipam") {
    const std::string pool = stringAt(*ipamObj, {"poolName"});
    if (pool.empty()) {
      problem(problems, who + ": nv-ipam needs ipam.poolName");
    } else if (!findObject(catalog, nad.obj.group, "IPPool", pool)) {
      problem(problems,
              who + ": nv-ipam's pool \"" + pool + "\" has no IPPool among the manifests of " + nad.obj.group);
    }
  }
}

}  // namespace

std::vector<std::string> checkNetworks(const Catalog& catalog, const fs::path& scratch, Stats* stats,
                                       std::vector<Invocation>* out) {
  std::vector<std::string> problems;
  fs::create_directories(scratch);
  // The device plugin's device-info file, as Multus hands it on (type and pci-address).
  const std::string devInfo = (scratch / "devinfo-net1.json").string();
  std::ofstream(devInfo) << json{{"type", "pci"}, {"version", "1.1.0"}, {"pci", {{"pci-address", kStandInPci}}}}.dump();

  for (const auto& nad : catalog.nads) {
    const std::string nadLabel = label(nad);
    json cfg = json::parse(nad.config, nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object()) {
      problem(problems, nadLabel + ": spec.config is not a JSON object");
      continue;
    }
    if (cfg.contains("plugins") && !cfg["plugins"].is_array()) {
      problem(problems, nadLabel + ": spec.config's plugins is not a list");
      continue;
    }
    // The pods' requests for this network.
    std::vector<std::pair<const Pod*, const NetworkElement*>> uses = {{nullptr, nullptr}};
    for (const auto& pod : catalog.pods) {
      for (const auto& el : pod.networks) {
        if (findNad(catalog, pod.obj.group, el.ns, el.name) == &nad) {
          uses.emplace_back(&pod, &el);
        }
      }
    }
    for (const json& plugin : pluginsOf(cfg)) {
      if (!plugin.is_object() || !plugin.contains("type") || !plugin["type"].is_string()) {
        problem(problems, nadLabel + ": a plugin config without \"type\" (the runtime needs it to find the plugin)");
        continue;
      }
      if (!isIbcni(plugin)) {
        if (stats) {
          ++stats->otherConfigs;
        }
        continue;
      }
      if (stats) {
        ++stats->ibcniConfigs;
      }
      json caps = plugin.value("capabilities", json::object());
      if (!caps.is_object()) {
        problem(problems, nadLabel + ": capabilities is not an object");
        continue;
      }
      for (const auto& [k, v] : caps.items()) {
        if (!v.is_boolean()) {
          problem(problems, nadLabel + ": capabilities." + k + " is not true or false");
        } else if (!ibcniCapabilities().contains(k)) {
          problem(problems, nadLabel + ": capability " + k +
                                " is not one ibcni uses (deviceID, mac, ips, infinibandGUID, CNIDeviceInfoFile)");
        }
      }
      auto capOn = [&](const char* k) { return caps.contains(k) && caps[k].is_boolean() && caps[k].get<bool>(); };

      for (const auto& [pod, el] : uses) {
        const std::string who = nadLabel + (pod ? " for " + label(*pod) : "");
        json in = plugin;
        json offered = json::object();
        if (!nad.resourceName.empty()) {
          // delegateAddDeviceID, and the resource's device and device-info file for libcni.
          in["deviceID"] = kStandInPci;
          in["pciBusID"] = kStandInPci;
          offered["deviceID"] = kStandInPci;
          offered["CNIDeviceInfoFile"] = devInfo;
        }
        if (el) {
          for (const auto& [key, cap] :
               {std::pair{"ips", "ips"}, std::pair{"mac", "mac"}, std::pair{"infiniband-guid", "infinibandGUID"}}) {
            if (!el->element.contains(key)) {
              continue;
            }
            if (!capOn(cap)) {
              problem(problems, who + ": the pod asks for \"" + key + "\" but the config does not declare capability " +
                                    cap + ", so libcni drops it");
              continue;
            }
            offered[cap] = el->element[key];
          }
          if (el->element.contains("cni-args")) {
            if (!el->element["cni-args"].is_object()) {
              problem(problems, who + ": cni-args is not an object");
              continue;
            }
            in["args"]["cni"] = el->element["cni-args"];
          }
        }
        json rc = json::object();
        for (const auto& [k, v] : offered.items()) {
          if (capOn(k.c_str())) {
            rc[k] = v;
          }
        }
        if (!rc.empty()) {
          in["runtimeConfig"] = rc;
        }
        const std::string podNs = pod ? pod->obj.ns : "default";
        const std::string podName = pod ? pod->obj.name : "example";
        if (auto args = cni::parseCniArgs(multusCniArgs(podNs, podName, el)); !args) {
          problem(problems, who + ": CNI_ARGS as Multus passes them are refused: " + args.error().msg);
        }
        const std::string text = in.dump();
        auto add = config::parseNetConf(text, cni::Command::kAdd);
        if (!add) {
          problem(problems, who + ": ibcni refuses the config for ADD (code " +
                                std::to_string(static_cast<int>(add.error().code)) + "): " + add.error().msg);
          continue;
        }
        if (auto del = config::parseNetConf(text, cni::Command::kDel); !del) {
          problem(problems, who + ": ibcni refuses the config for DEL: " + del.error().msg);
        }
        if (stats) {
          ++stats->invocations;
        }
        compareParsed(plugin, nad, el, *add, who, problems);
        checkIpam(catalog, nad, plugin, text, pod == nullptr, who, problems, stats);
        if (out) {
          out->push_back(Invocation{nad.obj.where, pod ? pod->obj.where : "", nad.obj.name, in, *add});
        }
      }
    }
  }
  return problems;
}

std::vector<std::string> checkPods(const Catalog& catalog, Stats* stats) {
  std::vector<std::string> problems;
  std::map<std::string, std::map<std::uint64_t, std::string>> guids;  // group -> GUID -> pod
  for (const auto& pod : catalog.pods) {
    const std::string who = label(pod);
    if (pod.networks.empty()) {
      problem(problems, who + ": no k8s.v1.cni.cncf.io/networks annotation: the example attaches no network");
    }
    const json* containers = at(pod.obj.tree, {"spec", "containers"});
    if (!containers || !containers->is_array() || containers->empty()) {
      problem(problems, who + ": spec.containers is missing or empty");
      continue;
    }
    bool shapeOk = true;
    for (const auto& c : *containers) {
      if (!c.is_object() || stringAt(c, {"name"}).empty() || stringAt(c, {"image"}).empty()) {
        problem(problems, who + ": a container without name or image");
        shapeOk = false;
      }
    }
    if (!shapeOk) {
      continue;
    }
    std::map<std::string, std::uint64_t> needed;  // resource -> attachments
    std::set<std::string> rdmaResources;          // of which ibcni sriov networks
    std::set<std::string> ifnames;
    for (const auto& el : pod.networks) {
      if (stats) {
        ++stats->podNetworks;
      }
      const Nad* nad = findNad(catalog, pod.obj.group, el.ns, el.name);
      if (!nad) {
        std::string known;
        for (const auto& n : catalog.nads) {
          if (n.obj.group == pod.obj.group) {
            known += (known.empty() ? "" : ", ") + n.obj.ns + "/" + n.obj.name;
          }
        }
        problem(problems, who + ": names network " + el.ns + "/" + el.name +
                              ", which no NetworkAttachmentDefinition of " + pod.obj.group +
                              " defines (there: " + (known.empty() ? "none" : known) + ")");
        continue;
      }
      if (!el.interface.empty()) {
        if (!net::isValidIfName(el.interface)) {
          problem(problems, who + ": interface \"" + el.interface + "\" is not a valid interface name");
        } else if (el.interface == "eth0" || el.interface == "lo") {
          problem(problems, who + ": interface \"" + el.interface + "\" is taken in every pod");
        } else if (!ifnames.insert(el.interface).second) {
          problem(problems, who + ": interface \"" + el.interface + "\" is requested twice");
        }
      }
      if (el.element.contains("infiniband-guid")) {
        const json& g = el.element["infiniband-guid"];
        auto guid = g.is_string() ? config::parseVfGuid("infiniband-guid", g.get<std::string>())
                                  : cni::fail(cni::Errc::kInvalidConfig, "infiniband-guid must be a string");
        if (!guid) {
          problem(problems, who + ": " + guid.error().msg);
        } else if (auto [it, fresh] = guids[pod.obj.group].emplace(guid->value, who); !fresh) {
          problem(problems, who + ": infiniband-guid " + g.get<std::string>() + " is also " + it->second +
                                "'s: a GUID must be unique on the fabric, one per pod");
        }
      }
      if (el.element.contains("ips")) {
        const json& ips = el.element["ips"];
        if (!ips.is_array()) {
          problem(problems, who + ": ips is not a list");
        } else {
          for (const auto& ip : ips) {
            if (!ip.is_string() || !net::IpPrefix::parse(ip.get<std::string>(), /*allowBare=*/true)) {
              problem(problems, who + ": ips entry " + ip.dump() + " is not an address");
            }
          }
        }
      }
      if (el.element.contains("mac")) {
        const json& m = el.element["mac"];
        auto hw = m.is_string() ? net::HwAddress::parse(m.get<std::string>()) : std::nullopt;
        if (!hw || hw->length != 6) {
          problem(problems, who + ": mac " + m.dump() + " is not a 6-byte MAC address");
        }
      }
      if (!nad->resourceName.empty()) {
        ++needed[nad->resourceName];
        if (isIbcniSriov(*nad)) {
          rdmaResources.insert(nad->resourceName);
        }
      }
    }
    for (const auto& [resource, count] : needed) {
      const json* holder = nullptr;
      std::string why;
      for (const auto& c : *containers) {
        const json* req = at(c, {"resources", "requests", resource.c_str()});
        const json* lim = at(c, {"resources", "limits", resource.c_str()});
        if (!req && !lim) {
          continue;
        }
        auto r = req ? quantity(*req) : std::unexpected(std::string("missing from resources.requests"));
        auto l = lim ? quantity(*lim) : std::unexpected(std::string("missing from resources.limits"));
        if (!r || !l) {
          why = !r ? r.error() : l.error();
          continue;
        }
        if (*r < count || *l < count) {
          why = "requests " + std::to_string(*r) + " and limits " + std::to_string(*l) + " for " +
                std::to_string(count) + " attachment(s)";
          continue;
        }
        holder = &c;
      }
      if (!holder) {
        problem(problems, who + ": its networks need " + std::to_string(count) + " " + resource +
                              " in resources.requests and resources.limits of a container (the device plugin "
                              "allocates the VF, Multus passes its address to ibcni)" +
                              (why.empty() ? "" : ": " + why));
        continue;
      }
      if (rdmaResources.contains(resource)) {
        const json* add = at(*holder, {"securityContext", "capabilities", "add"});
        bool ipcLock = add && add->is_array() &&
                       std::any_of(add->begin(), add->end(), [](const json& v) { return v == "IPC_LOCK"; });
        if (!ipcLock) {
          problem(problems, who + ": the container with the " + resource +
                                " VF must add IPC_LOCK (securityContext.capabilities.add): verbs pin memory");
        }
      }
    }
  }
  return problems;
}

std::vector<std::string> checkSupportingObjects(const Catalog& catalog, Stats* stats) {
  std::vector<std::string> problems;

  // No object twice in a group.
  std::map<std::string, std::string> seen;
  auto once = [&](const Object& o) {
    const std::string key = o.group + "|" + o.kind + "|" + o.ns + "/" + o.name;
    if (auto [it, fresh] = seen.emplace(key, o.where); !fresh) {
      problem(problems, o.where + ": " + o.kind + " " + o.ns + "/" + o.name + " is also defined at " + it->second);
    }
  };
  for (const auto& n : catalog.nads) {
    once(n.obj);
  }
  for (const auto& p : catalog.pods) {
    once(p.obj);
  }
  for (const auto& o : catalog.others) {
    once(o);
  }

  // Device plugin configs.
  static const std::set<std::string> entryKeys = {"resourceName", "resourcePrefix",  "deviceType",
                                                  "selectors",    "excludeTopology", "additionalInfo"};
  static const std::set<std::string> selectorKeys = {
      "vendors",     "devices", "drivers",      "pciAddresses", "pfNames",     "rootDevices", "linkTypes",
      "ddpProfiles", "isRdma",  "needVhostNet", "vdpaType",     "acpiIndexes", "auxTypes"};
  std::map<std::string, std::set<std::string>> resources;  // group -> prefix/name
  for (const auto& cj : catalog.configJson) {
    const std::string who = cj.obj.where + " (ConfigMap " + cj.obj.name + " " + cj.key + ")";
    if (!cj.value.is_object()) {
      problem(problems, who + ": not a JSON object");
      continue;
    }
    const json* list = at(cj.value, {"resourceList"});
    if (!list) {
      continue;
    }
    if (!list->is_array() || list->empty()) {
      problem(problems, who + ": resourceList must be a non-empty list");
      continue;
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      const json& e = (*list)[i];
      const std::string p = who + " resourceList[" + std::to_string(i) + "]";
      if (!e.is_object()) {
        problem(problems, p + ": not an object");
        continue;
      }
      for (const auto& [k, v] : e.items()) {
        if (!entryKeys.contains(k)) {
          problem(problems, p + ": unknown key " + k);
        }
      }
      const std::string name = stringAt(e, {"resourceName"});
      if (name.empty()) {
        problem(problems, p + ": no resourceName");
        continue;
      }
      const std::string prefix = e.contains("resourcePrefix") ? stringAt(e, {"resourcePrefix"}) : "intel.com";
      resources[cj.obj.group].insert(prefix + "/" + name);
      if (stats) {
        ++stats->deviceConfigs;
      }
      const json* sel = at(e, {"selectors"});
      std::vector<const json*> selectors;
      if (sel && sel->is_object()) {
        selectors.push_back(sel);
      } else if (sel && sel->is_array() && !sel->empty()) {
        for (const auto& s : *sel) {
          selectors.push_back(&s);
        }
      } else {
        problem(problems, p + ": selectors must be an object or a non-empty list of objects");
        continue;
      }
      for (const json* s : selectors) {
        if (!s->is_object()) {
          problem(problems, p + ": a selector is not an object");
          continue;
        }
        for (const auto& [k, v] : s->items()) {
          if (!selectorKeys.contains(k)) {
            problem(problems, p + ": unknown selector " + k);
          } else if (k == "isRdma" || k == "needVhostNet") {
            if (!v.is_boolean()) {
              problem(problems, p + ": selector " + k + " must be true or false");
            }
          } else if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); })) {
            problem(problems, p + ": selector " + k + " must be a list of strings");
          } else if (k == "vendors" || k == "devices") {
            for (const auto& x : v) {
              const std::string id = x.get<std::string>();
              if (id.size() != 4 || !std::all_of(id.begin(), id.end(), [](char ch) {
                    return std::isxdigit(static_cast<unsigned char>(ch)) != 0;
                  })) {
                problem(problems, p + ": " + k + " entry \"" + id + "\" is not a 4-digit hex PCI id");
              }
            }
          }
        }
      }
    }
  }
  for (const auto& nad : catalog.nads) {
    auto it = resources.find(nad.obj.group);
    if (it == resources.end() || nad.resourceName.empty() || !isIbcniSriov(nad)) {
      continue;
    }
    if (!it->second.contains(nad.resourceName)) {
      problem(problems, label(nad) + ": resource " + nad.resourceName +
                            " is not defined by the device plugin config of " + nad.obj.group);
    }
  }

  // nv-ipam IPPools and Services.
  std::map<std::string, std::vector<std::pair<std::string, net::IpPrefix>>> subnets;  // group -> (who, subnet)
  for (const auto& o : catalog.others) {
    if (o.kind == "IPPool") {
      const std::string who = o.where + " (IPPool " + o.name + ")";
      static const std::set<std::string> specKeys = {"subnet",     "perNodeBlockSize", "gateway", "nodeSelector",
                                                     "exclusions", "defaultGateway",   "routes"};
      const json* spec = at(o.tree, {"spec"});
      if (!spec || !spec->is_object()) {
        problem(problems, who + ": no spec");
        continue;
      }
      for (const auto& [k, v] : spec->items()) {
        if (!specKeys.contains(k)) {
          problem(problems, who + ": unknown key spec." + k);
        }
      }
      if (stringAt(o.tree, {"metadata", "namespace"}).empty()) {
        problem(problems, who + ": metadata.namespace must be nv-ipam's namespace (it reads pools there only)");
      }
      auto subnet = net::IpPrefix::parse(stringAt(*spec, {"subnet"}));
      if (!subnet || subnet->network() != *subnet) {
        problem(problems, who + ": spec.subnet is not a network CIDR");
        continue;
      }
      subnets[o.group].emplace_back(who, *subnet);
      const json* block = at(*spec, {"perNodeBlockSize"});
      const int hostBits = (subnet->address.isV4() ? 32 : 128) - subnet->prefixLen;
      if (!block || !block->is_number_integer() || block->get<std::int64_t>() < 2 ||
          (hostBits < 62 && block->get<std::int64_t>() > (std::int64_t{1} << hostBits) - 2)) {
        problem(problems, who + ": spec.perNodeBlockSize must be an integer from 2 to the subnet's size");
      }
      if (spec->contains("gateway")) {
        auto gw = net::IpAddress::parse(stringAt(*spec, {"gateway"}));
        if (!gw || !subnet->contains(*gw)) {
          problem(problems, who + ": spec.gateway is not an address of spec.subnet");
        }
      }
    } else if (o.kind == "Service") {
      const std::string who = o.where + " (Service " + o.name + ")";
      const json* sel = at(o.tree, {"spec", "selector"});
      if (!sel || !sel->is_object() || sel->empty()) {
        continue;
      }
      bool matched = std::any_of(catalog.pods.begin(), catalog.pods.end(), [&](const Pod& p) {
        if (p.obj.group != o.group || p.obj.ns != o.ns) {
          return false;
        }
        const json* labels = at(p.obj.tree, {"metadata", "labels"});
        if (!labels || !labels->is_object()) {
          return false;
        }
        for (const auto& [k, v] : sel->items()) {
          if (!labels->contains(k) || (*labels)[k] != v) {
            return false;
          }
        }
        return true;
      });
      if (!matched) {
        problem(problems, who + ": spec.selector " + sel->dump() + " selects no pod of " + o.group);
      }
    }
  }

  // The subnets of one group's networks must not overlap (a pod may attach several), but where
  // they draw from one cluster pool (ipam.cluster.pool: NADs naming one pool share it).
  std::map<std::string, std::string> poolOf;  // label -> cluster pool
  for (const auto& nad : catalog.nads) {
    json cfg = json::parse(nad.config, nullptr, false);
    if (!cfg.is_object()) {
      continue;
    }
    for (const auto& plugin : pluginsOf(cfg)) {
      const json* ipamObj = at(plugin, {"ipam"});
      if (!ipamObj || !ipamObj->is_object()) {
        continue;
      }
      std::vector<std::string> texts;
      if (const json* ranges = at(*ipamObj, {"ranges"}); ranges && ranges->is_array()) {
        for (const auto& set : *ranges) {
          for (const auto& r : set.is_array() ? set : json::array()) {
            texts.push_back(stringAt(r, {"subnet"}));
          }
        }
      }
      for (const char* k : {"subnet", "range"}) {
        if (!stringAt(*ipamObj, {k}).empty()) {
          texts.push_back(stringAt(*ipamObj, {k}));
        }
      }
      for (const auto& t : texts) {
        if (auto p = net::IpPrefix::parse(t)) {
          subnets[nad.obj.group].emplace_back(label(nad), p->network());
        }
      }
      if (const std::string pool = stringAt(*ipamObj, {"cluster", "pool"}); !pool.empty()) {
        poolOf[label(nad)] = pool;
      }
    }
  }
  for (const auto& [group, list] : subnets) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      for (std::size_t j = i + 1; j < list.size(); ++j) {
        const auto& [a, pa] = list[i];
        const auto& [b, pb] = list[j];
        const bool onePool = poolOf.contains(a) && poolOf.contains(b) && poolOf.at(a) == poolOf.at(b);
        if (a != b && !onePool && (pa.contains(pb.address) || pb.contains(pa.address))) {
          problem(problems, a + ": subnet " + pa.toString() + " overlaps " + pb.toString() + " of " + b);
        }
      }
    }
  }
  return problems;
}

}  // namespace ibcni::testing::examples
