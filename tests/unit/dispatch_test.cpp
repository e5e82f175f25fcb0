// SPDX-License-Identifier: Apache-2.0
// The protocol layer: environment table, version negotiation, error objects.
#include "ibcni/cni/cmd_args.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

using DispatchTest = PluginTest;

TEST_F(DispatchTest, VersionNeedsNothing) {
  auto getenv = [](const char* n) -> std::optional<std::string> {
    return std::string(n) == "CNI_COMMAND" ? std::optional<std::string>("VERSION") : std::nullopt;
  };
  for (const char* input : {"", R"({"cniVersion":"0.4.0"})", "garbage"}) {
    auto out = plugin::dispatch(getenv, input, true, deps_);
    ASSERT_EQ(out.exitCode, 0) << input;
    auto j = json::parse(out.stdoutText);
    EXPECT_EQ(j["supportedVersions"], json({"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}));
    EXPECT_EQ(j["cniVersion"], std::string(input).find("0.4.0") != std::string::npos ? "0.4.0" : "1.1.0");
  }
}

TEST_F(DispatchTest, LibcniVersionProbeEnvIsIgnored) {
  auto out = run("VERSION", json{{"cniVersion", "1.0.0"}}, {{"CNI_NETNS", "dummy"}, {"CNI_IFNAME", "dummy"}, {"CNI_PATH", "dummy"}});
  EXPECT_EQ(out.exitCode, 0);
}

TEST_F(DispatchTest, MissingOrUnknownCommandIs4) {
  auto none = run("", config());
  EXPECT_EQ(none.exitCode, 1);
  EXPECT_EQ(errorOf(none)["code"], 4);
  EXPECT_NE(errorOf(none)["msg"].get<std::string>().find("CNI_COMMAND"), std::string::npos);
  auto bogus = run("FOO", config());
  EXPECT_EQ(errorOf(bogus)["code"], 4);
}

TEST_F(DispatchTest, MissingVariablesAreNamedTogether) {
  auto out = run("ADD", config(), {{"CNI_CONTAINERID", ""}, {"CNI_IFNAME", ""}});
  EXPECT_EQ(out.exitCode, 1);
  auto e = errorOf(out);
  EXPECT_EQ(e["code"], 4);
  EXPECT_EQ(e["msg"], "required env variables [CNI_CONTAINERID,CNI_IFNAME] missing");
  EXPECT_EQ(e["cniVersion"], "1.0.0");
  EXPECT_EQ(errorOf(run("CHECK", config(), {{"CNI_NETNS", ""}}))["msg"], "required env variables [CNI_NETNS] missing");
  EXPECT_EQ(errorOf(run("GC", config("1.1.0"), {{"CNI_PATH", ""}}))["msg"], "required env variables [CNI_PATH] missing");
}

TEST_F(DispatchTest, DelNeedsNoNetns) {
  auto out = run("DEL", config(), {{"CNI_NETNS", ""}});
  EXPECT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_EQ(out.stdoutText, "");
}

TEST_F(DispatchTest, GcAndStatusIgnoreEmptyAttachmentVariables) {
  std::map<std::string, std::string> empty = {{"CNI_CONTAINERID", ""}, {"CNI_NETNS", ""}, {"CNI_IFNAME", ""}};
  EXPECT_EQ(run("GC", config("1.1.0"), empty).exitCode, 0);
  auto status = run("STATUS", config("1.1.0"), {{"CNI_CONTAINERID", ""}, {"CNI_NETNS", ""}, {"CNI_IFNAME", ""}, {"CNI_PATH", ""}});
  // STATUS needs no CNI_PATH of its own; with the fake IPAM "fake" not installed it reports 50.
  EXPECT_EQ(errorOf(status)["code"], 50);
}

TEST_F(DispatchTest, MalformedVariablesAre4) {
  for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{
           {"CNI_CONTAINERID", "-bad/id"},
           {"CNI_IFNAME", "abcdefghijklmnop"},
           {"CNI_IFNAME", "a/b"},
           {"CNI_IFNAME", "."},
           {"CNI_IFNAME", "has space"},
           {"CNI_NETNS", "relative/path"},
           {"CNI_ARGS", "NOEQUALS"},
           {"CNI_ARGS", "UNKNOWN=1"}}) {
    auto out = run("ADD", config(), {{var, value}});
    EXPECT_EQ(out.exitCode, 1) << var << "=" << value;
    auto e = errorOf(out);
    EXPECT_EQ(e["code"], 4) << var << "=" << value << " " << out.stdoutText;
    EXPECT_NE(e["msg"].get<std::string>().find(var), std::string::npos) << e["msg"];
  }
  EXPECT_TRUE(nl_.calls().empty()) << "nothing was touched";
}

// The one container-ID rule (cni::isValidContainerId): the spec's characters, at most 200 bytes,
// the bound the message states; the same rule keeps ibcni-ipam's store keys.
TEST_F(DispatchTest, AContainerIdOver200BytesIs4NamingTheBound) {
  auto out = run("ADD", config(), {{"CNI_CONTAINERID", std::string(201, 'a')}});
  EXPECT_EQ(errorOf(out)["code"], 4) << out.stdoutText;
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("must be 1-200 letters"), std::string::npos) << out.stdoutText;
  EXPECT_TRUE(nl_.calls().empty()) << "nothing was touched";
  EXPECT_TRUE(cni::isValidContainerId(std::string(200, 'a')));
  EXPECT_FALSE(cni::isValidContainerId(std::string(201, 'a')));
  EXPECT_FALSE(cni::isValidContainerId("-a"));
  EXPECT_FALSE(cni::isValidContainerId(""));
}

TEST_F(DispatchTest, KubernetesCniArgsAreAccepted) {
  auto out = run("ADD", config(),
                 {{"CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID=u"}});
  EXPECT_EQ(out.exitCode, 0) << out.stdoutText;
}

TEST_F(DispatchTest, UnsupportedVersionIs1BeforeAnySideEffect) {
  for (const char* v : {"9.9.9", "0.2.0", "0.1.0"}) {
    auto out = run("ADD", config(v));
    auto e = errorOf(out);
    EXPECT_EQ(e["code"], 1) << v;
    EXPECT_NE(e["details"].get<std::string>().find("1.1.0"), std::string::npos);
  }
  auto noVersion = config();
  noVersion.erase("cniVersion");
  EXPECT_EQ(errorOf(run("ADD", noVersion))["code"], 1);
  EXPECT_TRUE(nl_.calls().empty());
  EXPECT_TRUE(ipam_.calls.empty());
}

TEST_F(DispatchTest, VerbsGatedByVersion) {
  EXPECT_EQ(errorOf(run("CHECK", config("0.3.1")))["code"], 1);
  EXPECT_EQ(errorOf(run("GC", config("1.0.0")))["code"], 1);
  EXPECT_EQ(errorOf(run("STATUS", config("1.0.0")))["code"], 1);
}

TEST_F(DispatchTest, BadJsonIs6AndBadStdinIs5) {
  auto getenv = [](const char* n) -> std::optional<std::string> {
    std::map<std::string, std::string> v = {{"CNI_COMMAND", "ADD"}, {"CNI_CONTAINERID", "c1"}, {"CNI_NETNS", kPodPath}, {"CNI_IFNAME", "net1"}};
    auto it = v.find(n);
    return it == v.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  auto bad = plugin::dispatch(getenv, "{bad", true, deps_);
  EXPECT_EQ(json::parse(bad.stdoutText)["code"], 6);
  auto io = plugin::dispatch(getenv, "", false, deps_);
  EXPECT_EQ(json::parse(io.stdoutText)["code"], 5);
}

TEST_F(DispatchTest, InvalidConfigIs7NamingTheField) {
  auto conf = config();
  conf["mtu"] = "big";
  auto e = errorOf(run("ADD", conf));
  EXPECT_EQ(e["code"], 7);
  EXPECT_NE(e["msg"].get<std::string>().find("mtu"), std::string::npos);
  EXPECT_NE(e["msg"].get<std::string>().find("\"big\""), std::string::npos);
}

TEST_F(DispatchTest, ReservedAndUnknownKeysAreTolerated) {
  auto conf = config();
  conf["cni.dev/future"] = 1;
  conf["capabilities"] = {{"infinibandGUID", true}, {"deviceID", true}};
  conf["somethingNew"] = true;
  conf["args"] = {{"cni", {{"labels", json::array({{{"key", "a"}, {"value", "b"}}})}, {"zzz", 1}}}};
  EXPECT_EQ(run("ADD", conf).exitCode, 0);
}

TEST_F(DispatchTest, NetnsMustBeANetworkNamespace) {
  const auto before = snapshot(host_);
  auto missing = errorOf(run("ADD", config(), {{"CNI_NETNS", "/var/run/netns/nope"}}));
  EXPECT_EQ(missing["code"], 4);
  EXPECT_NE(missing["msg"].get<std::string>().find("does not exist"), std::string::npos);
  netns_.addNonNetns("/etc/hostname");
  auto notNs = errorOf(run("ADD", config(), {{"CNI_NETNS", "/etc/hostname"}}));
  EXPECT_EQ(notNs["code"], 4);
  EXPECT_NE(notNs["msg"].get<std::string>().find("not a network namespace"), std::string::npos);
  auto own = errorOf(run("ADD", config(), {{"CNI_NETNS", FakeNetnsProvider::kHostPath}}));
  EXPECT_EQ(own["code"], 4);
  EXPECT_NE(own["msg"].get<std::string>().find("own network namespace"), std::string::npos);
  EXPECT_EQ(snapshot(host_), before);
}

}  // namespace
}  // namespace ibcni::testing

namespace ibcni::testing {
namespace {

using IpamRoleTest = PluginTest;

TEST_F(IpamRoleTest, IpamPluginVerbsGoStraightToTheIpam) {
  plugin::IpamVerbs verbs(ipam_);
  std::map<std::string, std::string> vars = {{"CNI_COMMAND", "ADD"}, {"CNI_CONTAINERID", "c7"}, {"CNI_NETNS", kPodPath},
                                             {"CNI_IFNAME", "eth1"}, {"CNI_PATH", "/opt/cni/bin"}};
  auto getenv = [&vars](const char* n) -> std::optional<std::string> {
    auto it = vars.find(n);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  // macvlan's configuration, with keys that mean nothing to ibcni.
  json conf = {{"cniVersion", "1.0.0"}, {"name", "mv"},       {"type", "macvlan"},
               {"mode", "bridge"},      {"master", "eth0"}, {"ipam", {{"type", "ibcni-ipam"}}}};
  auto add = plugin::dispatch(getenv, conf.dump(), true, verbs);
  ASSERT_EQ(add.exitCode, 0) << add.stdoutText;
  auto r = json::parse(add.stdoutText);
  EXPECT_EQ(r["ips"][0]["address"], "10.1.2.3/24");
  EXPECT_FALSE(r.contains("interfaces")) << "an IPAM result names no interface";
  EXPECT_EQ(ipam_.calls.back(), "ADD c7 eth1");
  EXPECT_TRUE(nl_.calls().empty()) << "no device is touched";
  vars["CNI_COMMAND"] = "DEL";
  EXPECT_EQ(plugin::dispatch(getenv, conf.dump(), true, verbs).exitCode, 0);
  EXPECT_TRUE(ipam_.allocations.empty());
  conf.erase("ipam");
  auto noIpam = plugin::dispatch(getenv, conf.dump(), true, verbs);
  EXPECT_EQ(json::parse(noIpam.stdoutText)["code"], 7);
}

}  // namespace
}  // namespace ibcni::testing
