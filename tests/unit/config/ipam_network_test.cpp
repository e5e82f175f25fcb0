// SPDX-License-Identifier: Apache-2.0
// The network files ibcni-ipam reads back (parseIpamNetworkFile, ipam/config/ipam_network.cpp): a
// .conf, a .conflist's ibcni-ipam plugin with the list's name and version, and what is refused; and
// ibcni-ipam's request read by the IPAM's own parser, as the plugin's dispatcher reads it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "ibcni/config/net_conf.h"

namespace ibcni::config {
namespace {

using ::testing::HasSubstr;

constexpr const char* kIpam = R"({"type": "ibcni-ipam", "ranges": [[{"subnet": "10.7.0.0/24"}]]})";

TEST(IpamNetworkFile, AConfIsReadAsIbcniIpamReadsARequest) {
  auto conf = parseIpamNetworkFile(std::string(R"({"cniVersion": "1.0.0", "name": "ib7", "type": "ibcni", "ipam": )") +
                                   kIpam + "}");
  ASSERT_TRUE(conf) << conf.error().msg;
  EXPECT_EQ(conf->name, "ib7");
  EXPECT_EQ(conf->cniVersion, "1.0.0");
  EXPECT_EQ(conf->ipamType, "ibcni-ipam");
  ASSERT_TRUE(conf->embeddedIpam && *conf->embeddedIpam);
  EXPECT_EQ((**conf->embeddedIpam).rangeSets.at(0).ranges.at(0).subnet.toString(), "10.7.0.0/24");
}

TEST(IpamNetworkFile, AConflistGivesItsIbcniIpamPluginTheListsNameAndVersion) {
  auto conf = parseIpamNetworkFile(std::string(R"({"cniVersion": "1.1.0", "name": "rails", "plugins": [)") +
                                   R"({"type": "tuning"}, {"type": "ibcni", "ipam": )" + kIpam + "}]}");
  ASSERT_TRUE(conf) << conf.error().msg;
  EXPECT_EQ(conf->name, "rails");
  EXPECT_EQ(conf->cniVersion, "1.1.0");
  ASSERT_TRUE(conf->embeddedIpam && *conf->embeddedIpam);
}

TEST(IpamNetworkFile, WhatIsNotAnIbcniIpamNetworkIsRefused) {
  auto garbage = parseIpamNetworkFile("{not json");
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error().code, cni::Errc::kDecodingFailure);
  auto other = parseIpamNetworkFile(R"({"cniVersion": "1.1.0", "name": "n", "plugins": [{"type": "bridge",
                                        "ipam": {"type": "host-local"}}]})");
  ASSERT_FALSE(other);
  EXPECT_THAT(other.error().msg, HasSubstr("has no plugin with \"ipam\": {\"type\": \"ibcni-ipam\"}"));
  auto noIpam = parseIpamNetworkFile(R"({"cniVersion": "1.1.0", "name": "n", "type": "ibcni"})");
  ASSERT_FALSE(noIpam);
  EXPECT_THAT(noIpam.error().msg, HasSubstr("ipam.type is missing"));
  auto badName = parseIpamNetworkFile(std::string(R"({"cniVersion": "1.1.0", "name": "a/b", "ipam": )") + kIpam + "}");
  ASSERT_FALSE(badName);
  EXPECT_THAT(badName.error().msg, HasSubstr("invalid name"));
}

// ibcni-ipam's request (Role::kIpamPlugin) reads runtimeConfig.ips and args.cni.ips, and none of
// ibcni's own keys: the IPAM's parser, the same that reads the files above.
TEST(IpamNetworkFile, IbcniIpamsRequestIsReadByTheIpamsParser) {
  const std::string request = std::string(R"({"cniVersion": "1.1.0", "name": "ib7", "type": "ibcni",
      "mode": "not-a-mode", "runtimeConfig": {"ips": ["10.7.0.9/24"]},
      "args": {"cni": {"ips": ["10.7.0.8/24"], "guid": "zz"}}, "ipam": )") + kIpam + "}";
  auto conf = parseNetConf(request, cni::Command::kAdd, Role::kIpamPlugin);
  ASSERT_TRUE(conf) << conf.error().msg;
  ASSERT_EQ(conf->runtime.ips.size(), 1u);
  EXPECT_EQ(conf->runtime.ips[0].toString(), "10.7.0.9/24");
  ASSERT_EQ(conf->argsIps.size(), 1u);
  EXPECT_EQ(conf->argsIps[0].toString(), "10.7.0.8/24");
  auto asPlugin = parseNetConf(request, cni::Command::kAdd, Role::kPlugin);
  ASSERT_FALSE(asPlugin) << "ibcni itself reads mode and args.cni.guid";
}

}  // namespace
}  // namespace ibcni::config
