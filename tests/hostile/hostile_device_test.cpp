// SPDX-License-Identifier: Apache-2.0
// Devices the node needs, and strings no field should hold. The netdev that carries the host's
// default route is refused (7) whatever the configuration says: moving it cuts the node off. Very
// long strings in any string field are refused with a message that stays bounded; bytes that are
// not UTF-8 make stdin undecodable (6) with a message that stays valid JSON.
#include <gtest/gtest.h>

#include "hostile/hostile.h"

namespace ibcni::hostile {
namespace {

using conformance::ip;

TEST(HostileDevice, TheNodesPrimaryInterfaceIsNeverMoved) {
  HOSTILE_SCENE(s);
  // The "host" namespace's uplink: the VF stand-in carries an address and the default route.
  ip(s.w.host(), {"link", "set", "dev", s.vf, "up"});
  ip(s.w.host(), {"link", "set", "dev", s.w.peerOf(s.vf), "up"});
  ip(s.w.host(), {"addr", "add", "10.201.0.2/24", "dev", s.vf});
  ip(s.w.host(), {"route", "add", "default", "via", "10.201.0.1", "dev", s.vf});
  const NodeState before = capture(s.w, {s.pod});
  for (const std::string version : {"0.4.0", "1.1.0"}) {
    SCOPED_TRACE(version);
    expectRefused(s.w.ibcni(World::env("ADD", "c1", *s.pod), s.w.conf(version, s.vf, s.w.ipam())), 7,
                  {"device = \"" + s.vf + "\"", "default route", "10.201.0.1", "cut the node off"});
  }
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_TRUE(s.w.noAllocations());
  EXPECT_TRUE(s.w.records().empty());

  // The positive control: without the default route, the same device attaches.
  ip(s.w.host(), {"route", "del", "default", "via", "10.201.0.1", "dev", s.vf});
  Exec add = s.w.ibcni(World::env("ADD", "c1", *s.pod), s.w.conf("1.1.0", s.vf, s.w.ipam()));
  ASSERT_EQ(add.status, 0) << add.describe();
  EXPECT_EQ(s.w.ibcni(World::env("DEL", "c1", *s.pod), s.w.conf("1.1.0", s.vf, s.w.ipam())).status, 0);
}

// A megabyte in any string field: error 7 (or 1 for cniVersion) naming the field, the value cut
// with its length, the message bounded.
TEST(HostileDevice, VeryLongStringsGiveBoundedMessages) {
  HOSTILE_SCENE(s);
  const std::string huge(1 << 20, 'x');
  const std::string shown = "bytes)";  // "... (1048576 bytes)", longer for the paths
  struct Field {
    std::string path;  ///< as the message names it
    std::function<void(json&)> set;
    unsigned code = 7;
    bool showsLength = true;  ///< JSON values (not strings) are shown cut without their length
  };
  const std::vector<Field> fields = {
      {"name", [&](json& c) { c["name"] = huge; }},
      {"mode", [&](json& c) { c["mode"] = huge; }},
      {"master",
       [&](json& c) {
         c["mode"] = "ipoib";
         c["master"] = huge;
       }},
      {"rdmaDevice",
       [&](json& c) {
         c["mode"] = "ipoib";
         c["rdmaDevice"] = huge;
       }},
      {"ipoibMode",
       [&](json& c) {
         c["mode"] = "ipoib";
         c["master"] = "ib0";
         c["ipoibMode"] = huge;
       }},
      {"deviceID",
       [&](json& c) {
         c.erase("device");
         c["deviceID"] = huge;
       }},
      {"device", [&](json& c) { c["device"] = huge; }},
      {"pkey", [&](json& c) { c["pkey"] = huge; }},
      {"linkState", [&](json& c) { c["linkState"] = huge; }},
      {"logLevel", [&](json& c) { c["logLevel"] = huge; }},
      {"logFile", [&](json& c) { c["logFile"] = "/" + huge + ".log"; }},
      {"stateDir", [&](json& c) { c["stateDir"] = "/" + huge; }},
      {"ipam.type",
       [&](json& c) {
         c["ipam"] = {{"type", huge}};
       }},
      {"verbsCheck.mode",
       [&](json& c) {
         c["verbsCheck"] = {{"mode", huge}};
       }},
      {"runtimeConfig.mac",
       [&](json& c) {
         c["runtimeConfig"] = {{"mac", huge}};
       }},
      {"runtimeConfig.infinibandGUID",
       [&](json& c) {
         c["runtimeConfig"] = {{"infinibandGUID", huge}};
       }},
      {"args.cni.guid",
       [&](json& c) {
         c["args"] = {{"cni", {{"guid", huge}}}};
       }},
      {"cniVersion", [&](json& c) { c["cniVersion"] = huge; }, 1, false},
  };
  const NodeState before = capture(s.w, {s.pod});
  for (const auto& f : fields) {
    SCOPED_TRACE(f.path);
    json c = s.w.conf("1.1.0", s.vf, s.w.ipam());
    f.set(c);
    for (const std::string verb : {"ADD", "DEL"}) {
      Exec r = s.w.ibcni(World::env(verb, "c1", *s.pod), c);
      std::vector<std::string> words = {f.path};
      if (f.showsLength) {
        words.push_back(shown);
      }
      if (f.path == "cniVersion") {
        words = {};  // "incompatible CNI versions": the value is in details
      }
      expectRefused(r, f.code, words);
    }
  }
  // ibcni-ipam's own fields.
  for (const std::string field : {"subnet", "gateway", "dataDir", "resolvConf", "rangeStart"}) {
    SCOPED_TRACE("ipam." + field);
    json ic = s.w.ipamConf("1.1.0");
    ic["ipam"][field] = field == "dataDir" ? "/" + huge : huge;
    expectRefused(s.w.ipamPlugin(World::env("ADD", "c1", *s.pod), ic), 7, {"ipam"});
  }
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_TRUE(s.w.noAllocations());
}

// Bytes that are not UTF-8 (and control characters) in a JSON string: stdin is not JSON (6), the
// message says where, and the error object is valid JSON whatever the bytes were.
TEST(HostileDevice, NonUtf8ConfigurationIsCode6WithValidJson) {
  HOSTILE_SCENE(s);
  const NodeState before = capture(s.w, {s.pod});
  const std::string base = s.w.conf("1.1.0", s.vf, s.w.ipam()).dump();
  for (const std::string& raw : {std::string("\xff\xfe"), std::string("a\x01z"), std::string("caf\xc3"),
                                 std::string("\xed\xa0\x80"), std::string(100000, '\xff')}) {
    for (const std::string field : {"name", "device", "mode", "logLevel", "stateDir"}) {
      SCOPED_TRACE(field);
      const std::string key = "\"" + field + "\":";
      std::string text = base;
      auto at = text.find(key);
      if (at == std::string::npos) {
        text.insert(1, key + "\"" + raw + "\",");
      } else {
        auto end = text.find('"', at + key.size() + 1);
        text.replace(at + key.size() + 1, end - (at + key.size() + 1), raw);
      }
      for (const std::string verb : {"ADD", "DEL"}) {
        Exec r = s.w.ibcniRaw(World::env(verb, "c1", *s.pod), text);
        expectRefused(r, 6, {"not valid JSON"});
        Exec i = s.w.ipamRaw(World::env(verb, "c1", *s.pod), text);
        expectRefused(i, 6, {});
      }
    }
  }
  EXPECT_EQ(capture(s.w, {s.pod}), before);
  EXPECT_TRUE(s.w.noAllocations());
}

}  // namespace
}  // namespace ibcni::hostile
