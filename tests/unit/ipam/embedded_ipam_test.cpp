// SPDX-License-Identifier: Apache-2.0
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "plugin/dispatch.h"
#include "fake_store.h"
#include "lib/result/result_json.h"
#include "store_test_util.h"

namespace ibcni::ipam::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class EmbeddedIpamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    checker_ = std::make_shared<FakeNetnsChecker>();
    EmbeddedIpamOptions o;
    o.defaultDataDir = tmp_.path() + "/default";
    o.netnsChecker = checker_;
    o.clock = [] { return std::chrono::system_clock::time_point(std::chrono::seconds(1700000000)); };
    ipam_ = std::make_unique<EmbeddedIpam>(o);
  }
  std::string config(const std::string& ipamBody, const std::string& extra = "") {
    return netConfig(tmp_.path(), ipamBody, extra);
  }

  TempDir tmp_;
  std::shared_ptr<FakeNetnsChecker> checker_;
  std::unique_ptr<EmbeddedIpam> ipam_;
};

TEST_F(EmbeddedIpamTest, ResultIsWhatHostLocalReturns) {
  auto conf = config(R"("ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "fd00:1::/64", "gateway": "fd00:1::fe"}]],
                        "routes": [{"dst": "0.0.0.0/0"}, {"dst": "fd00:2::/64", "gw": "fd00:1::fe"}],
                        "dns": {"nameservers": ["10.96.0.10"], "search": ["svc.local"]})");
  auto r = ipam_->add(makeRequest(conf, "c1", "/run/netns/c1"));
  ASSERT_TRUE(r) << r.error().msg;
  ASSERT_EQ(r->ips.size(), 2u);
  EXPECT_EQ(r->ips[0].address.toString(), "10.1.2.2/24");
  EXPECT_EQ(r->ips[0].gateway, ip("10.1.2.1"));
  EXPECT_FALSE(r->ips[0].interface.has_value());
  EXPECT_EQ(r->ips[1].address.toString(), "fd00:1::1/64");
  EXPECT_EQ(r->ips[1].gateway, ip("fd00:1::fe"));
  ASSERT_EQ(r->routes.size(), 2u);
  EXPECT_EQ(r->routes[1].gw, ip("fd00:1::fe"));
  EXPECT_EQ(r->dns.nameservers, std::vector<std::string>{"10.96.0.10"});
  EXPECT_TRUE(r->interfaces.empty());
  EXPECT_TRUE(fs::exists(tmp_.path() + "/net1/attachments/c1:net1"));
}

// ipam.resolvConf is read at ADD, as host-local reads it; each field ipam.dns sets replaces the
// file's (an empty domain too). A resolv.conf that cannot be read fails ADD before anything is
// allocated, and never DEL.
TEST_F(EmbeddedIpamTest, ResolvConfIsReadAtAddAndDnsReplacesItFieldByField) {
  const std::string path = tmp_.path() + "/resolv.conf";
  std::ofstream(path) << "# comment\nnameserver 10.0.0.10\nnameserver 10.0.0.11\ndomain example.com\n"
                         "search a.example b.example\noptions ndots:2 edns0\n; other comment\nbogus\n";
  const std::string body = R"("ranges": [[{"subnet": "10.1.2.0/24"}]], "resolvConf": ")" + path + "\"";
  auto r = ipam_->add(makeRequest(config(body + R"(, "dns": {"domain": "override.example"})"), "c1"));
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(r->dns.nameservers, (std::vector<std::string>{"10.0.0.10", "10.0.0.11"}));
  EXPECT_EQ(r->dns.domain, "override.example");
  EXPECT_EQ(r->dns.search, (std::vector<std::string>{"a.example", "b.example"}));
  EXPECT_EQ(r->dns.options, (std::vector<std::string>{"ndots:2", "edns0"}));
  auto emptied = ipam_->add(makeRequest(config(body + R"(, "dns": {"domain": "", "nameservers": ["10.9.9.9"]})"), "c2"));
  ASSERT_TRUE(emptied) << emptied.error().msg;
  EXPECT_EQ(emptied->dns.domain, "");
  EXPECT_EQ(emptied->dns.nameservers, (std::vector<std::string>{"10.9.9.9"}));
  EXPECT_EQ(emptied->dns.search, (std::vector<std::string>{"a.example", "b.example"}));

  fs::remove(path);
  auto gone = ipam_->add(makeRequest(config(body), "c3"));
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(gone.error().msg, HasSubstr("ipam.resolvConf"));
  EXPECT_THAT(gone.error().msg, HasSubstr("cannot be read"));
  EXPECT_FALSE(fs::exists(tmp_.path() + "/net1/attachments/c3:net1")) << "nothing allocated";
  EXPECT_TRUE(ipam_->del(makeRequest(config(body), "c1")));
  EXPECT_FALSE(fs::exists(tmp_.path() + "/net1/attachments/c1:net1"));
}

TEST_F(EmbeddedIpamTest, LegacySubnetAndDefaultDataDir) {
  std::string conf = R"({"cniVersion": "0.4.0", "name": "legacy", "ipam": {"type": "ibcni-ipam",
                         "subnet": "10.9.0.0/16", "rangeStart": "10.9.1.10", "gateway": "10.9.0.1"}})";
  auto r = ipam_->add(makeRequest(conf, "c1"));
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(r->ips[0].address.toString(), "10.9.1.10/16");
  EXPECT_EQ(r->ips[0].gateway, ip("10.9.0.1"));
  EXPECT_TRUE(fs::exists(tmp_.path() + "/default/legacy/ips/10.9.1.10"));
}

TEST_F(EmbeddedIpamTest, RequestedAddressPriorityIsRuntimeConfigThenArgsThenCniArgs) {
  const std::string body = R"("ranges": [[{"subnet": "10.1.2.0/24"}]])";
  auto all = ipam_->add(makeRequest(config(body, R"("runtimeConfig": {"ips": ["10.1.2.10/24"]},
                                                    "args": {"cni": {"ips": ["10.1.2.20"]}}, )"),
                                    "c1", "", "IgnoreUnknown=1;IP=10.1.2.30"));
  ASSERT_TRUE(all) << all.error().msg;
  EXPECT_EQ(all->ips[0].address.toString(), "10.1.2.10/24");
  auto args =
      ipam_->add(makeRequest(config(body, R"("args": {"cni": {"ips": ["10.1.2.20"]}}, )"), "c2", "", "IP=10.1.2.30"));
  ASSERT_TRUE(args) << args.error().msg;
  EXPECT_EQ(args->ips[0].address.toString(), "10.1.2.20/24");
  auto env = ipam_->add(makeRequest(config(body), "c3", "", "IP=10.1.2.30"));
  ASSERT_TRUE(env) << env.error().msg;
  EXPECT_EQ(env->ips[0].address.toString(), "10.1.2.30/24");
}

TEST_F(EmbeddedIpamTest, CniArgsCommaListServesDualStack) {
  auto conf = config(R"("ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "fd00:1::/64"}]])");
  auto r = ipam_->add(makeRequest(conf, "c1", "", "IgnoreUnknown=1;K8S_POD_NAME=p;IP=10.1.2.9/24,fd00:1::9/64"));
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(r->ips[0].address.toString(), "10.1.2.9/24");
  EXPECT_EQ(r->ips[1].address.toString(), "fd00:1::9/64");
}

TEST_F(EmbeddedIpamTest, ReservationFollowsThePodNamedInCniArgs) {
  auto conf = config(R"("ranges": [[{"subnet": "10.1.2.0/24"}]], "reservations": {"prod/db-0": "10.1.2.77"})");
  auto other = ipam_->add(makeRequest(conf, "c1", "", "K8S_POD_NAMESPACE=prod;K8S_POD_NAME=web-0"));
  ASSERT_TRUE(other);
  EXPECT_EQ(other->ips[0].address.toString(), "10.1.2.2/24");
  auto db =
      ipam_->add(makeRequest(conf, "c2", "", "IgnoreUnknown=1;K8S_POD_NAMESPACE=prod;K8S_POD_NAME=db-0;K8S_POD_UID=u"));
  ASSERT_TRUE(db) << db.error().msg;
  EXPECT_EQ(db->ips[0].address.toString(), "10.1.2.77/24");
}

TEST_F(EmbeddedIpamTest, AddIsIdempotentAndRecordsTheNetnsInode) {
  checker_->inodes["/run/netns/c1"] = 4026532999;
  auto conf = config(R"("ranges": [[{"subnet": "10.1.2.0/24"}]])");
  auto a = ipam_->add(makeRequest(conf, "c1", "/run/netns/c1"));
  auto b = ipam_->add(makeRequest(conf, "c1", "/run/netns/c1"));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(countEntries(tmp_.path() + "/net1/ips"), 1u);
  std::ifstream in(tmp_.path() + "/net1/attachments/c1:net1");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("\"netnsInode\":4026532999"));
  EXPECT_THAT(text, HasSubstr("\"createdAt\":\"2023-11-14T22:13:20Z\""));
}

TEST_F(EmbeddedIpamTest, DelIsIdempotentAndCheckFollowsIt) {
  auto conf = config(R"("ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "fd00:1::/64"}]])");
  auto req = makeRequest(conf, "c1");
  ASSERT_TRUE(ipam_->add(req));
  EXPECT_TRUE(ipam_->check(req));
  ASSERT_TRUE(ipam_->del(req));
  ASSERT_TRUE(ipam_->del(req)) << "a second DEL succeeds";
  ASSERT_TRUE(ipam_->del(makeRequest(conf, "never-added")));
  auto check = ipam_->check(req);
  ASSERT_FALSE(check);
  EXPECT_EQ(check.error().code, cni::Errc::kCheckFailed);
  EXPECT_THAT(check.error().msg, HasSubstr("no addresses are held for containerID c1 ifname net1"));
  EXPECT_EQ(countEntries(tmp_.path() + "/net1/ips"), 0u);
}

TEST_F(EmbeddedIpamTest, CheckComparesWithPrevResult) {
  const std::string body = R"("ranges": [[{"subnet": "10.1.2.0/24"}]])";
  ASSERT_TRUE(ipam_->add(makeRequest(config(body), "c1")));
  EXPECT_TRUE(
      ipam_->check(makeRequest(config(body, R"("prevResult": {"ips": [{"address": "10.1.2.2/24"}]}, )"), "c1")));
  auto wrong =
      ipam_->check(makeRequest(config(body, R"("prevResult": {"ips": [{"address": "10.1.2.3/24"}]}, )"), "c1"));
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, cni::Errc::kCheckFailed);
  EXPECT_THAT(wrong.error().msg, HasSubstr("holds 10.1.2.2, which prevResult.ips does not list"));
  // The configuration grew a range set the attachment has no address in.
  auto grown =
      ipam_->check(makeRequest(config(R"("ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "fd00::/64"}]])"), "c1"));
  ASSERT_FALSE(grown);
  EXPECT_THAT(grown.error().msg, HasSubstr("holds no address in ipam.ranges[1]"));
}

TEST_F(EmbeddedIpamTest, GcReleasesWhatTheRuntimeNoLongerLists) {
  const std::string body = R"("ranges": [[{"subnet": "10.1.2.0/24"}]])";
  for (const char* c : {"a", "b", "c"}) {
    ASSERT_TRUE(ipam_->add(makeRequest(config(body), c)));
  }
  auto gcConf = config(body, R"("cni.dev/valid-attachments": [{"containerID": "b", "ifname": "net1"}], )");
  ASSERT_TRUE(ipam_->gc(makeRequest(gcConf, "", "", "", "net1", cni::Command::kGc)));
  EXPECT_EQ(countEntries(tmp_.path() + "/net1/ips"), 1u);
  EXPECT_TRUE(ipam_->check(makeRequest(config(body), "b")));
  auto gcAll = config(body, R"("cni.dev/attachments": [], )");
  ASSERT_TRUE(ipam_->gc(makeRequest(gcAll, "", "", "", "net1", cni::Command::kGc)));
  EXPECT_EQ(countEntries(tmp_.path() + "/net1/ips"), 0u);
  // No key at all is an empty list too (what `cnitool gc` sends): everything is released.
  for (const char* c : {"d", "e"}) {
    ASSERT_TRUE(ipam_->add(makeRequest(config(body), c)));
  }
  ASSERT_TRUE(ipam_->gc(makeRequest(config(body), "", "", "", "net1", cni::Command::kGc)));
  EXPECT_EQ(countEntries(tmp_.path() + "/net1/ips"), 0u);
}

TEST_F(EmbeddedIpamTest, StatusReportsExhaustionAndUnwritableDataDir) {
  const std::string body = R"("ranges": [[{"subnet": "10.0.0.0/30"}]])";  // one address: .2
  EXPECT_TRUE(ipam_->status(makeRequest(config(body), "")));
  ASSERT_TRUE(ipam_->add(makeRequest(config(body), "a", "/run/netns/a")));
  auto full = ipam_->status(makeRequest(config(body), ""));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, cni::Errc::kPluginNotAvailable);
  EXPECT_THAT(full.error().msg,
              HasSubstr("ipam.ranges[0] is exhausted: 1 addresses can be handed out and 1 are in use"));
  checker_->state["/run/netns/a"] = os::NetnsLiveness::kGone;
  EXPECT_TRUE(ipam_->status(makeRequest(config(body), ""))) << "ADD would reclaim the dead pod's address";

  std::ofstream(tmp_.path() + "/file") << "x";
  auto bad = ipam_->status(makeRequest(netConfig(tmp_.path() + "/file/sub", body), ""));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, cni::Errc::kPluginNotAvailable);
  EXPECT_THAT(bad.error().msg, HasSubstr("ipam data directory " + tmp_.path() + "/file/sub/net1"));
}

TEST_F(EmbeddedIpamTest, ExhaustionIs108AndReclaimsDeadPodsFirst) {
  const std::string body = R"("ranges": [[{"subnet": "10.0.0.0/29"}]])";  // .2-.6
  for (const char* c : {"a", "b", "c", "d", "e"}) {
    ASSERT_TRUE(ipam_->add(makeRequest(config(body), c, std::string("/run/netns/") + c)));
  }
  auto full = ipam_->add(makeRequest(config(body), "f", "/run/netns/f"));
  ASSERT_FALSE(full);
  EXPECT_EQ(static_cast<int>(full.error().code), 108);
  EXPECT_THAT(full.error().msg, HasSubstr("no free address in ipam.ranges[0] = 10.0.0.0/29 (10.0.0.2-10.0.0.6): 5 "
                                          "addresses can be handed out and 5 are in use"));
  checker_->state["/run/netns/d"] = os::NetnsLiveness::kGone;
  auto r = ipam_->add(makeRequest(config(body), "f", "/run/netns/f"));
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(r->ips[0].address.toString(), "10.0.0.5/29");
}

TEST_F(EmbeddedIpamTest, ReclaimReleasesOnlyGoneNamespaces) {
  const std::string body = R"("ranges": [[{"subnet": "10.1.2.0/24"}]])";
  for (const char* c : {"alive", "gone", "unknown"}) {
    ASSERT_TRUE(ipam_->add(makeRequest(config(body), c, std::string("/run/netns/") + c,
                                       std::string("K8S_POD_NAMESPACE=ns;K8S_POD_NAME=") + c)));
  }
  checker_->state["/run/netns/alive"] = os::NetnsLiveness::kAlive;
  checker_->state["/run/netns/gone"] = os::NetnsLiveness::kGone;
  auto r = ipam_->reclaim(makeRequest(config(body), ""));
  ASSERT_TRUE(r) << r.error().msg;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].containerId, "gone");
  EXPECT_EQ((*r)[0].pod, "ns/gone");
  EXPECT_EQ((*r)[0].addresses, std::vector<std::string>{"10.1.2.3"});
  EXPECT_EQ(countEntries(tmp_.path() + "/net1/ips"), 2u);
}

// The request is validated where ibcni-ipam receives it (the dispatcher: CNI_* variables, CNI_ARGS,
// the configuration), before the embedded IPAM sees typed values; the codes are the IPAM plugin's.
TEST_F(EmbeddedIpamTest, InvalidInputsHaveTheirCodes) {
  auto add = [&](const std::string& stdinText, const std::string& cid, const std::string& ifName = "net1",
                 const std::string& cniArgs = "") -> cni::Result<void> {
    const std::map<std::string, std::string> env = {{"CNI_COMMAND", "ADD"}, {"CNI_CONTAINERID", cid},
                                                    {"CNI_NETNS", "/run/netns/x"}, {"CNI_IFNAME", ifName},
                                                    {"CNI_ARGS", cniArgs}, {"CNI_PATH", "/opt/cni/bin"}};
    plugin::IpamVerbs verbs(*ipam_);
    auto out = plugin::dispatch(
        [&](const char* name) -> std::optional<std::string> {
          auto it = env.find(name);
          return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
        },
        stdinText, true, verbs);
    if (out.exitCode == 0) {
      return {};
    }
    auto e = result::parseError(out.stdoutText);
    EXPECT_TRUE(e) << out.stdoutText;
    return std::unexpected(e ? *e : cni::Error{});
  };
  const std::string good = config(R"("ranges": [[{"subnet": "10.1.2.0/24"}]])");
  auto badId = add(good, "../etc");
  ASSERT_FALSE(badId);
  EXPECT_EQ(badId.error().code, cni::Errc::kInvalidEnvironment);
  EXPECT_THAT(badId.error().msg, HasSubstr("CNI_CONTAINERID"));
  auto badIf = add(good, "c1", "a/b");
  ASSERT_FALSE(badIf);
  EXPECT_THAT(badIf.error().msg, HasSubstr("CNI_IFNAME"));
  auto badArgs = add(good, "c1", "net1", "FOO=bar");
  ASSERT_FALSE(badArgs);
  EXPECT_EQ(badArgs.error().code, cni::Errc::kInvalidEnvironment);
  auto badConf = add(config(R"("ranges": [[{"subnet": "10.1.2.0/24", "rangeEnd": "10.1.3.1"}]])"), "c1");
  ASSERT_FALSE(badConf);
  EXPECT_EQ(badConf.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(badConf.error().msg, HasSubstr("invalid ipam.ranges[0][0].rangeEnd = \"10.1.3.1\""));
  auto notJson = add("{", "c1");
  ASSERT_FALSE(notJson);
  EXPECT_EQ(notJson.error().code, cni::Errc::kDecodingFailure);
  EXPECT_EQ(countEntries(tmp_.path() + "/net1/ips"), 0u);
}

}  // namespace
}  // namespace ibcni::ipam::testing
