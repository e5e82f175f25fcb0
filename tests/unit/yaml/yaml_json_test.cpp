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

}  // namespace
}  // namespace ibcni::yaml
