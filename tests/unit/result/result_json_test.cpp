// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/result/result_json.h"

namespace ibcni::result {
namespace {

using nlohmann::json;

cni::AddResult sample() {
  cni::AddResult r;
  r.interfaces.push_back({"net1", "0a:58:0a:01:02:03", "/var/run/netns/p", 4092, "0000:af:06.1", ""});
  r.ips.push_back({*net::IpPrefix::parse("10.1.2.3/24"), net::IpAddress::parse("10.1.2.1"), 0});
  r.ips.push_back({*net::IpPrefix::parse("fd00::3/64"), std::nullopt, 0});
  cni::Route rt;
  rt.dst = *net::IpPrefix::parse("0.0.0.0/0");
  rt.gw = net::IpAddress::parse("10.1.2.1");
  rt.priority = 100;
  rt.table = 10;
  r.routes.push_back(rt);
  r.dns.nameservers = {"10.0.0.10"};
  return r;
}

class ResultPerVersion : public ::testing::TestWithParam<cni::SpecVersion> {};

TEST_P(ResultPerVersion, FormatFollowsTheVersion) {
  auto v = GetParam();
  json j = json::parse(printResult(sample(), v));
  EXPECT_EQ(j["cniVersion"], std::string(cni::toString(v)));
  EXPECT_EQ(j["interfaces"][0]["name"], "net1");
  EXPECT_EQ(j["interfaces"][0]["sandbox"], "/var/run/netns/p");
  EXPECT_EQ(j["interfaces"][0]["mac"], "0a:58:0a:01:02:03");
  EXPECT_EQ(j["ips"][0]["address"], "10.1.2.3/24");
  EXPECT_EQ(j["ips"][0]["gateway"], "10.1.2.1");
  EXPECT_EQ(j["ips"][0]["interface"], 0);
  EXPECT_FALSE(j["ips"][1].contains("gateway"));
  EXPECT_EQ(j["routes"][0]["dst"], "0.0.0.0/0");
  EXPECT_EQ(j["dns"]["nameservers"][0], "10.0.0.10");
  if (cni::hasIpVersionField(v)) {
    EXPECT_EQ(j["ips"][0]["version"], "4");
    EXPECT_EQ(j["ips"][1]["version"], "6");
  } else {
    EXPECT_FALSE(j["ips"][0].contains("version"));
  }
  if (cni::hasV11Fields(v)) {
    EXPECT_EQ(j["interfaces"][0]["mtu"], 4092);
    EXPECT_EQ(j["interfaces"][0]["pciID"], "0000:af:06.1");
    EXPECT_EQ(j["routes"][0]["priority"], 100);
    EXPECT_EQ(j["routes"][0]["table"], 10);
  } else {
    EXPECT_FALSE(j["interfaces"][0].contains("mtu"));
    EXPECT_FALSE(j["interfaces"][0].contains("pciID"));
    EXPECT_FALSE(j["routes"][0].contains("priority"));
  }
}

TEST_P(ResultPerVersion, RoundTrips) {
  auto v = GetParam();
  auto parsed = parseResult(printResult(sample(), v), cni::Errc::kIpamFailure, "test");
  ASSERT_TRUE(parsed) << parsed.error().msg;
  EXPECT_EQ(parsed->ips, sample().ips);
  EXPECT_EQ(parsed->dns, sample().dns);
  EXPECT_EQ(parsed->interfaces[0].name, "net1");
}

INSTANTIATE_TEST_SUITE_P(AllVersions, ResultPerVersion, ::testing::ValuesIn(cni::kSupportedVersions));

TEST(ResultJson, NoIpsNoDnsAreLeftOut) {
  cni::AddResult r;
  r.interfaces.push_back({"net1", "", "/ns", std::nullopt, "", ""});
  json j = json::parse(printResult(r, cni::SpecVersion::k110));
  EXPECT_FALSE(j.contains("ips"));
  EXPECT_FALSE(j.contains("routes"));
  EXPECT_FALSE(j.contains("dns"));
  EXPECT_FALSE(j["interfaces"][0].contains("mac"));
}

TEST(ResultJson, ParsesHostLocalOutput) {
  // What Debian's host-local 1.1.1 prints for cniVersion 1.0.0.
  auto r = parseResult(R"({"cniVersion":"1.0.0","ips":[{"address":"10.77.0.2/24","gateway":"10.77.0.1"}],
      "routes":[{"dst":"0.0.0.0/0"}],"dns":{}})",
                       cni::Errc::kIpamFailure, "host-local");
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(r->ips[0].address.toString(), "10.77.0.2/24");
  EXPECT_FALSE(r->ips[0].interface);
  EXPECT_TRUE(r->dns.empty());
}

TEST(ResultJson, BadIpamOutputNamesTheField) {
  auto r = parseResult(R"({"ips":[{"address":"10.77.0.2"}]})", cni::Errc::kIpamFailure, "ipam plugin");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kIpamFailure);
  EXPECT_NE(r.error().msg.find("ips[0].address"), std::string::npos);
  auto notJson = parseResult("oops", cni::Errc::kIpamFailure, "ipam plugin");
  ASSERT_FALSE(notJson);
  EXPECT_NE(notJson.error().msg.find("not JSON"), std::string::npos);
}

TEST(ErrorJson, SpecShape) {
  json j = json::parse(printError({cni::Errc::kInvalidConfig, "bad mtu", "details here"}, "1.0.0"));
  EXPECT_EQ(j["cniVersion"], "1.0.0");
  EXPECT_EQ(j["code"], 7);
  EXPECT_EQ(j["msg"], "bad mtu");
  EXPECT_EQ(j["details"], "details here");
  json noDetails = json::parse(printError({cni::Errc::kInvalidEnvironment, "x", ""}, ""));
  EXPECT_FALSE(noDetails.contains("details"));
  EXPECT_FALSE(noDetails.contains("cniVersion"));
  // Invalid UTF-8 in a message does not make printing fail.
  EXPECT_NO_THROW((void)printError({cni::Errc::kInternal, std::string("bad \xff byte"), ""}, "1.0.0"));
}

TEST(ErrorJson, ParsesDelegateErrors) {
  auto e = parseError(R"({"code":11,"msg":"busy","details":"d"})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, cni::Errc::kTryAgainLater);
  EXPECT_EQ(e->msg, "busy");
  EXPECT_FALSE(parseError("not json"));
  EXPECT_FALSE(parseError(R"({"msg":"no code"})"));
}

TEST(VersionJson, ListsSupportedVersions) {
  json j = json::parse(printVersion("0.4.0"));
  EXPECT_EQ(j["cniVersion"], "0.4.0");
  EXPECT_EQ(j["supportedVersions"], json({"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}));
}

}  // namespace
}  // namespace ibcni::result
