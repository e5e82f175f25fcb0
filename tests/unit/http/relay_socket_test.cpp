// SPDX-License-Identifier: Apache-2.0
// The relay served on a Unix socket (lib/http/relay_socket.h): a client sends through it when a
// server says it is ready there, and through its fallback when none is, when it is turned away (another
// user, too many connections), hangs, or goes away; the server replaces a stale socket, refuses to
// take a live one or a file, and removes its own socket only.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "ibcni/os/unique_fd.h"
#include "lib/http/relay_socket.h"
#include "support/temp_dir.h"

namespace ibcni::http {
namespace {

namespace fs = std::filesystem;

// Answers each request with `name` + its URL as the body, and counts them (from any thread).
class NamedClient final : public HttpClient {
 public:
  explicit NamedClient(std::string name) : name_(std::move(name)) {}
  HttpResult<Response> send(const Request& r) override {
    ++calls;
    Response out;
    out.status = 200;
    out.body = name_ + " " + r.url;
    return out;
  }
  std::atomic<int> calls{0};

 private:
  std::string name_;
};

Request get(std::string url) {
  Request r;
  r.url = std::move(url);
  r.timeout = std::chrono::milliseconds(2000);
  return r;
}

std::string bodyOf(const HttpResult<Response>& r) { return r ? r->body : "error: " + r.error().describe(); }

class RelaySocket : public testing::TempDirTest {
 protected:
  RelaySocket() : TempDirTest("ibcni-relay-test"), path_(dir_ + "/agent/http-relay.sock") {}

  std::unique_ptr<RelayServer> serve(std::size_t maxConnections = 64) {
    auto s = RelayServer::listen({.path = path_, .maxConnections = maxConnections}, agent_);
    EXPECT_TRUE(s.has_value()) << (s ? "" : s.error());
    return s ? std::move(*s) : nullptr;
  }

  std::string path_;
  NamedClient agent_{"agent"};
  NamedClient fallback_{"fallback"};
};

TEST_F(RelaySocket, RequestsGoThroughTheServerOverOneConnection) {
  auto server = serve();
  ASSERT_TRUE(server);
  SocketRelayHttpClient client(path_, fallback_);
  EXPECT_EQ(bodyOf(client.send(get("http://a/"))), "agent http://a/");
  EXPECT_EQ(bodyOf(client.send(get("http://b/"))), "agent http://b/");
  EXPECT_TRUE(client.throughSocket());
  EXPECT_EQ(agent_.calls, 2);
  EXPECT_EQ(fallback_.calls, 0);
  EXPECT_EQ(server->counts().served, 1U);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600U);
  ASSERT_EQ(::stat((dir_ + "/agent").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700U);
}

TEST_F(RelaySocket, WithNoServerTheFallbackSendsEveryRequest) {
  SocketRelayHttpClient client(path_, fallback_);
  EXPECT_EQ(bodyOf(client.send(get("http://a/"))), "fallback http://a/");
  EXPECT_EQ(bodyOf(client.send(get("http://b/"))), "fallback http://b/");
  EXPECT_FALSE(client.throughSocket());
  EXPECT_EQ(fallback_.calls, 2);
}

TEST_F(RelaySocket, AServerThatNeverSaysReadyIsLeftForTheFallback) {
  // A listener nobody accepts on: connect() succeeds (the backlog), no ready byte comes.
  fs::create_directories(dir_ + "/agent");
  os::UniqueFd hung(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path, path_.c_str());
  ASSERT_EQ(::bind(hung.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(hung.get(), 4), 0);
  SocketRelayHttpClient client(path_, fallback_, std::chrono::milliseconds(100));
  EXPECT_EQ(bodyOf(client.send(get("http://a/"))), "fallback http://a/");
  EXPECT_FALSE(client.throughSocket());
}

TEST_F(RelaySocket, PastMaxConnectionsAClientIsTurnedAwayToItsFallback) {
  auto server = serve(1);
  ASSERT_TRUE(server);
  SocketRelayHttpClient first(path_, fallback_);
  EXPECT_EQ(bodyOf(first.send(get("http://a/"))), "agent http://a/");
  SocketRelayHttpClient second(path_, fallback_);
  EXPECT_EQ(bodyOf(second.send(get("http://b/"))), "fallback http://b/");
  EXPECT_EQ(server->counts().turnedAway, 1U);
  EXPECT_TRUE(first.throughSocket());
}

TEST_F(RelaySocket, AConnectionOfAnotherUserIsRefused) {
  auto server = serve();
  ASSERT_TRUE(server);
  // Opened to everyone, so that what refuses nobody's connection is the server's own check.
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((dir_ + "/agent").c_str(), 0755), 0);
  ASSERT_EQ(::chmod(path_.c_str(), 0666), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // nobody: its request must come back from the fallback.
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) {
      ::_exit(3);
    }
    NamedClient fallback("fallback");
    SocketRelayHttpClient client(path_, fallback);
    ::_exit(bodyOf(client.send(get("http://a/"))) == "fallback http://a/" && !client.throughSocket() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_NE(WEXITSTATUS(status), 3) << "cannot become nobody here";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(server->counts().refused, 1U);
  EXPECT_EQ(agent_.calls, 0);
}

TEST_F(RelaySocket, AServerGoneAfterConnectingLeavesTheLaterRequestsToTheFallback) {
  auto server = serve();
  ASSERT_TRUE(server);
  SocketRelayHttpClient client(path_, fallback_);
  EXPECT_EQ(bodyOf(client.send(get("http://a/"))), "agent http://a/");
  server.reset();
  // The request in flight when the connection is found gone may fail (it may have been carried out
  // before), or go to the fallback if it was never written; the ones after go to the fallback.
  const auto during = client.send(get("http://b/"));
  EXPECT_TRUE(bodyOf(during) == "fallback http://b/" ||
              (!during && during.error().kind == ErrorKind::kTransfer))
      << bodyOf(during);
  EXPECT_EQ(bodyOf(client.send(get("http://c/"))), "fallback http://c/");
  EXPECT_FALSE(client.throughSocket());
  EXPECT_EQ(agent_.calls, 1);
}

TEST_F(RelaySocket, AStaleSocketIsReplacedAndALiveOneOrAFileIsNot) {
  {
    auto gone = serve();
    ASSERT_TRUE(gone);
    // A server killed: its socket stays behind (what the destructor would remove is put back).
    fs::rename(path_, dir_ + "/kept.sock");
  }
  fs::rename(dir_ + "/kept.sock", path_);
  auto server = serve();
  ASSERT_TRUE(server) << "a stale socket was not replaced";

  auto second = RelayServer::listen({.path = path_}, agent_);
  ASSERT_FALSE(second.has_value());
  EXPECT_NE(second.error().find("served by another process"), std::string::npos) << second.error();
  EXPECT_TRUE(fs::exists(path_)) << "the live server's socket was taken away";

  const std::string file = dir_ + "/agent/not-a-socket";
  std::ofstream(file) << "x";
  auto onFile = RelayServer::listen({.path = file}, agent_);
  ASSERT_FALSE(onFile.has_value());
  EXPECT_NE(onFile.error().find("is not a socket"), std::string::npos) << onFile.error();
  EXPECT_TRUE(fs::exists(file));
}

TEST_F(RelaySocket, TheServerRemovesItsOwnSocketOnly) {
  {
    auto server = serve();
    ASSERT_TRUE(server);
  }
  EXPECT_FALSE(fs::exists(path_));
  {
    auto server = serve();
    ASSERT_TRUE(server);
    fs::remove(path_);
    std::ofstream(path_) << "another's";
  }
  EXPECT_TRUE(fs::exists(path_)) << "a file the server did not make was removed";
}

TEST(RelaySocketPath, TheEnvironmentNamesItElseTheDefault) {
  const char* before = std::getenv(std::string(kRelaySocketEnv).c_str());
  const std::string saved = before != nullptr ? before : "";
  ::setenv(std::string(kRelaySocketEnv).c_str(), "/elsewhere/relay.sock", 1);
  EXPECT_EQ(relaySocketFromEnvironment(), "/elsewhere/relay.sock");
  ::setenv(std::string(kRelaySocketEnv).c_str(), "", 1);
  EXPECT_EQ(relaySocketFromEnvironment(), kDefaultRelaySocket);
  ::unsetenv(std::string(kRelaySocketEnv).c_str());
  EXPECT_EQ(relaySocketFromEnvironment(), kDefaultRelaySocket);
  if (before != nullptr) {
    ::setenv(std::string(kRelaySocketEnv).c_str(), saved.c_str(), 1);
  }
}

}  // namespace
}  // namespace ibcni::http
