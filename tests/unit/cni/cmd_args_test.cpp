// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/cni/spec_version.h"

namespace ibcni::cni {
namespace {

TEST(CniArgs, KubernetesKeys) {
  auto a = parseCniArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID=u");
  ASSERT_TRUE(a) << a.error().msg;
  EXPECT_TRUE(a->ignoreUnknown);
  EXPECT_EQ(a->podNamespace, "ns");
  EXPECT_EQ(a->podName, "p");
  EXPECT_EQ(a->podInfraContainerId, "x");
  EXPECT_EQ(a->podUid, "u");
}

TEST(CniArgs, EmptyIsFine) {
  auto a = parseCniArgs("");
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->ignoreUnknown);
}

TEST(CniArgs, IpListAndMac) {
  auto a = parseCniArgs("IP=10.1.2.3/24,fd00::3;MAC=0A:58:0A:01:02:03");
  ASSERT_TRUE(a) << a.error().msg;
  ASSERT_EQ(a->ips.size(), 2u);
  EXPECT_EQ(a->ips[0].toString(), "10.1.2.3/24");
  EXPECT_EQ(a->ips[1].toString(), "fd00::3/128");
  EXPECT_EQ(a->mac, "0a:58:0a:01:02:03");
}

TEST(CniArgs, UnknownKeyNeedsIgnoreUnknown) {
  auto bad = parseCniArgs("FOO=bar");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Errc::kInvalidEnvironment);
  EXPECT_NE(bad.error().msg.find("FOO=bar"), std::string::npos);
  EXPECT_NE(bad.error().msg.find("IgnoreUnknown=1"), std::string::npos);
  // IgnoreUnknown may come after the unknown key.
  auto ok = parseCniArgs("FOO=bar;IgnoreUnknown=true");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->unknown.at("FOO"), "bar");
}

TEST(CniArgs, MalformedPairsAndValues) {
  for (const char* bad : {"novalue", "=x", "IP=10.1.2", "MAC=zz", "IgnoreUnknown=1;IP=1.2.3.4,"}) {
    auto r = parseCniArgs(bad);
    if (std::string(bad) == "IgnoreUnknown=1;IP=1.2.3.4,") {
      EXPECT_TRUE(r);  // a trailing comma leaves no empty address behind
      continue;
    }
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, Errc::kInvalidEnvironment) << bad;
    EXPECT_NE(r.error().msg.find("CNI_ARGS"), std::string::npos) << bad;
  }
}

TEST(SpecVersion, ExactStringsOnly) {
  EXPECT_EQ(parseSpecVersion("0.3.0"), SpecVersion::k030);
  EXPECT_EQ(parseSpecVersion("1.1.0"), SpecVersion::k110);
  EXPECT_FALSE(parseSpecVersion("0.2.0"));
  EXPECT_FALSE(parseSpecVersion("1.1"));
  EXPECT_FALSE(parseSpecVersion("1.0.0 "));
  EXPECT_TRUE(hasCheck(SpecVersion::k040));
  EXPECT_FALSE(hasCheck(SpecVersion::k031));
  EXPECT_TRUE(hasGcAndStatus(SpecVersion::k110));
  EXPECT_FALSE(hasGcAndStatus(SpecVersion::k100));
  EXPECT_TRUE(hasIpVersionField(SpecVersion::k040));
  EXPECT_FALSE(hasIpVersionField(SpecVersion::k100));
}

}  // namespace
}  // namespace ibcni::cni

namespace ibcni::cni {
namespace {

TEST(Identifier, SpecRuleForContainerIdsAndNetworkNames) {
  for (const char* ok : {"a", "Z9", "abc-1.2_x", "0abc", "cnitool-1f2e"}) {
    EXPECT_TRUE(isValidIdentifier(ok)) << ok;
  }
  for (const char* bad : {"", "-a", ".a", "_a", "a/b", "a b", "a:b", "a\n", "é"}) {
    EXPECT_FALSE(isValidIdentifier(bad)) << bad;
  }
}

}  // namespace
}  // namespace ibcni::cni
