// SPDX-License-Identifier: Apache-2.0
// The test's YAML reader: what it reads, and that it refuses what it does not understand instead of
// guessing.
#include "yaml_lite.h"

#include <gtest/gtest.h>

namespace ibcni::testing::yamlite {
namespace {

using nlohmann::json;

json parsed(std::string_view text) {
  auto r = parseOne(text);
  EXPECT_TRUE(r.has_value()) << r.error();
  return r.value_or(json());
}

std::string refusal(std::string_view text) {
  auto r = parseOne(text);
  EXPECT_FALSE(r.has_value()) << "accepted: " << r->dump();
  return r ? std::string() : r.error();
}

TEST(YamlLite, ReadsTheShapesOfKubernetesManifests) {
  json j = parsed(R"(# a comment
apiVersion: v1
kind: Pod
metadata:
  name: p   # trailing comment
  annotations:
    a/b: '[{"name": "x", "it''s": "#not a comment"}]'
    c: "tab\there \u00e9"
spec:
  containers:
  - name: app
    command: ["sh", "-c"]
    args:
      - |
        echo one
          indented
        echo two

    resources: {requests: {"nvidia.com/x": "1"}, limits: {nvidia.com/x: 1}}
    ports:
      - containerPort: 18515
        protocol: TCP
  nodeSelector:
    kubernetes.io/hostname: node-a
  enabled: true
  ratio: 0.5
  nothing: ~
  empty:
)");
  EXPECT_EQ(j["metadata"]["name"], "p");
  EXPECT_EQ(j["metadata"]["annotations"]["a/b"], R"([{"name": "x", "it's": "#not a comment"}])");
  EXPECT_EQ(j["metadata"]["annotations"]["c"], "tab\there \xc3\xa9");
  const json& c = j["spec"]["containers"][0];
  EXPECT_EQ(c["name"], "app");
  EXPECT_EQ(c["command"], json::array({"sh", "-c"}));
  EXPECT_EQ(c["args"][0], "echo one\n  indented\necho two\n");
  EXPECT_EQ(c["resources"]["requests"]["nvidia.com/x"], "1");
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/x"], 1);
  EXPECT_EQ(c["ports"][0]["containerPort"], 18515);
  EXPECT_EQ(j["spec"]["nodeSelector"]["kubernetes.io/hostname"], "node-a");
  EXPECT_EQ(j["spec"]["enabled"], true);
  EXPECT_EQ(j["spec"]["ratio"], 0.5);
  EXPECT_TRUE(j["spec"]["nothing"].is_null());
  EXPECT_TRUE(j["spec"]["empty"].is_null());
}

TEST(YamlLite, BlockScalarChompingAndFolding) {
  json j = parsed(
      "clip: |\n  a\n  b\n\nstrip: |-\n  a\n\nkeep: |+\n  a\n\n\nfolded: >\n  a\n  b\n\n  c\n"
      "indicator: |2\n    x\n  y\nlast: 1\n");
  EXPECT_EQ(j["clip"], "a\nb\n");
  EXPECT_EQ(j["strip"], "a");
  EXPECT_EQ(j["keep"], "a\n\n\n");
  EXPECT_EQ(j["folded"], "a b\nc\n");
  EXPECT_EQ(j["indicator"], "  x\ny\n");
  EXPECT_EQ(j["last"], 1);
}

TEST(YamlLite, SplitsDocumentsAndKeepsLineNumbers) {
  auto docs = splitDocuments("# header\n---\na: 1\n---   # two\n\n# only a comment\n---\nb: 2\n...\n", 10);
  ASSERT_TRUE(docs.has_value()) << docs.error();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[0].firstLine, 12);
  EXPECT_EQ((*docs)[1].firstLine, 17);
  auto bad = parse(Document{17, "b: 2\n  c: 3\n"});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().find("line 18:"), std::string::npos) << bad.error();
}

TEST(YamlLite, RefusesWhatItDoesNotUnderstand) {
  EXPECT_NE(refusal("a: &x 1\nb: *x\n").find("anchors"), std::string::npos);
  EXPECT_NE(refusal("a: !!str 1\n").find("tags"), std::string::npos);
  EXPECT_NE(refusal("a:\n\tb: 1\n").find("tab"), std::string::npos);
  EXPECT_NE(refusal("a: yes\n").find("YAML 1.1"), std::string::npos);
  EXPECT_NE(refusal("mode: 0755\n").find("octal"), std::string::npos);
  EXPECT_NE(refusal("pkey: 0x7fff\n").find("quote it"), std::string::npos);
  EXPECT_NE(refusal("a: 1\na: 2\n").find("duplicate key"), std::string::npos);
  EXPECT_NE(refusal("a: one\n  two\n").find("spanning lines"), std::string::npos);
  EXPECT_NE(refusal("a: \"open\n").find("unterminated"), std::string::npos);
  EXPECT_NE(refusal("a: [1,\n  2]\n").find("not closed"), std::string::npos);
  EXPECT_NE(refusal("a: b: c\n").find("quote it"), std::string::npos);
  EXPECT_NE(refusal("a:\n  b: 1\n c: 2\n").find("line 3"), std::string::npos);
  EXPECT_NE(refusal("? complex\n: key\n").find("complex"), std::string::npos);
  EXPECT_NE(refusal("a: |\n    x\n   y\n").find("bad indentation"), std::string::npos);
  EXPECT_FALSE(splitDocuments("%YAML 1.2\n---\na: 1\n").has_value());
  EXPECT_FALSE(splitDocuments("--- {a: 1}\n").has_value());
}

}  // namespace
}  // namespace ibcni::testing::yamlite
