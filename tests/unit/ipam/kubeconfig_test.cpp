// SPDX-License-Identifier: Apache-2.0
// The kubeconfig reader (ipam/backends/kubeconfig.h) on files written to a temporary directory: a token,
// a tokenFile, inline *-data, files relative to the kubeconfig's folder, a given context, and one
// typed error naming the file and the field for each way a kubeconfig can be wrong.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ibcni/os/text.h"
#include "ipam/backends/k8s_block_backend.h"
#include "ipam/backends/kubeconfig.h"

namespace ibcni::ipam {
namespace {

namespace fs = std::filesystem;

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fs::temp_directory_path().string() + "/ibcni-kubeconfig.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
    return path;
  }

  std::string dir_;
};

constexpr const char* kToken = R"(apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority: pki/ca.crt
- name: c2
  cluster:
    server: "https://api.example:443"
    insecure-skip-tls-verify: true
users:
- name: ibcni
  user:
    token: abc.def
- name: rotating
  user:
    tokenFile: token
contexts:
- name: main
  context: {cluster: c1, user: ibcni, namespace: kube-system}
- name: other
  context:
    cluster: c2
    user: rotating
current-context: main
)";

/// kToken with its first `from` replaced by `to`.
std::string tokenWith(const std::string& from, const std::string& to) {
  std::string text = kToken;
  text.replace(text.find(from), from.size(), to);
  return text;
}

TEST_F(KubeconfigTest, TokenUserAndRelativeCaFile) {
  const auto path = write("k/ibcni.kubeconfig", kToken);
  const auto k = loadKubeconfig(path);
  ASSERT_TRUE(k) << k.error().describe();
  EXPECT_EQ(k->context, "main");
  EXPECT_EQ(k->server, "https://10.0.0.1:6443");
  EXPECT_EQ(k->token, "abc.def");
  EXPECT_TRUE(k->tokenFile.empty());
  EXPECT_EQ(k->tls.caFile, dir_ + "/k/pki/ca.crt");
  EXPECT_EQ(k->namespace_, "kube-system");
  EXPECT_FALSE(k->tls.insecure);
  const auto o = KubernetesBlockBackend::optionsFrom(*k);
  EXPECT_EQ(o.server, "https://10.0.0.1:6443");
  EXPECT_EQ(o.token, "abc.def");
  EXPECT_EQ(o.tls.caFile, dir_ + "/k/pki/ca.crt");
}

TEST_F(KubeconfigTest, AGivenContextWithATokenFile) {
  const auto path = write("ibcni.kubeconfig", kToken);
  const auto k = loadKubeconfig(path, "other");
  ASSERT_TRUE(k) << k.error().describe();
  EXPECT_EQ(k->server, "https://api.example:443");
  EXPECT_TRUE(k->token.empty());
  EXPECT_EQ(k->tokenFile, dir_ + "/token");
  EXPECT_TRUE(k->tls.insecure);
  EXPECT_TRUE(k->namespace_.empty());
}

TEST_F(KubeconfigTest, InlineDataIsDecodedAndFilesAreResolved) {
  const std::string ca = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
  const std::string cert = "-----BEGIN CERTIFICATE-----\nME\n-----END CERTIFICATE-----\n";
  const std::string yaml = "clusters:\n- name: c\n  cluster:\n    server: https://h:6443\n"
                           "    certificate-authority-data: " + os::base64Encode(ca) + "\n"
                           "users:\n- name: u\n  user:\n    client-certificate-data: " + os::base64Encode(cert) + "\n"
                           "    client-key: /etc/keys/u.key\n"
                           "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n";
  const auto k = loadKubeconfig(write("kc", yaml));
  ASSERT_TRUE(k) << k.error().describe();
  EXPECT_EQ(k->tls.caData, ca);
  EXPECT_TRUE(k->tls.caFile.empty());
  EXPECT_EQ(k->tls.certData, cert);
  EXPECT_EQ(k->tls.keyFile, "/etc/keys/u.key");
}

TEST_F(KubeconfigTest, JsonIsYamlToo) {
  const auto k = loadKubeconfig(write("kc.json", R"({"clusters":[{"name":"c","cluster":{"server":"http://127.0.0.1:8080"}}],
    "users":[{"name":"u","user":{}}],"contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}],"current-context":"x"})"));
  ASSERT_TRUE(k) << k.error().describe();
  EXPECT_EQ(k->server, "http://127.0.0.1:8080");
}

void expectError(const std::expected<Kubeconfig, KubeconfigError>& k, KubeconfigErrc kind, const std::string& file,
                 const std::string& field, const std::string& says) {
  ASSERT_FALSE(k) << "loaded";
  EXPECT_EQ(k.error().kind, kind) << k.error().describe();
  EXPECT_EQ(k.error().file, file);
  EXPECT_EQ(k.error().field, field) << k.error().describe();
  EXPECT_NE(k.error().describe().find(says), std::string::npos) << k.error().describe();
  EXPECT_NE(k.error().describe().find(file), std::string::npos) << k.error().describe();
}

TEST_F(KubeconfigTest, EveryWayToBeWrongIsNamed) {
  const std::string missing = dir_ + "/nope";
  expectError(loadKubeconfig(missing), KubeconfigErrc::kMissing, missing, "", "no such file");
  if (::geteuid() != 0) {
    const auto unreadable = write("unreadable", kToken);
    ::chmod(unreadable.c_str(), 0);
    expectError(loadKubeconfig(unreadable), KubeconfigErrc::kUnreadable, unreadable, "", "Permission denied");
  }
  expectError(loadKubeconfig(dir_), KubeconfigErrc::kUnreadable, dir_, "", "");
  const auto bad = write("bad", "clusters: [\n  - name: c\n  cluster: {server: x\n");
  expectError(loadKubeconfig(bad), KubeconfigErrc::kMalformed, bad, "", "not YAML: line ");
  const auto scalar = write("scalar", "just text\n");
  expectError(loadKubeconfig(scalar), KubeconfigErrc::kMalformed, scalar, "", "not a mapping");
  const auto path = write("kc", kToken);
  expectError(loadKubeconfig(path, "nosuch"), KubeconfigErrc::kNoContext, path, "contexts", "no context named \"nosuch\"");
  const auto nc = write("nc", tokenWith("current-context: main", ""));
  expectError(loadKubeconfig(nc), KubeconfigErrc::kNoContext, nc, "current-context", "is not set");
  const auto ncl = write("ncl", tokenWith("cluster: c1", "cluster: c9"));
  expectError(loadKubeconfig(ncl), KubeconfigErrc::kNoCluster, ncl, "clusters", "no cluster named \"c9\"");
  const auto nu = write("nu", tokenWith("user: ibcni", "user: ghost"));
  expectError(loadKubeconfig(nu), KubeconfigErrc::kNoUser, nu, "users", "no user named \"ghost\"");
  const auto ns = write("ns", tokenWith("server: https://10.0.0.1:6443/", "server: \"\""));
  expectError(loadKubeconfig(ns), KubeconfigErrc::kNoServer, ns, "clusters[c1].cluster.server", "is not set");
  const auto ex = write("ex", tokenWith("token: abc.def", "exec: {command: aws}"));
  expectError(loadKubeconfig(ex), KubeconfigErrc::kBadValue, ex, "users[ibcni].user.exec", "not supported");
  const auto bd = write("bd", tokenWith("certificate-authority: pki/ca.crt", "certificate-authority-data: '***'"));
  expectError(loadKubeconfig(bd), KubeconfigErrc::kBadValue, bd, "clusters[c1].cluster.certificate-authority-data",
              "not base64");
}

}  // namespace
}  // namespace ibcni::ipam
