// SPDX-License-Identifier: Apache-2.0
// The validator must be able to fail: each malformed document here must be rejected, for the
// reason given, and the well-formed ones accepted. No plugin is run.
#include <gtest/gtest.h>

#include "conformance/result_schema.h"

namespace ibcni::conformance {
namespace {

using nlohmann::json;

const std::string kNetns = "/var/run/netns/pod1";

/// A well-formed interface plugin result of `version`: one pod interface, IPv4 and IPv6 addresses,
/// a route and DNS.
json goodResult(const std::string& version) {
  const bool v0 = version < "1.0.0";
  json ip4 = {{"address", "10.1.2.3/24"}, {"gateway", "10.1.2.1"}, {"interface", 0}};
  json ip6 = {{"address", "fd00::3/64"}, {"interface", 0}};
  if (v0) {
    ip4["version"] = "4";
    ip6["version"] = "6";
  }
  json iface = {{"name", "net1"}, {"mac", "0a:58:0a:01:02:03"}, {"sandbox", kNetns}};
  json route = {{"dst", "10.99.0.0/16"}, {"gw", "10.1.2.1"}};
  if (version == "1.1.0") {
    iface["mtu"] = 4092;
    iface["pciID"] = "0000:af:06.1";
    iface["socketPath"] = "/run/x.sock";
    route["mtu"] = 1400;
    route["advmss"] = 1360;
    route["priority"] = 100;
    route["table"] = 10;
    route["scope"] = 0;
  }
  return {{"cniVersion", version},
          {"interfaces", json::array({iface})},
          {"ips", json::array({ip4, ip6})},
          {"routes", json::array({route})},
          {"dns",
           {{"nameservers", {"10.0.0.10"}},
            {"domain", "example.org"},
            {"search", {"a.example.org"}},
            {"options", {"ndots:2"}}}}};
}

ResultContext pluginCtx(const std::string& version) {
  return ResultContext{version, ResultKind::kPlugin, std::string("net1"), kNetns};
}

/// Expects `r` to be rejected with a problem that mentions `needle`.
void expectRejected(const json& r, const ResultContext& ctx, const std::string& needle) {
  auto problems = validateAddResult(r, ctx);
  ASSERT_FALSE(problems.empty()) << "accepted: " << r.dump();
  bool named = false;
  for (const auto& p : problems) {
    named = named || p.find(needle) != std::string::npos;
  }
  EXPECT_TRUE(named) << "no problem mentions \"" << needle << "\":\n" << describeProblems(problems) << r.dump();
}

class ResultSchemaPerVersion : public ::testing::TestWithParam<std::string> {};

TEST_P(ResultSchemaPerVersion, AcceptsAWellFormedResult) {
  auto problems = validateAddResult(goodResult(GetParam()), pluginCtx(GetParam()));
  EXPECT_TRUE(problems.empty()) << describeProblems(problems);
}

TEST_P(ResultSchemaPerVersion, AcceptsMinimalResults) {
  const std::string v = GetParam();
  // An interface without addresses (no IPAM), and an interface without mac (a tun device).
  json noIps = {{"cniVersion", v}, {"interfaces", {{{"name", "net1"}, {"sandbox", kNetns}}}}};
  EXPECT_TRUE(validateAddResult(noIps, pluginCtx(v)).empty())
      << describeProblems(validateAddResult(noIps, pluginCtx(v)));
  json dnsEmpty = noIps;
  dnsEmpty["dns"] = json::object();  // what Go 0.x results print
  EXPECT_TRUE(validateAddResult(dnsEmpty, pluginCtx(v)).empty());
}

TEST_P(ResultSchemaPerVersion, AcceptsIpoibHardwareAddress) {
  json r = goodResult(GetParam());
  r["interfaces"][0]["mac"] = "80:00:00:48:fe:80:00:00:00:00:00:00:02:00:00:00:00:00:00:01";
  EXPECT_TRUE(validateAddResult(r, pluginCtx(GetParam())).empty());
}

TEST_P(ResultSchemaPerVersion, RejectsTopLevelProblems) {
  const std::string v = GetParam();
  json r = goodResult(v);
  r.erase("cniVersion");
  expectRejected(r, pluginCtx(v), "cniVersion: required");

  r = goodResult(v);
  r["cniVersion"] = v == "1.0.0" ? "0.4.0" : "1.0.0";
  expectRejected(r, pluginCtx(v), "the request's");

  r = goodResult(v);
  r["cniVersion"] = 1;
  expectRejected(r, pluginCtx(v), "must be a string");

  r = goodResult(v);
  r["guid"] = "c2:11:22:33:44:55:66:77";
  expectRejected(r, pluginCtx(v), "result.guid");

  expectRejected(json::array({goodResult(v)}), pluginCtx(v), "JSON object");
  expectRejected(json("text"), pluginCtx(v), "JSON object");
}

TEST_P(ResultSchemaPerVersion, RejectsInterfaceProblems) {
  const std::string v = GetParam();
  json r = goodResult(v);
  r["interfaces"][0].erase("name");
  expectRejected(r, pluginCtx(v), "name: required");

  r = goodResult(v);
  r["interfaces"][0]["name"] = "sixteen-chars-xx";
  expectRejected(r, pluginCtx(v), "not an interface name");

  for (const std::string bad :
       {"0a:58:0a:01:02", "0a:58:0a:01:02:03:04", "0a-58-0a-01-02-03", "zz:58:0a:01:02:03", "0a:58:0a:01:02:3", ""}) {
    SCOPED_TRACE("mac " + bad);
    r = goodResult(v);
    r["interfaces"][0]["mac"] = bad;
    expectRejected(r, pluginCtx(v), ".mac");
  }

  r = goodResult(v);
  r["interfaces"][0]["sandbox"] = "var/run/netns/pod1";
  expectRejected(r, pluginCtx(v), "absolute path");

  r = goodResult(v);
  r["interfaces"][0]["sandbox"] = "/var/run/netns/other";
  expectRejected(r, pluginCtx(v), "CNI_NETNS");

  r = goodResult(v);
  r["interfaces"][0].erase("sandbox");
  expectRejected(r, pluginCtx(v), "CNI_NETNS");

  r = goodResult(v);
  r["interfaces"][0]["name"] = "net9";
  expectRejected(r, pluginCtx(v), "no interface named CNI_IFNAME=net1");

  r = goodResult(v);
  r.erase("interfaces");
  expectRejected(r, pluginCtx(v), "interfaces: missing");

  r = goodResult(v);
  r["interfaces"] = {{"name", "net1"}};
  expectRejected(r, pluginCtx(v), "interfaces: must be a list");

  r = goodResult(v);
  r["interfaces"][0]["vlan"] = 5;
  expectRejected(r, pluginCtx(v), "interfaces[0].vlan");
}

TEST_P(ResultSchemaPerVersion, RejectsIpProblems) {
  const std::string v = GetParam();
  json r = goodResult(v);
  r["ips"][0]["address"] = "10.1.2.3";
  expectRejected(r, pluginCtx(v), "CIDR");

  r = goodResult(v);
  r["ips"][0]["address"] = "10.1.2.3/33";
  expectRejected(r, pluginCtx(v), "CIDR");

  r = goodResult(v);
  r["ips"][1]["address"] = "fd00::3/129";
  expectRejected(r, pluginCtx(v), "CIDR");

  r = goodResult(v);
  r["ips"][0].erase("address");
  expectRejected(r, pluginCtx(v), "address: required");

  r = goodResult(v);
  r["ips"][0]["gateway"] = "10.1.2.300";
  expectRejected(r, pluginCtx(v), "not an IP address");

  r = goodResult(v);
  r["ips"][0]["gateway"] = "fd00::1";
  expectRejected(r, pluginCtx(v), "family");

  r = goodResult(v);
  r["ips"][0]["interface"] = 1;
  expectRejected(r, pluginCtx(v), "not an index into interfaces");

  r = goodResult(v);
  r["ips"][0]["interface"] = -1;
  expectRejected(r, pluginCtx(v), "unsigned index");

  r = goodResult(v);
  r["ips"][0]["interface"] = "0";
  expectRejected(r, pluginCtx(v), "unsigned index");

  r = goodResult(v);
  r["ips"][0].erase("interface");
  expectRejected(r, pluginCtx(v), "which interface");

  // An address pointing at a host-side interface (no sandbox) is not on the container interface.
  r = goodResult(v);
  r["interfaces"].push_back({{"name", "veth1234"}, {"mac", "0a:58:0a:01:02:04"}});
  r["ips"][0]["interface"] = 1;
  expectRejected(r, pluginCtx(v), "without a sandbox");
}

TEST_P(ResultSchemaPerVersion, IpVersionFieldFollowsTheSpecVersion) {
  const std::string v = GetParam();
  json r = goodResult(v);
  if (v < "1.0.0") {
    r["ips"][0].erase("version");
    expectRejected(r, pluginCtx(v), "version: required");
    r = goodResult(v);
    r["ips"][0]["version"] = "6";
    expectRejected(r, pluginCtx(v), "IPv4");
    r = goodResult(v);
    r["ips"][0]["version"] = 4;
    expectRejected(r, pluginCtx(v), "must be a string");
    r = goodResult(v);
    r["ips"][0]["version"] = "5";
    expectRejected(r, pluginCtx(v), "\"4\" or \"6\"");
  } else {
    r["ips"][0]["version"] = "4";
    expectRejected(r, pluginCtx(v), "ips[0].version");
  }
}

TEST_P(ResultSchemaPerVersion, V11FieldsOnlyIn110) {
  const std::string v = GetParam();
  if (v == "1.1.0") {
    json r = goodResult(v);
    r["interfaces"][0]["mtu"] = "4092";
    expectRejected(r, pluginCtx(v), "interfaces[0].mtu");
    r = goodResult(v);
    r["interfaces"][0]["mtu"] = 0;
    expectRejected(r, pluginCtx(v), "interfaces[0].mtu");
    r = goodResult(v);
    r["interfaces"][0]["pciID"] = "af:06.1";
    expectRejected(r, pluginCtx(v), "PCI address");
    r = goodResult(v);
    r["interfaces"][0]["socketPath"] = 3;
    expectRejected(r, pluginCtx(v), "socketPath");
    for (const char* key : {"mtu", "advmss", "priority", "table", "scope"}) {
      SCOPED_TRACE(key);
      r = goodResult(v);
      r["routes"][0][key] = -1;
      expectRejected(r, pluginCtx(v), std::string("routes[0].") + key);
      r["routes"][0][key] = "1";
      expectRejected(r, pluginCtx(v), std::string("routes[0].") + key);
    }
    return;
  }
  for (const char* key : {"mtu", "socketPath", "pciID"}) {
    SCOPED_TRACE(key);
    json r = goodResult(v);
    r["interfaces"][0][key] = key == std::string("mtu") ? json(4092) : json("0000:af:06.1");
    expectRejected(r, pluginCtx(v), std::string("interfaces[0].") + key);
  }
  for (const char* key : {"mtu", "advmss", "priority", "table", "scope"}) {
    SCOPED_TRACE(key);
    json r = goodResult(v);
    r["routes"][0][key] = 10;
    expectRejected(r, pluginCtx(v), std::string("routes[0].") + key);
  }
}

TEST_P(ResultSchemaPerVersion, RejectsRouteAndDnsProblems) {
  const std::string v = GetParam();
  json r = goodResult(v);
  r["routes"][0]["dst"] = "10.99.0.0";
  expectRejected(r, pluginCtx(v), "routes[0].dst");
  r = goodResult(v);
  r["routes"][0].erase("dst");
  expectRejected(r, pluginCtx(v), "dst: required");
  r = goodResult(v);
  r["routes"][0]["gw"] = "gateway";
  expectRejected(r, pluginCtx(v), "routes[0].gw");
  r = goodResult(v);
  r["routes"][0]["gw"] = "fd00::1";
  expectRejected(r, pluginCtx(v), "family");
  r = goodResult(v);
  r["routes"] = {{"dst", "0.0.0.0/0"}};
  expectRejected(r, pluginCtx(v), "routes: must be a list");

  r = goodResult(v);
  r["dns"]["nameservers"] = "10.0.0.10";
  expectRejected(r, pluginCtx(v), "dns.nameservers");
  r = goodResult(v);
  r["dns"]["nameservers"] = {"ns1.example.org"};
  expectRejected(r, pluginCtx(v), "not an IP address");
  r = goodResult(v);
  r["dns"]["search"] = {1};
  expectRejected(r, pluginCtx(v), "dns.search");
  r = goodResult(v);
  r["dns"]["domain"] = json::array();
  expectRejected(r, pluginCtx(v), "dns.domain");
  r = goodResult(v);
  r["dns"]["servers"] = {"10.0.0.10"};
  expectRejected(r, pluginCtx(v), "dns.servers");
  r = goodResult(v);
  r["dns"] = json::array();
  expectRejected(r, pluginCtx(v), "dns: must be an object");
}

TEST_P(ResultSchemaPerVersion, IpamResultsAreAbbreviated) {
  const std::string v = GetParam();
  const ResultContext ipamCtx{v, ResultKind::kIpam, std::nullopt, std::nullopt};
  json r = goodResult(v);
  r.erase("interfaces");
  for (auto& ip : r["ips"]) {
    ip.erase("interface");
  }
  EXPECT_TRUE(validateAddResult(r, ipamCtx).empty()) << describeProblems(validateAddResult(r, ipamCtx));

  json withIndex = r;
  withIndex["ips"][0]["interface"] = 0;
  expectRejected(withIndex, ipamCtx, "IPAM");
  expectRejected(goodResult(v), ipamCtx, "abbreviated");
}

INSTANTIATE_TEST_SUITE_P(Versions, ResultSchemaPerVersion,
                         ::testing::Values("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = "v" + p.param;
                           for (auto& c : n) {
                             c = c == '.' ? '_' : c;
                           }
                           return n;
                         });

TEST(ResultSchema, RejectsVersionsWithoutThisFormat) {
  json r = goodResult("0.4.0");
  r["cniVersion"] = "0.2.0";
  expectRejected(r, pluginCtx("0.2.0"), "not a version with this result format");
}

TEST(ResultSchema, CidrAndFamilyHelpers) {
  EXPECT_TRUE(isCidr("10.0.0.0/8"));
  EXPECT_TRUE(isCidr("0.0.0.0/0"));
  EXPECT_TRUE(isCidr("fd00::/8"));
  EXPECT_TRUE(isCidr("::/0"));
  for (const char* bad : {"10.0.0.0", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/08", "10.0.0/8", "fd00::/129", "/8",
                          "10.0.0.0/8/8", "10.0.0.0/a", " 10.0.0.0/8"}) {
    EXPECT_FALSE(isCidr(bad)) << bad;
  }
  EXPECT_EQ(ipFamily("10.1.2.3"), 4);
  EXPECT_EQ(ipFamily("fe80::1"), 6);
  EXPECT_EQ(ipFamily("10.1.2.3/24"), 0);
}

TEST(ErrorSchema, AcceptsWellFormedErrors) {
  for (const json& e : {json{{"code", 7}, {"msg", "invalid config"}},
                        json{{"cniVersion", "1.1.0"}, {"code", 4}, {"msg", "missing"}, {"details", "CNI_IFNAME"}},
                        json{{"code", 11}, {"msg", "busy"}}, json{{"code", 50}, {"msg", "not ready"}},
                        json{{"code", 51}, {"msg", "degraded"}}, json{{"code", 8}, {"msg", "bad netns"}},
                        json{{"code", 100}, {"msg", "no device"}}, json{{"code", 999}, {"msg", "internal"}}}) {
    EXPECT_TRUE(validateError(e).empty()) << e.dump() << "\n" << describeProblems(validateError(e));
  }
}

TEST(ErrorSchema, RejectsMalformedErrors) {
  const std::vector<std::pair<json, std::string>> cases = {
      {json{{"msg", "no code"}}, "code: required"},
      {json{{"code", "7"}, {"msg", "string code"}}, "unsigned integer"},
      {json{{"code", -7}, {"msg", "negative"}}, "unsigned integer"},
      {json{{"code", 7.5}, {"msg", "fraction"}}, "unsigned integer"},
      {json{{"code", 0}, {"msg", "zero"}}, "0 is success"},
      {json{{"code", 42}, {"msg", "invented"}}, "reserved"},
      {json{{"code", 9}, {"msg", "invented"}}, "reserved"},
      {json{{"code", 99}, {"msg", "invented"}}, "reserved"},
      {json{{"code", 7}}, "msg: required"},
      {json{{"code", 7}, {"msg", ""}}, "must not be empty"},
      {json{{"code", 7}, {"msg", 7}}, "msg: must be a string"},
      {json{{"code", 7}, {"msg", "x"}, {"details", json{{"errno", 2}}}}, "details: must be a string"},
      {json{{"code", 7}, {"msg", "x"}, {"cniVersion", 1}}, "cniVersion: must be a string"},
      {json{{"code", 7}, {"msg", "x"}, {"error", "extra"}}, "error.error"},
      {json::array({json{{"code", 7}, {"msg", "x"}}}), "JSON object"},
  };
  for (const auto& [e, needle] : cases) {
    auto problems = validateError(e);
    ASSERT_FALSE(problems.empty()) << "accepted: " << e.dump();
    bool named = false;
    for (const auto& p : problems) {
      named = named || p.find(needle) != std::string::npos;
    }
    EXPECT_TRUE(named) << e.dump() << ": no problem mentions \"" << needle << "\"\n" << describeProblems(problems);
  }
}

TEST(VersionSchema, AcceptsAndRejects) {
  EXPECT_TRUE(validateVersion(json{{"cniVersion", "1.1.0"}, {"supportedVersions", {"0.4.0", "1.1.0"}}}).empty());
  for (const json& bad : {json{{"cniVersion", "1.1.0"}}, json{{"supportedVersions", {"1.1.0"}}},
                          json{{"cniVersion", "1.1.0"}, {"supportedVersions", json::array()}},
                          json{{"cniVersion", "1.1.0"}, {"supportedVersions", "1.1.0"}},
                          json{{"cniVersion", "1.1.0"}, {"supportedVersions", {"1.1"}}},
                          json{{"cniVersion", "1.1.0"}, {"supportedVersions", {110}}},
                          json{{"cniVersion", ""}, {"supportedVersions", {"1.1.0"}}},
                          json{{"cniVersion", "1.1.0"}, {"supportedVersions", {"1.1.0"}}, {"extra", true}}}) {
    EXPECT_FALSE(validateVersion(bad).empty()) << "accepted: " << bad.dump();
  }
}

}  // namespace
}  // namespace ibcni::conformance
