// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <string>

#include "ibcni/config/net_conf.h"

namespace ibcni::config {
namespace {

using cni::Command;
using cni::Errc;

std::string conf(const std::string& extra, const std::string& version = "1.1.0") {
  return R"({"cniVersion":")" + version + R"(","name":"ibnet","type":"ibcni","device":"vf0")" +
         (extra.empty() ? "" : "," + extra) + "}";
}

TEST(NetConf, MinimalSriov) {
  auto c = parseNetConf(conf(""), Command::kAdd);
  ASSERT_TRUE(c) << c.error().msg;
  EXPECT_EQ(c->name, "ibnet");
  EXPECT_EQ(c->mode, Mode::kSriov);
  EXPECT_EQ(c->device, "vf0");
  EXPECT_TRUE(c->ipamType.empty());
  EXPECT_EQ(c->stateDir, kDefaultStateDir);
  EXPECT_EQ(c->logLevel, LogLevel::kWarn);
}

TEST(NetConf, EveryKnownKey) {
  auto c = parseNetConf(
      R"({"cniVersion":"1.0.0","name":"n.1_x-y","type":"ibcni","mode":"sriov","pciBusID":"0000:af:06.1",
          "mtu":4092,"ipam":{"type":"host-local","subnet":"10.1.0.0/16"},
          "dns":{"nameservers":["10.0.0.10"],"domain":"d","search":["a"],"options":["ndots:2"]},
          "logLevel":"debug","logFile":"/var/log/ibcni.log","stateDir":"/tmp/s",
          "runtimeConfig":{"ips":["10.1.2.3/24"],"mac":"0a:58:0a:01:02:03","infinibandGUID":"c2:11:22:33:44:55:66:77"},
          "args":{"cni":{"ips":["10.1.2.4"],"labels":[{"key":"a","value":"b"}],"zzz":1}},
          "capabilities":{"infinibandGUID":true},"cni.dev/future":1})",
      Command::kAdd);
  ASSERT_TRUE(c) << c.error().msg;
  EXPECT_EQ(c->version, cni::SpecVersion::k100);
  ASSERT_TRUE(c->deviceId);
  EXPECT_EQ(c->deviceId->text, "0000:af:06.1");
  EXPECT_EQ(c->mtu, 4092u);
  EXPECT_EQ(c->ipamType, "host-local");
  EXPECT_EQ(c->dns.nameservers.front(), "10.0.0.10");
  EXPECT_EQ(c->logLevel, LogLevel::kDebug);
  EXPECT_EQ(c->logFile, "/var/log/ibcni.log");
  EXPECT_EQ(c->stateDir, "/tmp/s");
  ASSERT_EQ(c->runtime.ips.size(), 1u);
  EXPECT_EQ(c->runtime.mac->text, "0a:58:0a:01:02:03");
  EXPECT_EQ(c->runtime.infinibandGuid->value, 0xc211223344556677ULL);
  ASSERT_EQ(c->argsIps.size(), 1u);
  EXPECT_TRUE(c->unknownKeys.empty());
}

TEST(NetConf, VfioIsAutoTrueOrFalseAndTrueHasNoMeaningInIpoibMode) {
  auto c = parseNetConf(conf(""), Command::kAdd);
  ASSERT_TRUE(c) << c.error().msg;
  EXPECT_EQ(c->vfio, VfioUse::kAuto);
  for (const auto& [text, want] : {std::pair{"true", VfioUse::kOn}, std::pair{"false", VfioUse::kOff},
                                   std::pair{"\"auto\"", VfioUse::kAuto}, std::pair{"null", VfioUse::kAuto}}) {
    c = parseNetConf(conf(std::string(R"("vfio":)") + text), Command::kAdd);
    ASSERT_TRUE(c) << text << ": " << c.error().msg;
    EXPECT_EQ(c->vfio, want) << text;
    EXPECT_TRUE(c->unknownKeys.empty()) << text;
  }
  for (const char* bad : {R"("vfio":"yes")", R"("vfio":1)"}) {
    c = parseNetConf(conf(bad), Command::kAdd);
    ASSERT_FALSE(c) << bad;
    EXPECT_EQ(c.error().code, Errc::kInvalidConfig);
    EXPECT_NE(c.error().msg.find("vfio"), std::string::npos) << c.error().msg;
  }
  const std::string ipoib =
      R"({"cniVersion":"1.1.0","name":"ibnet","type":"ibcni","mode":"ipoib","master":"ib0","vfio":true})";
  c = parseNetConf(ipoib, Command::kAdd);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, Errc::kInvalidConfig);
  EXPECT_NE(c.error().msg.find("sriov-mode key"), std::string::npos) << c.error().msg;
}

TEST(NetConf, PolicyRoutingIsTrueFalseOrATableAndPriorityEachInRange) {
  auto c = parseNetConf(conf(""), Command::kAdd);
  ASSERT_TRUE(c) << c.error().msg;
  EXPECT_FALSE(c->policyRouting);
  c = parseNetConf(conf(R"("policyRouting":false)"), Command::kAdd);
  ASSERT_TRUE(c) << c.error().msg;
  EXPECT_FALSE(c->policyRouting);
  c = parseNetConf(conf(R"("policyRouting":true)"), Command::kAdd);
  ASSERT_TRUE(c) << c.error().msg;
  ASSERT_TRUE(c->policyRouting);
  EXPECT_FALSE(c->policyRouting->table) << "derived from CNI_IFNAME at ADD";
  EXPECT_EQ(c->policyRouting->priority, 1000u);
  EXPECT_TRUE(c->unknownKeys.empty());
  c = parseNetConf(conf(R"("policyRouting":{"table":101,"priority":500})"), Command::kAdd);
  ASSERT_TRUE(c) << c.error().msg;
  EXPECT_EQ(c->policyRouting->table, 101u);
  EXPECT_EQ(c->policyRouting->priority, 500u);
  for (const auto& [bad, field] :
       {std::pair{R"("policyRouting":"yes")", "policyRouting"},
        std::pair{R"("policyRouting":{"table":0})", "table"},
        std::pair{R"("policyRouting":{"table":254})", "kernel's own tables"},
        std::pair{R"("policyRouting":{"table":4294967296})", "table"},
        std::pair{R"("policyRouting":{"priority":0})", "policyRouting.priority"},
        std::pair{R"("policyRouting":{"priority":32766})", "from 1 to 32765"}}) {
    c = parseNetConf(conf(bad), Command::kAdd);
    ASSERT_FALSE(c) << bad;
    EXPECT_EQ(c.error().code, Errc::kInvalidConfig) << bad;
    EXPECT_NE(c.error().msg.find(field), std::string::npos) << c.error().msg;
  }
}

TEST(NetConf, RuntimeDeviceIdWins) {
  auto c = parseNetConf(R"({"cniVersion":"1.0.0","name":"n","type":"ibcni","deviceID":"0000:af:06.1",
      "pciBusID":"0000:af:06.1","runtimeConfig":{"deviceID":"0000:af:06.2"}})",
                        Command::kAdd);
  ASSERT_TRUE(c) << c.error().msg;
  EXPECT_EQ(c->deviceId->text, "0000:af:06.2");
}

TEST(NetConf, UnknownKeysAreReported) {
  auto c = parseNetConf(conf(R"("mtuu":9000)"), Command::kAdd);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->unknownKeys.size(), 1u);
  EXPECT_EQ(c->unknownKeys.front(), "mtuu");
}

struct BadCase {
  std::string extra;
  std::string field;  // must appear in the message
};

class NetConfInvalid : public ::testing::TestWithParam<BadCase> {};

TEST_P(NetConfInvalid, Error7NamesFieldAndValue) {
  // The bad field replaces or joins the base config.
  const auto& p = GetParam();
  std::string text = R"({"cniVersion":"1.0.0","name":"ibnet","type":"ibcni",)" + p.extra + "}";
  auto c = parseNetConf(text, Command::kAdd);
  ASSERT_FALSE(c) << text;
  EXPECT_EQ(c.error().code, Errc::kInvalidConfig) << c.error().msg;
  EXPECT_NE(c.error().msg.find(p.field), std::string::npos) << c.error().msg;
}

INSTANTIATE_TEST_SUITE_P(
    Fields, NetConfInvalid,
    ::testing::Values(BadCase{R"("device":"vf0","mode":"ipoibx")", "mode"},
                      BadCase{R"("device":"a/b")", "device"},
                      BadCase{R"("device":"abcdefghijklmnop")", "device"},
                      BadCase{R"("device":7)", "device"},
                      BadCase{R"("deviceID":"04:00")", "deviceID"},
                      BadCase{R"("deviceID":"0000:04:00.5","device":"vf0")", "device"},
                      BadCase{R"("mode":"sriov")", "deviceID"},
                      BadCase{R"("device":"vf0","mtu":67)", "mtu"},
                      BadCase{R"("device":"vf0","mtu":"1500")", "mtu"},
                      BadCase{R"("device":"vf0","mtu":70000)", "mtu"},
                      BadCase{R"("device":"vf0","ipam":[])", "ipam"},
                      BadCase{R"("device":"vf0","ipam":{"subnet":"10.0.0.0/8"})", "ipam.type"},
                      BadCase{R"("device":"vf0","ipam":{"type":"../host-local"})", "ipam.type"},
                      BadCase{R"("device":"vf0","ipam":{"type":5})", "ipam.type"},
                      BadCase{R"("device":"vf0","dns":{"nameservers":["x"]})", "dns.nameservers"},
                      BadCase{R"("device":"vf0","logLevel":"verbose")", "logLevel"},
                      BadCase{R"("device":"vf0","logFile":"relative.log")", "logFile"},
                      BadCase{R"("device":"vf0","stateDir":"rel")", "stateDir"},
                      BadCase{R"("device":"vf0","runtimeConfig":{"ips":["10.1.2"]})", "runtimeConfig.ips[0]"},
                      BadCase{R"("device":"vf0","runtimeConfig":{"mac":"00:11"})", "runtimeConfig.mac"},
                      BadCase{R"("device":"vf0","runtimeConfig":{"deviceID":"x"})", "runtimeConfig.deviceID"},
                      BadCase{R"("device":"vf0","runtimeConfig":{"infinibandGUID":"c2:11"})",
                              "runtimeConfig.infinibandGUID"},
                      BadCase{R"("device":"vf0","runtimeConfig":{"infinibandGUID":"00:00:00:00:00:00:00:00"})",
                              "runtimeConfig.infinibandGUID"},
                      BadCase{R"("device":"vf0","args":{"cni":{"ips":[1]}})", "args.cni.ips[0]"},
                      BadCase{R"("device":"vf0","prevResult":{"ips":[{"address":"10.1.2.3"}]})",
                              "prevResult.ips[0].address"}));

TEST(NetConf, NameIsRequiredAndValidated) {
  auto missing = parseNetConf(R"({"cniVersion":"1.0.0","type":"ibcni","device":"vf0"})", Command::kAdd);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Errc::kInvalidConfig);
  EXPECT_NE(missing.error().msg.find("name"), std::string::npos);
  auto bad = parseNetConf(R"({"cniVersion":"1.0.0","name":"-x/y","type":"ibcni","device":"vf0"})", Command::kAdd);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Errc::kInvalidConfig);
}

TEST(NetConf, VersionErrorsComeFirst) {
  for (const char* v : {"9.9.9", "0.2.0", "abc", "1.2.3.4"}) {
    auto c = parseNetConf(R"({"cniVersion":")" + std::string(v) + R"(","mtu":"bad"})", Command::kAdd);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code, Errc::kIncompatibleVersion) << v;
  }
  auto missing = parseNetConf(R"({"name":"n","device":"vf0"})", Command::kAdd);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Errc::kIncompatibleVersion);
  EXPECT_NE(missing.error().msg.find("0.1.0"), std::string::npos);
  auto unsupported = parseNetConf(conf("", "9.9.9"), Command::kAdd);
  EXPECT_NE(unsupported.error().details.find("1.1.0"), std::string::npos);
}

TEST(NetConf, VerbsGatedByVersion) {
  EXPECT_EQ(parseNetConf(conf("", "0.3.1"), Command::kCheck).error().code, Errc::kIncompatibleVersion);
  EXPECT_TRUE(parseNetConf(conf("", "0.4.0"), Command::kCheck));
  EXPECT_EQ(parseNetConf(conf("", "1.0.0"), Command::kGc).error().code, Errc::kIncompatibleVersion);
  EXPECT_EQ(parseNetConf(conf("", "1.0.0"), Command::kStatus).error().code, Errc::kIncompatibleVersion);
  EXPECT_TRUE(parseNetConf(conf("", "1.1.0"), Command::kStatus));
}

TEST(NetConf, BadJsonIsError6) {
  for (const char* text : {"{bad", "", "[1,2]", "\"str\""}) {
    auto c = parseNetConf(text, Command::kAdd);
    ASSERT_FALSE(c) << text;
    EXPECT_EQ(c.error().code, Errc::kDecodingFailure) << text;
  }
}

// Found by prev_result_fuzz: the parser throws out_of_range (not parse_error) for a number beyond a
// double's range, which escaped parseNetConf.
TEST(NetConf, NumberOutOfRangeIsError6NotAnEscapedException) {
  for (const char* text : {R"({"cniVersion":"1.0.0","name":"n","type":"ibcni","mtu":1e999})",
                           R"({"iress":999e300000000000096323370403684679661}]})",
                           R"({"cniVersion":"1.0.0","name":"n","type":"ibcni","prevResult":{"ips":[{"x":-1e400}]}})"}) {
    auto c = parseNetConf(text, Command::kAdd);
    ASSERT_FALSE(c) << text;
    EXPECT_EQ(c.error().code, Errc::kDecodingFailure) << text;
    EXPECT_NE(c.error().msg.find("out of range"), std::string::npos) << c.error().msg;
  }
}

TEST(NetConf, DelAndGcNeedNoDevice) {
  EXPECT_TRUE(parseNetConf(R"({"cniVersion":"1.0.0","name":"n","type":"ibcni"})", Command::kDel));
  EXPECT_TRUE(parseNetConf(R"({"cniVersion":"1.1.0","name":"n","type":"ibcni"})", Command::kGc));
}

TEST(NetConf, GcAttachmentsBothKeys) {
  auto valid = parseNetConf(R"({"cniVersion":"1.1.0","name":"n","type":"ibcni",
      "cni.dev/valid-attachments":[{"containerID":"c1","ifname":"net1"}]})",
                            Command::kGc);
  ASSERT_TRUE(valid) << valid.error().msg;
  ASSERT_TRUE(valid->validAttachments);
  ASSERT_EQ(valid->validAttachments->size(), 1u);
  EXPECT_EQ(valid->validAttachments->at(0), (cni::AttachmentKey{"c1", "net1"}));
  auto legacy = parseNetConf(R"({"cniVersion":"1.1.0","name":"n","type":"ibcni",
      "cni.dev/attachments":[{"containerID":"c2","ifname":"net2"}]})",
                             Command::kGc);
  ASSERT_TRUE(legacy && legacy->validAttachments);
  EXPECT_EQ(legacy->validAttachments->at(0).containerId, "c2");
  auto bad = parseNetConf(R"({"cniVersion":"1.1.0","name":"n","type":"ibcni",
      "cni.dev/valid-attachments":[{"containerID":"c1"}]})",
                          Command::kGc);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Errc::kInvalidConfig);
}

TEST(NetConf, PrevResultParsedInEveryVersion) {
  auto c = parseNetConf(conf(R"("prevResult":{"cniVersion":"0.4.0","interfaces":[{"name":"net1","sandbox":"/x"}],
      "ips":[{"version":"4","address":"10.1.2.3/24","gateway":"10.1.2.1","interface":0}],"routes":[{"dst":"0.0.0.0/0"}],"dns":{}})",
                             "0.4.0"),
                        Command::kCheck);
  ASSERT_TRUE(c) << c.error().msg;
  ASSERT_TRUE(c->prevResult);
  EXPECT_EQ(c->prevResult->ips[0].interface, 0);
  EXPECT_EQ(c->prevResult->ips[0].gateway->toString(), "10.1.2.1");
  EXPECT_EQ(c->prevResult->routes[0].dst.toString(), "0.0.0.0/0");
}

TEST(NetConf, IpamPluginRoleLeavesTheDelegatingPluginsKeysAlone) {
  // What macvlan hands its IPAM plugin: its own "mode", "master", "mtu" and more.
  auto c = parseNetConf(R"({"cniVersion":"1.0.0","name":"mv","type":"macvlan","mode":"bridge","master":"eth0",
      "mtu":"weird","device":"also/not/ours","logLevel":"panic","runtimeConfig":{"ips":["10.1.2.3/24"],"mac":"bad"},
      "ipam":{"type":"ibcni-ipam","subnet":"10.1.2.0/24"}})",
                        Command::kAdd, Role::kIpamPlugin);
  ASSERT_TRUE(c) << c.error().msg;
  EXPECT_EQ(c->ipamType, "ibcni-ipam");
  ASSERT_EQ(c->runtime.ips.size(), 1u);
  EXPECT_TRUE(c->unknownKeys.empty());
  auto noIpam = parseNetConf(R"({"cniVersion":"1.0.0","name":"mv","type":"macvlan"})", Command::kDel, Role::kIpamPlugin);
  ASSERT_FALSE(noIpam);
  EXPECT_EQ(noIpam.error().code, Errc::kInvalidConfig);
  EXPECT_NE(noIpam.error().msg.find("ipam.type"), std::string::npos);
  auto bad = parseNetConf(R"({"cniVersion":"1.0.0","name":"mv","runtimeConfig":{"ips":["nope"]},"ipam":{"type":"x"}})",
                          Command::kAdd, Role::kIpamPlugin);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().msg.find("runtimeConfig.ips[0]"), std::string::npos);
}

TEST(Preamble, LenientAboutEverythingButJson) {
  auto p = parsePreamble(R"({"cniVersion":"1.0.0","logLevel":"debug","logFile":"/tmp/x.log","mtu":"junk"})");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->cniVersion, "1.0.0");
  EXPECT_EQ(p->logLevel, LogLevel::kDebug);
  EXPECT_EQ(p->logFile, "/tmp/x.log");
  EXPECT_EQ(parsePreamble("nope").error().code, Errc::kDecodingFailure);
}

}  // namespace
}  // namespace ibcni::config
