// SPDX-License-Identifier: Apache-2.0
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "ibcni/config/ipam_conf.h"
#include "ibcni/config/net_conf.h"
#include "unit/config/expect_invalid_ipam.h"

namespace ibcni::config {
namespace {

using ::testing::HasSubstr;

net::IpAddress ip(const char* s) { return *net::IpAddress::parse(s); }

IpamConfig parseOk(const std::string& text) {
  auto c = parseIpamConfig(text);
  EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().msg);
  return c ? *c : IpamConfig{};
}

// Every invalid value is error 7 naming the field path, the value, and what is accepted.
void expectInvalid(const std::string& text, const std::vector<std::string>& parts) {
  testing::expectInvalidIpam(text, parts);
}

TEST(IpamConfig, Ipv4DefaultsFollowHostLocal) {
  auto c = parseOk(R"({"type": "ibcni-ipam", "ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  ASSERT_EQ(c.rangeSets.size(), 1u);
  const Range& r = c.rangeSets[0].ranges[0];
  EXPECT_EQ(r.subnet.toString(), "10.1.2.0/24");
  EXPECT_EQ(r.gateway, ip("10.1.2.1"));
  EXPECT_EQ(r.rangeStart, ip("10.1.2.2")) << "network+1 is the gateway, so the range starts at +2";
  EXPECT_EQ(r.rangeEnd, ip("10.1.2.254")) << "the broadcast address is never in the range";
  EXPECT_EQ(r.path, "ipam.ranges[0][0]");
  EXPECT_EQ(c.rangeSets[0].path, "ipam.ranges[0]");
  EXPECT_EQ(c.type, "ibcni-ipam");
}

TEST(IpamConfig, ExplicitGatewayMovesTheDefaultStart) {
  auto c = parseOk(R"({"ranges": [[{"subnet": "10.1.2.0/24", "gateway": "10.1.2.254"}]]})");
  const Range& r = c.rangeSets[0].ranges[0];
  EXPECT_EQ(r.gateway, ip("10.1.2.254"));
  EXPECT_EQ(r.rangeStart, ip("10.1.2.1"));
  EXPECT_EQ(r.rangeEnd, ip("10.1.2.254"));
}

TEST(IpamConfig, Ipv6DefaultsEndAtTheLastAddress) {
  auto c = parseOk(R"({"ranges": [[{"subnet": "fd00:1::/64"}]]})");
  const Range& r = c.rangeSets[0].ranges[0];
  EXPECT_EQ(r.gateway, ip("fd00:1::1"));
  EXPECT_EQ(r.rangeStart, ip("fd00:1::2"));
  EXPECT_EQ(r.rangeEnd, ip("fd00:1::ffff:ffff:ffff:ffff"));
}

TEST(IpamConfig, SmallestSubnetsAreAccepted) {
  auto c = parseOk(R"({"ranges": [[{"subnet": "10.0.0.0/30"}], [{"subnet": "fd00::/126"}]]})");
  EXPECT_EQ(c.rangeSets[0].ranges[0].rangeStart, ip("10.0.0.2"));
  EXPECT_EQ(c.rangeSets[0].ranges[0].rangeEnd, ip("10.0.0.2"));
  EXPECT_EQ(c.rangeSets[1].ranges[0].rangeStart, ip("fd00::2"));
  EXPECT_EQ(c.rangeSets[1].ranges[0].rangeEnd, ip("fd00::3"));
}

TEST(IpamConfig, LegacyKeysBecomeTheFirstRangeSet) {
  auto c = parseOk(R"({"subnet": "10.9.0.0/16", "rangeStart": "10.9.1.0", "rangeEnd": "10.9.1.255",
                       "gateway": "10.9.0.1", "ranges": [[{"subnet": "fd00::/64"}]]})");
  ASSERT_EQ(c.rangeSets.size(), 2u);
  EXPECT_EQ(c.rangeSets[0].ranges[0].rangeStart, ip("10.9.1.0"));
  EXPECT_EQ(c.rangeSets[0].ranges[0].rangeEnd, ip("10.9.1.255"));
  EXPECT_EQ(c.rangeSets[0].ranges[0].path, "ipam");
  EXPECT_EQ(c.rangeSets[1].family, AF_INET6);
}

TEST(IpamConfig, RoutesDnsExcludeReservationsDataDir) {
  auto c = parseOk(R"({
    "ranges": [[{"subnet": "10.1.0.0/16"}], [{"subnet": "fd00::/64"}]],
    "routes": [{"dst": "0.0.0.0/0"}, {"dst": "10.2.0.0/16", "gw": "10.1.0.254", "priority": 10}],
    "dns": {"nameservers": ["10.96.0.10"], "search": ["svc.local"], "domain": "local", "options": ["ndots:5"]},
    "exclude": ["10.1.0.5", "10.1.128.0/17"],
    "reservations": {"ns/b": ["10.1.0.7", "fd00::7"], "ns/a": "10.1.0.8"},
    "dataDir": "/var/lib/ibcni-ipam/"
  })");
  ASSERT_EQ(c.routes.size(), 2u);
  EXPECT_EQ(c.routes[0].dst.toString(), "0.0.0.0/0");
  EXPECT_FALSE(c.routes[0].gw.has_value());
  EXPECT_EQ(c.routes[1].gw, ip("10.1.0.254"));
  EXPECT_EQ(c.routes[1].priority, 10u);
  EXPECT_EQ(c.dns.nameservers, std::vector<std::string>{"10.96.0.10"});
  EXPECT_EQ(c.dns.domain, "local");
  ASSERT_EQ(c.exclude.size(), 2u);
  EXPECT_EQ(c.exclude[0].prefix.toString(), "10.1.0.5/32");
  EXPECT_EQ(c.exclude[1].path, "ipam.exclude[1]");
  ASSERT_EQ(c.reservations.size(), 2u);
  EXPECT_EQ(c.reservations[0].pod, "ns/a");
  ASSERT_NE(c.reservationOf("ns/b"), nullptr);
  EXPECT_EQ(c.reservationOf("ns/b")->addresses.size(), 2u);
  EXPECT_EQ(c.reservationOf("ns/c"), nullptr);
  EXPECT_EQ(c.dataDir, "/var/lib/ibcni-ipam");
}

TEST(IpamConfig, UnknownKeysAreWarnedAbout) {
  auto c = parseOk(R"({"ranges": [[{"subnet": "10.1.0.0/16", "rangestart": "10.1.0.9"}]], "bogus": 1,
                       "exclude": ["192.168.0.0/24"]})");
  std::string all;
  for (const auto& w : c.warnings) {
    all += w + "\n";
  }
  EXPECT_THAT(all, HasSubstr("ipam.ranges[0][0].rangestart"));
  EXPECT_THAT(all, HasSubstr("ipam.bogus"));
  EXPECT_THAT(all, HasSubstr("ipam.exclude[0] = 192.168.0.0/24 is outside every range"));
}

// The parse does no I/O: ipam.resolvConf is kept as a path (its spelling checked), read by the
// embedded IPAM's ADD (tests/unit/ipam/embedded_ipam_test.cpp), and ipam.dns kept as given.
TEST(IpamConfig, ResolvConfIsAPathTheParseDoesNotReadAndDnsIsKeptAsGiven) {
  auto c = parseOk(R"({"ranges": [[{"subnet": "10.1.0.0/16"}]], "resolvConf": "/nonexistent/resolv.conf",
                       "dns": {"domain": "", "search": ["a.example"]}})");
  EXPECT_EQ(c.resolvConf, "/nonexistent/resolv.conf");
  EXPECT_TRUE(c.dnsDomainSet);
  EXPECT_EQ(c.dns.domain, "");
  EXPECT_EQ(c.dns.search, (std::vector<std::string>{"a.example"}));
  EXPECT_TRUE(c.dns.nameservers.empty());
  auto plain = parseOk(R"({"ranges": [[{"subnet": "10.1.0.0/16"}]], "dns": {"nameservers": ["10.0.0.1"]}})");
  EXPECT_FALSE(plain.dnsDomainSet);
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.0.0/16"}]], "resolvConf": "relative/resolv.conf"})",
                {"ipam.resolvConf", "relative/resolv.conf"});
}

TEST(IpamConfig, SubnetErrors) {
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/31"}]]})",
                {"invalid ipam.ranges[0][0].subnet = \"10.1.2.0/31\"", "too small", "/30 or larger"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.7/32"}]]})", {"ipam.ranges[0][0].subnet", "too small"});
  expectInvalid(R"({"ranges": [[{"subnet": "fd00::/127"}]]})", {"\"fd00::/127\"", "/126 or larger"});
  expectInvalid(R"({"ranges": [[{"subnet": "fd00::1/128"}]]})", {"too small"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.3/24"}]]})",
                {"ipam.ranges[0][0].subnet = \"10.1.2.3/24\"", "host bits", "\"10.1.2.0/24\""});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0"}]]})", {"ipam.ranges[0][0].subnet", "must be a CIDR"});
  expectInvalid(R"({"ranges": [[{"subnet": 7}]]})", {"ipam.ranges[0][0].subnet = 7", "must be a string"});
  expectInvalid(R"({"ranges": [[{"gateway": "10.1.2.1"}]]})", {"ipam.ranges[0][0].subnet is missing"});
  expectInvalid(R"({"subnet": "10.1.2.0/33"})", {"invalid ipam.subnet = \"10.1.2.0/33\"", "must be a CIDR"});
}

TEST(IpamConfig, RangeBoundErrors) {
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24"}, {"subnet": "10.1.3.0/24", "rangeStart": "10.1.4.5"}]]})",
                {"invalid ipam.ranges[0][1].rangeStart = \"10.1.4.5\"", "not inside subnet 10.1.3.0/24",
                 "from 10.1.3.1 to 10.1.3.254"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24", "rangeEnd": "10.1.2.255"}]]})",
                {"ipam.ranges[0][0].rangeEnd = \"10.1.2.255\"", "broadcast address"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.0"}]]})",
                {"ipam.ranges[0][0].rangeStart = \"10.1.2.0\"", "network address"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.50", "rangeEnd": "10.1.2.10"}]]})",
                {"ipam.ranges[0][0].rangeEnd = \"10.1.2.10\"", "before rangeStart 10.1.2.50"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24", "rangeStart": "fd00::5"}]]})",
                {"ipam.ranges[0][0].rangeStart = \"fd00::5\"", "is IPv6 but subnet 10.1.2.0/24 is IPv4"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.x"}]]})",
                {"ipam.ranges[0][0].rangeStart = \"10.1.2.x\"", "must be an IP address"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24", "gateway": "10.1.3.1"}]]})",
                {"ipam.ranges[0][0].gateway = \"10.1.3.1\"", "not inside subnet"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24", "gateway": "10.1.2.0"}]]})",
                {"ipam.ranges[0][0].gateway = \"10.1.2.0\"", "network address"});
  expectInvalid(R"({"rangeStart": "10.1.2.5"})", {"ipam.rangeStart", "needs ipam.subnet"});
  expectInvalid(R"({"subnet": "10.1.2.0/24", "rangeEnd": "10.1.9.9"})",
                {"invalid ipam.rangeEnd = \"10.1.9.9\"", "not inside subnet"});
}

TEST(IpamConfig, OverlapAndFamilyErrors) {
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24"},
                                {"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.200"}]]})",
                {"invalid ipam.ranges[0][1]", "overlaps ipam.ranges[0][0]", "must not share addresses"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.0.0/16"}], [{"subnet": "10.1.5.0/24"}]]})",
                {"invalid ipam.ranges[1][0]", "overlaps ipam.ranges[0][0]"});
  expectInvalid(R"({"subnet": "10.1.0.0/16", "ranges": [[{"subnet": "10.1.5.0/24"}]]})",
                {"ipam.ranges[0][0]", "overlaps ipam"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24"}, {"subnet": "fd00::/64"}]]})",
                {"ipam.ranges[0][1].subnet = \"fd00::/64\"", "mixes IPv4 and IPv6", "one range set per family"});
  // Disjoint parts of one subnet are fine, in one set or in two.
  parseOk(R"({"ranges": [[{"subnet": "10.1.2.0/24", "rangeEnd": "10.1.2.99"},
                          {"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.100"}]]})");
}

TEST(IpamConfig, ShapeErrors) {
  expectInvalid(R"({})", {"no addresses to allocate from", "ipam.ranges"});
  expectInvalid(R"({"ranges": []})", {"no addresses to allocate from"});
  expectInvalid(R"({"ranges": {}})", {"invalid ipam.ranges = {}", "list of range sets"});
  expectInvalid(R"({"ranges": [[]]})", {"invalid ipam.ranges[0] = []", "non-empty list"});
  expectInvalid(R"({"ranges": [{"subnet": "10.1.2.0/24"}]})", {"invalid ipam.ranges[0]", "non-empty list"});
  expectInvalid(R"({"ranges": [["10.1.2.0/24"]]})", {"invalid ipam.ranges[0][0] = \"10.1.2.0/24\"", "object"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]], "dataDir": "relative/dir"})",
                {"invalid ipam.dataDir = \"relative/dir\"", "absolute"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]], "type": 3})", {"ipam.type = 3", "string"});
  auto notJson = parseIpamConfig("{not json");
  ASSERT_FALSE(notJson);
  EXPECT_EQ(notJson.error().code, cni::Errc::kDecodingFailure);
}

TEST(IpamConfig, RouteAndDnsErrors) {
  const std::string r = R"({"ranges": [[{"subnet": "10.1.2.0/24"}]], )";
  expectInvalid(r + R"("routes": [{"gw": "10.1.2.1"}]})", {"ipam.routes[0].dst is missing"});
  expectInvalid(r + R"("routes": [{"dst": "0.0.0.0/0"}, {"dst": "nope"}]})",
                {"invalid ipam.routes[1].dst = \"nope\"", "CIDR"});
  expectInvalid(r + R"("routes": [{"dst": "10.2.3.4/16"}]})", {"ipam.routes[0].dst", "host bits", "10.2.0.0/16"});
  expectInvalid(r + R"("routes": [{"dst": "0.0.0.0/0", "gw": "fd00::1"}]})",
                {"ipam.routes[0].gw = \"fd00::1\"", "same family"});
  expectInvalid(r + R"("routes": [{"dst": "0.0.0.0/0", "mtu": -1}]})", {"ipam.routes[0].mtu = -1", "integer"});
  expectInvalid(r + R"("routes": {}})", {"invalid ipam.routes = {}"});
  expectInvalid(r + R"("dns": {"nameservers": ["dns.example"]}})",
                {"invalid ipam.dns.nameservers[0] = \"dns.example\"", "IP address"});
  expectInvalid(r + R"("dns": []})", {"invalid ipam.dns = []"});
}

TEST(IpamConfig, ExcludeErrors) {
  const std::string r = R"({"ranges": [[{"subnet": "10.1.2.0/24"}]], )";
  expectInvalid(r + R"("exclude": "10.1.2.5"})", {"invalid ipam.exclude = \"10.1.2.5\"", "list"});
  expectInvalid(r + R"("exclude": ["10.1.2.5", "x"]})", {"invalid ipam.exclude[1] = \"x\"", "address or CIDR"});
  expectInvalid(r + R"("exclude": ["10.1.2.5/28"]})",
                {"ipam.exclude[0] = \"10.1.2.5/28\"", "host bits", "10.1.2.0/28"});
  expectInvalid(r + R"("exclude": ["10.1.2.0/24"]})", {"invalid ipam.ranges[0]", "no address that can be handed out"});
}

TEST(IpamConfig, ReservationErrors) {
  const std::string r =
      R"({"ranges": [[{"subnet": "10.1.2.0/24", "rangeEnd": "10.1.2.100"}], [{"subnet": "fd00::/64"}]], )";
  expectInvalid(r + R"("reservations": {"nonamespace": "10.1.2.9"}})",
                {"invalid ipam.reservations = \"nonamespace\"", "namespace/name"});
  expectInvalid(r + R"("reservations": {"ns/a": "10.1.2.200"}})",
                {"invalid ipam.reservations[\"ns/a\"] = \"10.1.2.200\"", "not inside any range"});
  expectInvalid(R"({"ranges": [[{"subnet": "10.1.2.0/24", "gateway": "10.1.2.50"}]],
                    "reservations": {"ns/a": "10.1.2.50"}})",
                {"ipam.reservations[\"ns/a\"] = \"10.1.2.50\"", "gateway of ipam.ranges[0][0]"});
  expectInvalid(r + R"("exclude": ["10.1.2.8/29"], "reservations": {"ns/a": "10.1.2.9"}})",
                {"ipam.reservations[\"ns/a\"] = \"10.1.2.9\"", "excluded by ipam.exclude[0]"});
  expectInvalid(r + R"("reservations": {"ns/a": "10.1.2.9", "ns/b": "10.1.2.9"}})",
                {"ipam.reservations[\"ns/b\"] = \"10.1.2.9\"", "already reserved for pod ns/a"});
  expectInvalid(r + R"("reservations": {"ns/a": ["10.1.2.9", "10.1.2.10"]}})",
                {"ipam.reservations[\"ns/a\"] = \"10.1.2.10\"", "one address per range set"});
  expectInvalid(r + R"("reservations": {"ns/a": "10.1.2.9/24"}})",
                {"ipam.reservations[\"ns/a\"] = \"10.1.2.9/24\"", "bare IP address"});
  expectInvalid(r + R"("reservations": {"ns/a": []}})", {"ipam.reservations[\"ns/a\"] = []", "list of addresses"});
  expectInvalid(r + R"("reservations": ["ns/a"]})", {"invalid ipam.reservations = [\"ns/a\"]", "object"});
}

// What ibcni-ipam reads of a whole request (role kIpamPlugin), besides the `ipam` object.
TEST(NetworkConfig, ReadsNameRequestedAddressesAndGcList) {
  auto c = parseNetConf(R"({
    "cniVersion": "1.1.0", "name": "ib-net.1", "type": "ibcni",
    "ipam": {"type": "ibcni-ipam", "subnet": "10.1.2.0/24"},
    "runtimeConfig": {"ips": ["10.1.2.9/24"]},
    "args": {"cni": {"ips": ["10.1.2.10"]}},
    "cni.dev/valid-attachments": [{"containerID": "c1", "ifname": "net1"}],
    "prevResult": {"ips": [{"address": "10.1.2.9/24"}]}
  })", cni::Command::kGc, Role::kIpamPlugin);
  ASSERT_TRUE(c) << c.error().msg;
  EXPECT_EQ(c->name, "ib-net.1");
  ASSERT_EQ(c->runtime.ips.size(), 1u);
  EXPECT_EQ(c->runtime.ips[0].address, ip("10.1.2.9"));
  ASSERT_EQ(c->argsIps.size(), 1u);
  EXPECT_EQ(c->argsIps[0].address, ip("10.1.2.10"));
  ASSERT_TRUE(c->validAttachments);
  EXPECT_EQ(c->validAttachments->at(0), (cni::AttachmentKey{"c1", "net1"}));
  ASSERT_TRUE(c->prevResult);
  ASSERT_EQ(c->prevResult->ips.size(), 1u);
  ASSERT_TRUE(c->embeddedIpam && *c->embeddedIpam);
  EXPECT_EQ((*c->embeddedIpam)->rangeSets.size(), 1u);
}

TEST(NetworkConfig, Errors) {
  auto parse = [](const std::string& text) { return parseNetConf(text, cni::Command::kGc, Role::kIpamPlugin); };
  auto noName = parse(R"({"cniVersion": "1.1.0", "ipam": {"type": "ibcni-ipam", "subnet": "10.1.2.0/24"}})");
  ASSERT_FALSE(noName);
  EXPECT_THAT(noName.error().msg, HasSubstr("name is missing"));
  auto badName =
      parse(R"({"cniVersion": "1.1.0", "name": "../etc", "ipam": {"type": "ibcni-ipam", "subnet": "10.1.2.0/24"}})");
  ASSERT_FALSE(badName);
  EXPECT_THAT(badName.error().msg, HasSubstr("invalid name = \"../etc\""));
  auto noIpam = parse(R"({"cniVersion": "1.1.0", "name": "n"})");
  ASSERT_FALSE(noIpam);
  EXPECT_EQ(noIpam.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(noIpam.error().msg, HasSubstr("ipam.type is missing"));
  auto badIps = parse(R"({"cniVersion": "1.1.0", "name": "n", "ipam": {"type": "ibcni-ipam", "subnet": "10.1.2.0/24"},
                          "runtimeConfig": {"ips": ["10.1.2.300"]}})");
  ASSERT_FALSE(badIps);
  EXPECT_THAT(badIps.error().msg, HasSubstr("invalid runtimeConfig.ips[0] = \"10.1.2.300\""));
  auto badGc = parse(R"({"cniVersion": "1.1.0", "name": "n", "ipam": {"type": "ibcni-ipam", "subnet": "10.1.2.0/24"},
                         "cni.dev/attachments": [{"containerID": "c"}]})");
  ASSERT_FALSE(badGc);
  EXPECT_THAT(badGc.error().msg, HasSubstr("cni.dev/attachments[0]"));
  auto notObject = parse("[1]");
  ASSERT_FALSE(notObject);
  EXPECT_EQ(notObject.error().code, cni::Errc::kDecodingFailure);
}

}  // namespace
}  // namespace ibcni::config
