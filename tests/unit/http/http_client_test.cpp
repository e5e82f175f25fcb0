// SPDX-License-Identifier: Apache-2.0
// CurlHttpClient against real servers on loopback (http_test_server.py: plain HTTP, TLS, and TLS
// requiring a client certificate), with a PKI made by openssl for the run (make_test_pki.sh).
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <barrier>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lib/http/curl_http_client.h"

namespace ibcni::http {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A loopback port nobody listens on (bound, then closed).
int refusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return 1;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// http_test_server.py in a child process; the port it bound is the first line it prints.
class TestServer {
 public:
  ~TestServer() { stop(); }

  /// @return empty on success, else what went wrong.
  std::string start(const std::vector<std::string>& extra) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      return "pipe2 failed";
    }
    std::vector<std::string> args{"python3", IBCNI_HTTP_TEST_SERVER};
    args.insert(args.end(), extra.begin(), extra.end());
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) {
      return "fork failed";
    }
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) {
        ::_exit(3);
      }
      ::dup2(fds[1], STDOUT_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) {
        argv.push_back(a.data());
      }
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    std::string line;
    const auto deadline = steady_clock::now() + std::chrono::seconds(20);
    while (line.find('\n') == std::string::npos && steady_clock::now() < deadline) {
      pollfd pfd{fds[0], POLLIN, 0};
      if (::poll(&pfd, 1, 200) <= 0) {
        continue;
      }
      char c[64];
      const ssize_t n = ::read(fds[0], c, sizeof c);
      if (n <= 0) {
        break;
      }
      line.append(c, static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    port_ = std::atoi(line.c_str());
    if (port_ <= 0) {
      return "http_test_server.py (python3, from scripts/install-deps.sh) did not start: printed '" + line + "'";
    }
    return {};
  }

  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
  }

  [[nodiscard]] int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// ---------------------------------------------------------------------------------------------
// First in the file (so first in a run of the whole program): nothing has loaded libcurl yet.

TEST(CurlHttpClientLoading, LibcurlIsLoadedOnlyByTheFirstSend) {
  ASSERT_EQ(::dlopen("libcurl.so.4", RTLD_LAZY | RTLD_NOLOAD), nullptr)
      << "libcurl is in the process before any client exists: is the test linked to it?";
  CurlHttpClient client;
  EXPECT_EQ(::dlopen("libcurl.so.4", RTLD_LAZY | RTLD_NOLOAD), nullptr) << "constructing a client loaded libcurl";
  Request req;
  req.url = "http://127.0.0.1:" + std::to_string(refusedPort()) + "/";
  auto res = client.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kConnect) << res.error().describe();
  EXPECT_NE(::dlopen("libcurl.so.4", RTLD_LAZY | RTLD_NOLOAD), nullptr) << "send() did not load libcurl";
}

TEST(CurlHttpClientLoading, AMissingLibraryIsUnavailableNamingItAndThePackage) {
  CurlHttpClient client("libcurl-ibcni-test-missing.so.4");
  Request req;
  req.url = "http://127.0.0.1:1/";
  for (int i = 0; i < 2; ++i) {  // the failure is kept, and said again
    auto res = client.send(req);
    ASSERT_FALSE(res.has_value());
    EXPECT_EQ(res.error().kind, ErrorKind::kUnavailable);
    const std::string text = res.error().describe();
    EXPECT_NE(text.find("libcurl-ibcni-test-missing.so.4"), std::string::npos) << text;
    EXPECT_NE(text.find("install libcurl4"), std::string::npos) << text;
    EXPECT_NE(text.find("GET http://127.0.0.1:1/"), std::string::npos) << text;
  }
}

TEST(CurlHttpClientLoading, OfSeveralBuildsTheFirstThatIsThereIsLoadedButAnUnusableOneIsAnError) {
  CurlHttpClient client(std::vector<std::string>{"libcurl-ibcni-test-missing.so.4", "libcurl.so.4"});
  Request req;
  req.url = "http://127.0.0.1:" + std::to_string(refusedPort()) + "/";
  auto res = client.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kConnect) << res.error().describe();  // loaded: it tried to connect

  CurlHttpClient none(std::vector<std::string>{"libcurl-ibcni-test-missing.so.4", "libcurl-ibcni-test-missing.so.5"});
  res = none.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_NE(res.error().message.find("libcurl-ibcni-test-missing.so.5"), std::string::npos) << res.error().message;

  CurlHttpClient unusable(std::vector<std::string>{"libc.so.6", "libcurl.so.4"});
  res = unusable.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kUnavailable) << res.error().describe();
}

TEST(CurlHttpClientLoading, ALibraryThatIsNotLibcurlIsUnavailableNamingTheMissingFunction) {
  CurlHttpClient client("libc.so.6");
  Request req;
  req.url = "http://127.0.0.1:1/";
  auto res = client.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kUnavailable);
  EXPECT_NE(res.error().message.find("not a usable libcurl"), std::string::npos) << res.error().message;
  EXPECT_NE(res.error().message.find("curl_global_init"), std::string::npos) << res.error().message;
}

// ---------------------------------------------------------------------------------------------

class CurlHttpClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = std::filesystem::temp_directory_path() / ("ibcni-http-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(pki_);
    const std::string cmd = std::string("sh ") + IBCNI_HTTP_TEST_PKI + " " + pki_.string();
    if (std::system(cmd.c_str()) != 0) {
      setupError_ = "making the test PKI failed (openssl, from scripts/install-deps.sh): " + cmd;
      return;
    }
    plain_ = new TestServer;
    tls_ = new TestServer;
    mtls_ = new TestServer;
    setupError_ = plain_->start({});
    if (setupError_.empty()) {
      setupError_ = tls_->start({"--cert", pem("server.crt"), "--key", pem("server.key")});
    }
    if (setupError_.empty()) {
      setupError_ = mtls_->start(
          {"--cert", pem("server.crt"), "--key", pem("server.key"), "--client-ca", pem("ca.crt")});
    }
  }
  static void TearDownTestSuite() {
    delete plain_;
    delete tls_;
    delete mtls_;
    plain_ = tls_ = mtls_ = nullptr;
    std::error_code ec;
    std::filesystem::remove_all(pki_, ec);
  }
  void SetUp() override { ASSERT_TRUE(setupError_.empty()) << setupError_; }

  static std::string pem(const char* name) { return (pki_ / name).string(); }
  static std::string plainUrl(const std::string& path) {
    return "http://127.0.0.1:" + std::to_string(plain_->port()) + path;
  }
  static std::string tlsUrl(const std::string& path) {
    return "https://127.0.0.1:" + std::to_string(tls_->port()) + path;
  }
  static std::string mtlsUrl(const std::string& path) {
    return "https://127.0.0.1:" + std::to_string(mtls_->port()) + path;
  }

  /// The server's echo of the request (GET /echo... answers JSON).
  static nlohmann::json echo(const Response& res) { return nlohmann::json::parse(res.body); }

  static inline std::filesystem::path pki_;
  static inline std::string setupError_;
  static inline TestServer* plain_ = nullptr;
  static inline TestServer* tls_ = nullptr;
  static inline TestServer* mtls_ = nullptr;
  CurlHttpClient client_;
};

TEST_F(CurlHttpClientTest, AClientThatKeepsConnectionsSendsItsRequestsOverOneAndTheDefaultOpensOneEach) {
  CurlHttpClient keeping(std::vector<std::string>{"libcurl.so.4"}, true);
  Request req;
  req.url = mtlsUrl("/echo");
  req.tls.caFile = pem("ca.crt");
  req.tls.certFile = pem("client.crt");
  req.tls.keyFile = pem("client.key");
  std::vector<int> kept;
  std::vector<int> opened;
  for (int i = 0; i < 3; ++i) {
    auto a = keeping.send(req);
    ASSERT_TRUE(a.has_value()) << a.error().describe();
    kept.push_back(echo(*a)["peerPort"]);
    auto b = client_.send(req);
    ASSERT_TRUE(b.has_value()) << b.error().describe();
    opened.push_back(echo(*b)["peerPort"]);
  }
  EXPECT_EQ(kept, std::vector<int>(3, kept[0]));  // one connection, one TLS handshake
  EXPECT_NE(opened[0], opened[1]);
  EXPECT_NE(opened[1], opened[2]);
  // A request with other credentials is never handed a connection made with the first's.
  req.url = tlsUrl("/echo");
  auto withCert = keeping.send(req);
  ASSERT_TRUE(withCert.has_value()) << withCert.error().describe();
  req.tls.certFile.clear();
  req.tls.keyFile.clear();
  auto without = keeping.send(req);
  ASSERT_TRUE(without.has_value()) << without.error().describe();
  EXPECT_NE(echo(*without)["peerPort"], echo(*withCert)["peerPort"]);
}

// The relay socket's threads send through one client: with 8 requests in flight at a time, round
// after round, every round reuses the first round's connections (libcurl would trim its shared
// cache to 5 after each, so 3 connections, and their handshakes, would be new every round).
TEST_F(CurlHttpClientTest, AClientThatKeepsConnectionsKeepsAsManyAsItsThreadsUseAtOnce) {
  CurlHttpClient keeping(std::vector<std::string>{"libcurl.so.4"}, true);
  constexpr int kThreads = 8;
  constexpr int kRounds = 5;
  std::barrier round(kThreads);
  std::mutex mu;
  std::set<int> ports;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      Request req;
      req.url = mtlsUrl("/echo?ms=30");
      req.tls.caFile = pem("ca.crt");
      req.tls.certFile = pem("client.crt");
      req.tls.keyFile = pem("client.key");
      for (int r = 0; r < kRounds; ++r) {
        round.arrive_and_wait();
        auto a = keeping.send(req);
        const std::lock_guard lock(mu);
        if (a) {
          ports.insert(echo(*a)["peerPort"].get<int>());
        } else {
          failures.push_back(a.error().describe());
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_TRUE(failures.empty()) << failures.front();
  EXPECT_LE(ports.size(), static_cast<std::size_t>(kThreads)) << "connections were closed and opened again";
}

TEST_F(CurlHttpClientTest, GetSendsTheHeadersAndReturnsStatusHeadersAndBody) {
  Request req;
  req.url = plainUrl("/echo?x=1");
  req.headers = {{"X-Ibcni", "one"}, {"Accept", "application/json"}};
  auto res = client_.send(req);
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->contentType(), "application/json");
  EXPECT_EQ(res->header("x-test-server"), "ibcni");
  const auto e = echo(*res);
  EXPECT_EQ(e["method"], "GET");
  EXPECT_EQ(e["path"], "/echo?x=1");
  EXPECT_EQ(e["headers"]["x-ibcni"], "one");
  EXPECT_EQ(e["headers"]["accept"], "application/json");
  EXPECT_FALSE(e["headers"].contains("content-type"));
  EXPECT_FALSE(e["headers"].contains("content-length"));
  EXPECT_EQ(e["body"], "");
}

TEST_F(CurlHttpClientTest, PostPutPatchAndDeleteCarryTheirBodies) {
  for (Method m : {Method::kPost, Method::kPut, Method::kPatch, Method::kDelete}) {
    Request req;
    req.method = m;
    req.url = plainUrl("/echo");
    req.headers = {{"Content-Type", "application/json"}};
    req.body = std::string(R"({"key":")") + std::string(methodName(m)) + R"("})";
    auto res = client_.send(req);
    ASSERT_TRUE(res.has_value()) << res.error().describe();
    EXPECT_EQ(res->status, 200);
    const auto e = echo(*res);
    EXPECT_EQ(e["method"], methodName(m));
    EXPECT_EQ(e["body"], req.body);
    EXPECT_EQ(e["headers"]["content-type"], "application/json");
    EXPECT_EQ(e["headers"]["content-length"], std::to_string(req.body.size()));
    EXPECT_FALSE(e["headers"].contains("expect"));
  }
}

TEST_F(CurlHttpClientTest, ABodyWithoutContentTypeGetsNoneOfCurls) {
  Request req;
  req.method = Method::kPost;
  req.url = plainUrl("/echo");
  req.body = std::string(2000, 'a');  // long enough that curl would otherwise send Expect
  auto res = client_.send(req);
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  const auto e = echo(*res);
  EXPECT_EQ(e["body"], req.body);
  EXPECT_FALSE(e["headers"].contains("content-type")) << e.dump();
  EXPECT_FALSE(e["headers"].contains("expect")) << e.dump();
}

TEST_F(CurlHttpClientTest, AnEmptyPutSendsContentLengthZeroAndAnEmptyDeleteNoBody) {
  Request put;
  put.method = Method::kPut;
  put.url = plainUrl("/echo");
  auto res = client_.send(put);
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_EQ(echo(*res)["method"], "PUT");
  EXPECT_EQ(echo(*res)["headers"]["content-length"], "0");

  Request del;
  del.method = Method::kDelete;
  del.url = plainUrl("/echo");
  res = client_.send(del);
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_EQ(echo(*res)["method"], "DELETE");
  EXPECT_FALSE(echo(*res)["headers"].contains("content-length"));
}

TEST_F(CurlHttpClientTest, EveryStatusIsAResponseNotAnError) {
  for (long code : {201L, 204L, 400L, 404L, 409L, 500L, 503L}) {
    Request req;
    req.method = Method::kPost;
    req.url = plainUrl("/status/" + std::to_string(code));
    req.body = "x";
    auto res = client_.send(req);
    ASSERT_TRUE(res.has_value()) << code << ": " << res.error().describe();
    EXPECT_EQ(res->status, code);
    if (code != 204) {
      EXPECT_EQ(res->body, "status " + std::to_string(code));
      EXPECT_EQ(res->contentType(), "text/plain");
    }
  }
}

TEST_F(CurlHttpClientTest, RedirectsAreNotFollowed) {
  Request req;
  req.url = plainUrl("/redirect");
  auto res = client_.send(req);
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_EQ(res->status, 302);
  EXPECT_EQ(res->header("location"), "/echo");
}

TEST_F(CurlHttpClientTest, ConnectionRefusedIsAConnectErrorNamingTheUrl) {
  Request req;
  req.method = Method::kPost;
  req.url = "http://127.0.0.1:" + std::to_string(refusedPort()) + "/v3/kv/put";
  auto res = client_.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kConnect);
  EXPECT_EQ(res.error().osErrno, ECONNREFUSED);
  EXPECT_EQ(res.error().endpoint, "POST " + req.url);
  const std::string text = res.error().describe();
  EXPECT_NE(text.find("POST " + req.url + ": connect: "), std::string::npos) << text;
  EXPECT_NE(text.find("ECONNREFUSED"), std::string::npos) << text;
  EXPECT_NE(text.find("curl error 7"), std::string::npos) << text;
}

TEST_F(CurlHttpClientTest, ASlowServerTimesOutWithinTheTimeout) {
  Request req;
  req.url = plainUrl("/slow?ms=5000");
  req.timeout = milliseconds(500);
  const auto start = steady_clock::now();
  auto res = client_.send(req);
  const auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kTimeout) << res.error().describe();
  EXPECT_NE(res.error().describe().find(req.url), std::string::npos) << res.error().describe();
  EXPECT_GE(took, milliseconds(450));
  EXPECT_LT(took, milliseconds(1500)) << "the 500 ms timeout took " << took.count() << " ms";
}

TEST_F(CurlHttpClientTest, TheEnvironmentsProxyIsIgnoredAndAnExplicitOneIsUsed) {
  const std::string deadProxy = "http://127.0.0.1:" + std::to_string(refusedPort());
  ::setenv("http_proxy", deadProxy.c_str(), 1);
  ::setenv("HTTPS_PROXY", deadProxy.c_str(), 1);
  ::setenv("ALL_PROXY", deadProxy.c_str(), 1);
  Request req;
  req.url = plainUrl("/echo");
  auto res = client_.send(req);
  Request tls;
  tls.url = tlsUrl("/echo");
  tls.tls.caFile = pem("ca.crt");
  auto tlsRes = client_.send(tls);
  ::unsetenv("http_proxy");
  ::unsetenv("HTTPS_PROXY");
  ::unsetenv("ALL_PROXY");
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_EQ(res->status, 200);
  ASSERT_TRUE(tlsRes.has_value()) << tlsRes.error().describe();
  EXPECT_EQ(tlsRes->status, 200);

  req.proxy = deadProxy;
  res = client_.send(req);
  ASSERT_FALSE(res.has_value()) << "the explicit proxy was not used";
  EXPECT_EQ(res.error().kind, ErrorKind::kConnect) << res.error().describe();
}

TEST_F(CurlHttpClientTest, HttpsWithTheRightCaFileOrCaData) {
  Request req;
  req.method = Method::kPost;
  req.url = tlsUrl("/echo");
  req.body = "over tls";
  req.tls.caFile = pem("ca.crt");
  auto res = client_.send(req);
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(echo(*res)["body"], "over tls");

  req.tls.caFile.clear();
  req.tls.caData = readFile(pem("ca.crt"));
  ASSERT_NE(req.tls.caData.find("BEGIN CERTIFICATE"), std::string::npos);
  res = client_.send(req);
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(echo(*res)["body"], "over tls");
}

TEST_F(CurlHttpClientTest, AWrongCaIsATlsErrorWhetherFileOrData) {
  Request req;
  req.url = tlsUrl("/echo");
  req.tls.caFile = pem("other-ca.crt");
  auto res = client_.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kTls) << res.error().describe();
  EXPECT_NE(res.error().describe().find("GET " + req.url + ": TLS: "), std::string::npos) << res.error().describe();

  req.tls.caFile.clear();
  req.tls.caData = readFile(pem("other-ca.crt"));
  res = client_.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kTls) << res.error().describe();
}

TEST_F(CurlHttpClientTest, WithoutACaTheSystemTrustIsUsedAndTheTestCaIsNotInIt) {
  Request req;
  req.url = tlsUrl("/echo");
  auto res = client_.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kTls) << res.error().describe();

  req.tls.insecure = true;  // and insecure skips verification altogether
  res = client_.send(req);
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_EQ(res->status, 200);
}

TEST_F(CurlHttpClientTest, AClientCertificateFromFilesOrDataAuthenticates) {
  Request req;
  req.url = mtlsUrl("/whoami");
  req.tls.caFile = pem("ca.crt");
  req.tls.certFile = pem("client.crt");
  req.tls.keyFile = pem("client.key");
  auto res = client_.send(req);
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ibcni-test-client");

  req.tls.certFile.clear();
  req.tls.keyFile.clear();
  req.tls.certData = readFile(pem("client.crt"));
  req.tls.keyData = readFile(pem("client.key"));
  res = client_.send(req);
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_EQ(res->body, "ibcni-test-client");
}

TEST_F(CurlHttpClientTest, WithoutAClientCertificateTheServerRefuses) {
  Request req;
  req.url = mtlsUrl("/whoami");
  req.tls.caFile = pem("ca.crt");
  auto res = client_.send(req);
  ASSERT_FALSE(res.has_value()) << "served " << res->status << " " << res->body;
  // TLS 1.3: the server's "certificate required" alert arrives after the handshake, on the first read.
  EXPECT_TRUE(res.error().kind == ErrorKind::kTls || res.error().kind == ErrorKind::kTransfer)
      << res.error().describe();
  EXPECT_NE(res.error().describe().find(req.url), std::string::npos) << res.error().describe();
}

TEST_F(CurlHttpClientTest, RequestsThatCannotBeSentAreInvalid) {
  Request req;
  req.url = "file:///etc/passwd";
  auto res = client_.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kInvalidRequest) << res.error().describe();

  req.url = tlsUrl("/echo");
  req.tls.caFile = pem("ca.crt");
  req.tls.caData = readFile(pem("ca.crt"));
  res = client_.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kInvalidRequest) << res.error().describe();

  req.tls.caData.clear();
  req.tls.certFile = pem("client.crt");
  res = client_.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kInvalidRequest) << res.error().describe();

  Request bad;
  bad.url = plainUrl("/echo");
  bad.headers = {{"X-Split", "a\r\nInjected: yes"}};
  res = client_.send(bad);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kInvalidRequest) << res.error().describe();
}

TEST_F(CurlHttpClientTest, ABodyLongerThanTheLimitFails) {
  Request req;
  req.url = plainUrl("/echo");
  req.maxResponseBytes = 10;
  auto res = client_.send(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().kind, ErrorKind::kTransfer) << res.error().describe();
  EXPECT_NE(res.error().message.find("longer than 10 bytes"), std::string::npos) << res.error().message;
}

TEST_F(CurlHttpClientTest, SendsFromSeveralThreadsAtOnce) {
  std::vector<std::thread> threads;
  std::vector<long> statuses(8, 0);
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    threads.emplace_back([&, i] {
      Request req;
      req.url = i % 2 == 0 ? plainUrl("/status/201") : tlsUrl("/status/201");
      req.tls.caFile = pem("ca.crt");
      auto res = client_.send(req);
      statuses[i] = res.has_value() ? res->status : -1;
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (long s : statuses) {
    EXPECT_EQ(s, 201);
  }
}

}  // namespace
}  // namespace ibcni::http
