// SPDX-License-Identifier: Apache-2.0
// KubernetesBlockBackend without a server: its Lease names and label values (valid DNS-1123
// subdomains of at most 253 characters, readable for the usual keys, and never the same name for
// two distinct (pool, kind, key), IPv6 keys and awkward bytes included), its options' checks, and
// what every call refuses before sending anything (malformed names, a Lease name too long,
// forgetNode), and the mark of the newest write a definition read comes after.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "block_backend_print.h"
#include "block_backend_test_util.h"
#include "ipam/backends/etcd_block_backend.h"
#include "ipam/backends/k8s_api.h"
#include "ipam/backends/k8s_block_backend.h"
#include "ipam/config/ipam_config.h"
#include "ipam/policy/allocation_space.h"

namespace ibcni::ipam {
namespace {

const std::regex kSubdomain(R"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)");
const std::regex kLabelValue(R"((([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?)");

using K = KubernetesBlockBackend;

TEST(K8sLeaseName, UsualKeysStayReadable) {
  EXPECT_EQ(K::leaseName(ClaimKind::kBlock, "ib-pool", "10.56.0.32-27"), "ibcni-ib-pool--b--10.56.0.32-27");
  EXPECT_EQ(K::leaseName(ClaimKind::kAddress, "ib-pool", "10.56.0.5"), "ibcni-ib-pool--a--10.56.0.5");
  EXPECT_EQ(K::leaseName(ClaimKind::kBlock, "p", "fd00::-120"), "ibcni-p--b--fd00z3az3a-120");
  EXPECT_EQ(K::poolLeaseName("ib-pool"), "ibcni-ib-pool--pool");
  EXPECT_EQ(K::demandLeaseName("ib-pool", "node-7"), "ibcni-ib-pool--d--node-7");
}

TEST(K8sLeaseName, DistinctKeysNeverShareANameAndEveryNameIsValid) {
  std::vector<std::string> pieces{"a",   "z",   "-",    ".",      ":",           "A",   "0",   "--",
                                  "-b-", "b",   "pool", "fd00::", "10.0.0.0-24", "::1", "x.y", "a--b",
                                  "z2d", "z3a", "-a",   "a-",     ".a",          "a."};
  std::mt19937 rng(7);
  std::vector<std::string> names;
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < n; ++j) {
      s += pieces[rng() % pieces.size()];
    }
    names.push_back(s);
  }
  std::map<std::string, std::string> seen;  // lease name -> what made it
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& pool = names[i];
    const auto& key = names[(i * 7 + 3) % names.size()];
    for (const auto kind : {ClaimKind::kBlock, ClaimKind::kAddress}) {
      const std::string made = (kind == ClaimKind::kBlock ? "b:" : "a:") + pool + "|" + key;
      const std::string name = K::leaseName(kind, pool, key);
      ASSERT_FALSE(name.empty());
      EXPECT_TRUE(std::regex_match(name, kSubdomain)) << name << " from " << made;
      const auto [it, fresh] = seen.emplace(name, made);
      EXPECT_TRUE(fresh || it->second == made) << name << " from both " << it->second << " and " << made;
    }
    const std::string pn = K::poolLeaseName(pool);
    EXPECT_TRUE(std::regex_match(pn, kSubdomain)) << pn;
    const auto [it, fresh] = seen.emplace(pn, "pool:" + pool);
    EXPECT_TRUE(fresh || it->second == "pool:" + pool) << pn << " from both " << it->second << " and pool " << pool;
    const std::string dn = K::demandLeaseName(pool, key);
    EXPECT_TRUE(std::regex_match(dn, kSubdomain)) << dn;
    const std::string dmade = "d:" + pool + "|" + key;
    const auto [dt, dfresh] = seen.emplace(dn, dmade);
    EXPECT_TRUE(dfresh || dt->second == dmade) << dn << " from both " << dt->second << " and " << dmade;
  }
}

TEST(K8sLeaseName, TheLongestIPv6KeyFitsAndTooLongIsEmpty) {
  const std::string pool(63, 'p');
  const std::string v6 = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff-128";
  const std::string name = K::leaseName(ClaimKind::kBlock, pool, v6);
  ASSERT_FALSE(name.empty());
  EXPECT_LE(name.size(), 253U);
  EXPECT_TRUE(K::leaseName(ClaimKind::kBlock, std::string(100, ':'), v6).empty());
  EXPECT_TRUE(K::poolLeaseName(std::string(90, ':')).empty());
  EXPECT_TRUE(K::demandLeaseName(std::string(50, ':'), std::string(50, ':')).empty());
}

TEST(K8sLabelValue, ValidValuesStayOthersAreHashed) {
  EXPECT_EQ(K::labelValue("node-7.example"), "node-7.example");
  const std::string longName(80, 'n');
  const std::string h = K::labelValue(longName);
  EXPECT_TRUE(std::regex_match(h, kLabelValue)) << h;
  EXPECT_EQ(h.size(), 17U);
  EXPECT_NE(K::labelValue(longName + "x"), h);
  EXPECT_TRUE(std::regex_match(K::labelValue("a b"), kLabelValue));
}

TEST(K8sOptions, ValidateRefusesWhatCannotWork) {
  K::Options o;
  o.server = "https://10.0.0.1:6443";
  EXPECT_TRUE(K::validate(o));
  o.server = "10.0.0.1:6443";
  EXPECT_FALSE(K::validate(o));
  o.server = "https://10.0.0.1:6443/";
  EXPECT_FALSE(K::validate(o));
  o.server = "https://10.0.0.1:6443";
  o.namespace_ = "Kube_System";
  EXPECT_FALSE(K::validate(o));
  o.namespace_ = "kube-system";
  o.timeout = std::chrono::milliseconds(0);
  EXPECT_FALSE(K::validate(o));
  o.timeout = std::chrono::milliseconds(1000);
  o.leaseDuration = std::chrono::seconds(0);
  const auto v = K::validate(o);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().kind, BackendErrc::kInvalidArgument);
}

/// Fails every request, and counts them.
class NoServer final : public http::HttpClient {
 public:
  http::HttpResult<http::Response> send(const http::Request& request) override {
    ++sent;
    last = std::string(http::methodName(request.method)) + " " + request.url;
    return std::unexpected(http::HttpError{http::ErrorKind::kConnect, request.url, "no server here", 7, 111});
  }
  int sent = 0;
  std::string last;  ///< "METHOD URL" of the last request
};

K::Options anyServer() {
  K::Options o;
  o.server = "http://127.0.0.1:1";
  return o;
}

TEST(K8sBackendCalls, MalformedNamesAreRefusedBeforeSendingByEveryCall) {
  NoServer http;
  K b(http, anyServer());
  Holder seen;
  seen.node = "n";
  seen.version = "1";
  for (const std::string& bad :
       std::vector<std::string>{"", "a/b", "a b", "n\n", std::string(254, 'x'), "caf\xc3\xa9"}) {
    const auto calls = callsNaming(b, bad, seen);
    for (const auto& [what, kind] : calls) {
      EXPECT_EQ(kind, BackendErrc::kInvalidArgument) << what << " of " << cni::quoted(bad);
    }
  }
  EXPECT_EQ(http.sent, 0) << "the last: " << http.last;
}

TEST(K8sBackendCalls, AKeyWhoseLeaseNameWouldPass253CharactersIsRefusedBeforeSending) {
  NoServer http;
  K b(http, anyServer());
  const std::string pool(120, ':');  // a valid name, each byte encoded as "z3a"
  ASSERT_TRUE(K::leaseName(ClaimKind::kBlock, pool, "b1").empty());
  const auto c = b.claim(ClaimKind::kBlock, pool, "b1", "n", {});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kInvalidArgument);
  EXPECT_NE(c.error().message.find("253"), std::string::npos) << c.error().describe();
  EXPECT_EQ(errc(b.renew("n", pool, {{ClaimKind::kBlock, "b1", "", ""}})), BackendErrc::kInvalidArgument);
  EXPECT_EQ(errc(b.definePool({pool, "F", "o", "", false})), BackendErrc::kInvalidArgument);
  EXPECT_EQ(errc(b.demand(pool, "n", 1)), BackendErrc::kInvalidArgument);
  EXPECT_EQ(b.release(ClaimKind::kBlock, pool, "b1", "n", ""), ReleaseOutcome::kGone) << "never created";
  EXPECT_EQ(b.removeGone(ClaimKind::kBlock, pool, "b1", {}), ReleaseOutcome::kGone) << "never created";
  EXPECT_EQ(http.sent, 0);
  // An empty Lease name would address the collection (a GET lists it, a DELETE is a
  // deletecollection): each call refuses before sending.
  EXPECT_EQ(errc(b.definition(pool)), BackendErrc::kInvalidArgument);
  EXPECT_EQ(http.sent, 0) << "definition sent " << http.last;
  EXPECT_EQ(errc(b.replaceDefinition({pool, "F", "o", "", false}, "9")), BackendErrc::kInvalidArgument);
  EXPECT_EQ(http.sent, 0) << "replaceDefinition sent " << http.last;
  EXPECT_EQ(errc(b.withdraw(pool, "n")), BackendErrc::kInvalidArgument);
  EXPECT_EQ(http.sent, 0) << "withdraw sent " << http.last;
}

TEST(K8sBackendCalls, ForgetNodeIsRefusedNamingKubectlDeleteNode) {
  NoServer http;
  K b(http, anyServer());
  const auto f = b.forgetNode("node-7");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().kind, BackendErrc::kInvalidArgument);
  EXPECT_NE(f.error().message.find("kubectl delete node node-7"), std::string::npos) << f.error().describe();
  EXPECT_EQ(toCniError(f.error(), "forgetting node node-7").code, cni::Errc::kInvalidConfig);
  EXPECT_EQ(http.sent, 0);
}

TEST(K8sBackendCalls, NoServerIsUnreachable) {
  NoServer http;
  K b(http, anyServer());
  const auto c = b.claim(ClaimKind::kBlock, "p0", "b1", "n", {});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kUnreachable);
  EXPECT_NE(c.error().message.find("no server here"), std::string::npos) << c.error().describe();
  EXPECT_EQ(http.sent, 1);
}

// A GUID pool's backend objects are named by "guid_<pool>", a name no address pool can have
// (ipam.cluster.pool never holds '_') and that the Lease name encoding keeps apart from every
// address pool's: no Lease and no etcd key is both a GUID pool's and an address pool's.
TEST(K8sWriteMark, KeepsTheNewestDecimalVersionAndGivesUpOnAnyOther) {
  k8s::WriteMark m;
  EXPECT_EQ(m.newest(), "") << "no write yet";
  m.note("120");
  m.note("99");  // a write answered later, on another thread, with an older version
  EXPECT_EQ(m.newest(), "120");
  m.note("121");
  EXPECT_EQ(m.newest(), "121");
  for (const char* other : {"", "12a", "-3", "7 "}) {
    k8s::WriteMark o;
    o.note("5");
    o.note(other);
    o.note("6");
    EXPECT_EQ(o.newest(), "") << "after \"" << other << "\" every read is a quorum read";
  }
}

TEST(GuidPoolNames, NoLeaseNameOrEtcdKeyOfAGuidPoolIsAnAddressPools) {
  const std::vector<std::string> names{"a",       "ib",        "guid", "guid-a", "guid.a", "guidz5fa", "z5f",
                                       "ib-pool", "guidz5fib", "z",    "0",      "p.q",    std::string(63, 'p')};
  const std::vector<std::string> keys{"0200000000000100-8", "10.56.0.32-27", "fd00::20-123", "0200000000000105",
                                      "10.56.0.5", "node-7"};
  NoServer http;
  EtcdBlockBackend::Options eo;
  eo.endpoints = {"http://127.0.0.1:1"};
  EtcdBlockBackend etcd(http, eo);
  const auto objects = [&](const std::string& pool) {
    std::vector<std::string> out{K::poolLeaseName(pool)};
    for (const auto& key : keys) {
      for (const auto kind : {ClaimKind::kBlock, ClaimKind::kAddress}) {
        out.push_back(K::leaseName(kind, pool, key));
        out.push_back(etcd.claimKey(kind, pool, key));
      }
      out.push_back(K::demandLeaseName(pool, key));
    }
    return out;
  };
  std::set<std::string> addressPools;
  std::vector<std::string> guidPools;
  for (const auto& name : names) {
    ASSERT_TRUE(config::validPoolName(name)) << name;
    EXPECT_EQ(ipSpace().backendPool(name), name);
    const std::string backendName = guidSpace().backendPool(name);
    EXPECT_EQ(backendName, "guid_" + name);
    EXPECT_FALSE(config::validPoolName(backendName));
    for (const auto& o : objects(name)) {
      addressPools.insert(o);
    }
    for (const auto& o : objects(backendName)) {
      ASSERT_FALSE(o.empty()) << backendName;
      EXPECT_LE(o.size(), 253U) << o;
      guidPools.push_back(o);
    }
  }
  for (const auto& o : guidPools) {
    EXPECT_FALSE(addressPools.contains(o)) << o;
  }
  EXPECT_EQ(http.sent, 0);
  EXPECT_EQ(K::poolLeaseName("guid_ib"), "ibcni-guidz5fib--pool");
  EXPECT_EQ(K::poolLeaseName("guidz5fib"), "ibcni-guidz7a5fib--pool");
  EXPECT_EQ(K::leaseName(ClaimKind::kBlock, "guid_ib", "0200000000000100-8"), "ibcni-guidz5fib--b--0200000000000100-8");
  EXPECT_EQ(etcd.claimKey(ClaimKind::kBlock, "guid_ib", "0200000000000100-8"),
            "/ibcni/pools/guid_ib/blocks/0200000000000100-8");
  EXPECT_EQ(K::labelValue("guid_ib"), "guid_ib") << "readable as the pool label";
}

}  // namespace
}  // namespace ibcni::ipam
