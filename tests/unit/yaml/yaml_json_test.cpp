// SPDX-License-Identifier: Apache-2.0
// lib/yaml: YAML text to JSON text (libyaml): the shapes a kubeconfig uses, scalar resolution,
// anchors and aliases, and errors with their position.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "ibcni/yaml/yaml_json.h"

namespace ibcni::yaml {
namespace {

using nlohmann::json;

json convert(const std::string& text) {
  const auto r = yamlToJson(text);
  EXPECT_TRUE(r) << (r ? "" : r.error().describe());
  return r ? json::parse(*r) : json();
}

TEST(YamlJson, MappingsSequencesAndScalars) {
  EXPECT_EQ(convert("a: 1\nb: [x, 'y', \"2\"]\nc:\n  - {d: true, e: ~}\n  - -1.5\nf: 0x1f\ng: 0o17\nh: .inf\ni:\n"),
            json::parse(R"({"a":1,"b":["x","y","2"],"c":[{"d":true,"e":null},-1.5],"f":31,"g":15,"h":null,"i":null})"));
  EXPECT_EQ(convert("s: !!str 12\nt: yes\nu: 99999999999999999999999\nv: |\n  line1\n  line2\n"),
            json::parse(R"({"s":"12","t":"yes","u":"99999999999999999999999","v":"line1\nline2\n"})"));
  EXPECT_EQ(convert(""), json(nullptr));
  EXPECT_EQ(convert("---\nfirst: 1\n---\nsecond: 2\n"), json::parse(R"({"first":1})"));
}

TEST(YamlJson, AnchorsAndAliases) {
  EXPECT_EQ(convert("base: &b {x: 1}\nother: *b\n"), json::parse(R"({"base":{"x":1},"other":{"x":1}})"));
}

TEST(YamlJson, ErrorsCarryTheirPosition) {
  const auto r = yamlToJson("a: [1, 2\nb: c\n");
  ASSERT_FALSE(r);
  EXPECT_GT(r.error().line, 0U);
  EXPECT_NE(r.error().describe().find("line "), std::string::npos);
  EXPECT_FALSE(yamlToJson("a: *nowhere\n"));
  EXPECT_FALSE(yamlToJson("? [a, b]\n: c\n")) << "a sequence as a key";
  // Expansion bomb: refused, not a hang.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) {
      bomb += std::string(i ? ", *" : "*") + static_cast<char>(c - 1);
    }
    bomb += "]\n";
  }
  const auto b = yamlToJson(bomb);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("nodes"), std::string::npos) << b.error().describe();
}

// Streams of Kubernetes manifests (the example test's reader): every document, each with the line
// its content starts on; comment-only and empty documents left out.
TEST(YamlDocuments, EveryDocumentWithTheLineItStartsOn) {
  auto docs = yamlDocumentsToJson("# header\n---\na: 1\n---   # two\n\n# only a comment\n---\n\n  b: [2]\n...\n---\n");
  ASSERT_TRUE(docs) << docs.error().describe();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[0].line, 3u);
  EXPECT_EQ(json::parse((*docs)[0].json), json::parse(R"({"a":1})"));
  EXPECT_EQ((*docs)[1].line, 9u);
  EXPECT_EQ(json::parse((*docs)[1].json), json::parse(R"({"b":[2]})"));
  auto one = yamlDocumentsToJson("kind: Pod\nmetadata:\n  name: p\n");
  ASSERT_TRUE(one);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(one->front().line, 1u);
  // Anchors are a document's own.
  EXPECT_FALSE(yamlDocumentsToJson("a: &x 1\n---\nb: *x\n"));
  auto bad = yamlDocumentsToJson("a: 1\n---\nb: 2\n  c: 3\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().line, 4u) << bad.error().describe();
  EXPECT_TRUE(yamlDocumentsToJson("")->empty());
}

// Read as Kubernetes reads it: what YAML 1.1 (go-yaml) reads otherwise is refused, quoted is fine.
TEST(YamlDocuments, AsKubernetesDoesRefusesWhatYaml11ReadsOtherwise) {
  const auto strict = [](const std::string& text) { return yamlDocumentsToJson(text, YamlReading::kAsKubernetesDoes); };
  for (const char* text : {"a: yes\n", "a: No\n", "a: on\n", "a: OFF\n", "y: 1\n", "mode: 0755\n", "n: 1_000\n",
                           "t: 1:20\n", "a: 1\na: 2\n"}) {
    auto r = strict(text);
    ASSERT_FALSE(r) << text << " was accepted";
    EXPECT_EQ(r.error().line, std::string(text).find("a: 2") != std::string::npos ? 2u : 1u) << text;
    EXPECT_TRUE(r.error().message.find("quote it") != std::string::npos ||
                r.error().message.find("duplicate key a") != std::string::npos)
        << r.error().describe();
  }
  for (const char* text : {"a: \"yes\"\n", "mode: '0755'\n", "a: true\n", "b: 10\n", "c: 0.5\n", "d: 0x7fff\n",
                           "e: fd00::1\n", "f: yesterday\n"}) {
    EXPECT_TRUE(strict(text)) << text;
  }
  EXPECT_TRUE(yamlDocumentsToJson("a: yes\na: 2\n")) << "plain reading keeps YAML 1.2's rules and the last key";
}

}  // namespace
}  // namespace ibcni::yaml
