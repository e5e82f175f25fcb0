// SPDX-License-Identifier: Apache-2.0
// The HTTP relay (lib/http/http_relay.h): its frames, its serving loop over a socket with a fake
// client, and RelayHttpClient against relays that are missing, die, hang, and the real
// `ibcni http-relay`, whose answers must be CurlHttpClient's in this process.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "ibcni/os/unique_fd.h"
#include "lib/http/curl_http_client.h"
#include "lib/http/http_relay.h"

namespace ibcni::http {
namespace {

std::string netstring(const std::string& s) { return std::to_string(s.size()) + ":" + s + ","; }

Request fullRequest() {
  Request r;
  r.method = Method::kPatch;
  r.url = "https://10.0.0.1:6443/apis/coordination.k8s.io/v1/namespaces/x/leases/y";
  r.headers = {{"Content-Type", "application/merge-patch+json"}, {"Authorization", "Bearer a:b,c"}};
  r.body = std::string("{\"spec\":1}\n,:\0end", 17);
  r.timeout = std::chrono::milliseconds(1234);
  r.tls = {"/ca.pem", "CA DATA", "/c.pem", "/k.pem", "CERT", "KEY", true};
  r.proxy = "http://proxy:3128";
  r.maxResponseBytes = 4096;
  return r;
}

TEST(HttpRelayFrames, ARequestComesBackFieldForField) {
  const Request in = fullRequest();
  auto out = decodeRequest(encodeRequest(in));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->method, in.method);
  EXPECT_EQ(out->url, in.url);
  EXPECT_EQ(out->headers, in.headers);
  EXPECT_EQ(out->body, in.body);
  EXPECT_EQ(out->timeout, in.timeout);
  EXPECT_EQ(out->tls.caFile, in.tls.caFile);
  EXPECT_EQ(out->tls.caData, in.tls.caData);
  EXPECT_EQ(out->tls.certFile, in.tls.certFile);
  EXPECT_EQ(out->tls.keyFile, in.tls.keyFile);
  EXPECT_EQ(out->tls.certData, in.tls.certData);
  EXPECT_EQ(out->tls.keyData, in.tls.keyData);
  EXPECT_EQ(out->tls.insecure, in.tls.insecure);
  EXPECT_EQ(out->proxy, in.proxy);
  EXPECT_EQ(out->maxResponseBytes, in.maxResponseBytes);
}

TEST(HttpRelayFrames, AnAnswerAndAnErrorComeBackFieldForField) {
  Response resp;
  resp.status = 409;
  resp.headers = {{"Content-Type", "application/json"}, {"X-Etcd-Index", "7"}};
  resp.body = "{\"kind\":\"Status\"}";
  auto r = decodeResult(encodeResult(resp));
  ASSERT_TRUE(r.has_value() && r->has_value());
  EXPECT_EQ((*r)->status, 409);
  EXPECT_EQ((*r)->headers, resp.headers);
  EXPECT_EQ((*r)->body, resp.body);

  const HttpError err{ErrorKind::kConnect, "GET http://127.0.0.1:1/", "Connection refused", 7, 111};
  auto e = decodeResult(encodeResult(std::unexpected(err)));
  ASSERT_TRUE(e.has_value() && !e->has_value());
  EXPECT_EQ(e->error().describe(), err.describe());
  EXPECT_EQ(e->error().kind, err.kind);
  EXPECT_EQ(e->error().curlCode, 7);
  EXPECT_EQ(e->error().osErrno, 111);
}

TEST(HttpRelayFrames, ABrokenFrameIsRefused) {
  const std::string good = encodeRequest(fullRequest());
  EXPECT_FALSE(decodeRequest(good.substr(0, good.size() - 1)).has_value());
  EXPECT_FALSE(decodeRequest(good + "0:,").has_value());
  EXPECT_FALSE(decodeRequest("").has_value());
  EXPECT_FALSE(decodeRequest("9:abc,").has_value());
  EXPECT_FALSE(decodeRequest("1:9," + good.substr(4)).has_value());  // method 9 does not exist
  EXPECT_FALSE(decodeResult("8:response,").has_value());
  EXPECT_FALSE(decodeResult("5:other,").has_value());
  EXPECT_FALSE(decodeResult("5:error,2:99,0:,0:,1:0,1:0,").has_value());  // kind 99 does not exist
}

// Answers each request with its URL as the body, and counts them.
class EchoClient final : public HttpClient {
 public:
  HttpResult<Response> send(const Request& r) override {
    ++calls;
    if (r.url == "fail") {
      return std::unexpected(HttpError{ErrorKind::kTimeout, "GET fail", "too slow", 28, 0});
    }
    Response out;
    out.status = 200;
    out.body = r.url;
    return out;
  }
  int calls = 0;
};

// Both ends of a connected stream socket pair: the test's and the relay's.
std::pair<os::UniqueFd, os::UniqueFd> connectedPair() {
  int sv[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return {};
  }
  return {os::UniqueFd(sv[0]), os::UniqueFd(sv[1])};
}

std::string readAll(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

TEST(HttpRelayServe, AnswersEveryRequestInOrderAndEndsAtEndOfFile) {
  auto [ours, relay] = connectedPair();
  ASSERT_TRUE(ours && relay);
  EchoClient client;
  int rc = -1;
  std::thread serving([&] {
    rc = serveHttpRelay(client, relay.get(), relay.get());
    relay.reset();  // the relay process's exit
  });
  Request a;
  a.url = "http://a/";
  Request b;
  b.url = "fail";
  const std::string frames = netstring(encodeRequest(a)) + netstring(encodeRequest(b));
  ASSERT_EQ(::write(ours.get(), frames.data(), frames.size()), static_cast<ssize_t>(frames.size()));
  ::shutdown(ours.get(), SHUT_WR);
  const std::string answers = readAll(ours.get());
  serving.join();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(client.calls, 2);
  Response okA;
  okA.status = 200;
  okA.body = "http://a/";
  EXPECT_EQ(answers, netstring(encodeResult(okA)) +
                         netstring(encodeResult(std::unexpected(HttpError{ErrorKind::kTimeout, "GET fail", "too slow", 28, 0}))));
}

TEST(HttpRelayServe, ABrokenFrameEndsTheRelayWithStatus1) {
  auto [ours, relay] = connectedPair();
  ASSERT_TRUE(ours && relay);
  EchoClient client;
  const std::string garbage = "12:not a request,";
  ASSERT_EQ(::write(ours.get(), garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
  EXPECT_EQ(serveHttpRelay(client, relay.get(), relay.get()), 1);
  EXPECT_EQ(client.calls, 0);
}

Request refused() {
  Request r;
  r.url = "http://127.0.0.1:1/ibcni-relay-test";
  r.timeout = std::chrono::milliseconds(2000);
  return r;
}

TEST(RelayHttpClient, AMissingRelayIsUnavailableNamingItEachTime) {
  RelayHttpClient client("/nonexistent/ibcni", {"http-relay"});
  for (int i = 0; i < 2; ++i) {
    auto r = client.send(refused());
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().kind, ErrorKind::kUnavailable);
    const std::string text = r.error().describe();
    EXPECT_NE(text.find("/nonexistent/ibcni could not be started"), std::string::npos) << text;
    EXPECT_NE(text.find("installed beside ibcni-ipam"), std::string::npos) << text;
    EXPECT_NE(text.find("GET http://127.0.0.1:1/ibcni-relay-test"), std::string::npos) << text;
  }
}

TEST(RelayHttpClient, ARelayThatEndsIsUnavailable) {
  RelayHttpClient client("/bin/true", {});
  auto r = client.send(refused());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, ErrorKind::kUnavailable);
  EXPECT_NE(r.error().message.find("/bin/true ended"), std::string::npos) << r.error().message;
}

TEST(RelayHttpClient, ARelayThatHangsIsStoppedAfterTheTimeoutAndSlack) {
  RelayHttpClient client("/bin/sleep", {"60"}, std::chrono::milliseconds(100));
  Request r = refused();
  r.timeout = std::chrono::milliseconds(100);
  const auto t0 = std::chrono::steady_clock::now();
  auto out = client.send(r);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error().kind, ErrorKind::kTimeout);
  EXPECT_NE(out.error().message.find("gave no answer in time"), std::string::npos) << out.error().message;
  EXPECT_LT(took, std::chrono::seconds(30)) << "the hung relay was waited for, not stopped";
}

TEST(RelayHttpClient, IbcniRelaysAnswerAsLibcurlInThisProcessDoes) {
  RelayHttpClient relayed(IBCNI_BINARY, {"http-relay"});
  CurlHttpClient inProcess;
  for (int i = 0; i < 2; ++i) {  // one relay serves both
    auto viaRelay = relayed.send(refused());
    auto direct = inProcess.send(refused());
    ASSERT_FALSE(viaRelay.has_value());
    ASSERT_FALSE(direct.has_value());
    // Field for field; curl's message carries the milliseconds the attempt took, so only its words.
    EXPECT_EQ(viaRelay.error().kind, ErrorKind::kConnect);
    EXPECT_EQ(viaRelay.error().kind, direct.error().kind);
    EXPECT_EQ(viaRelay.error().endpoint, direct.error().endpoint);
    EXPECT_EQ(viaRelay.error().curlCode, direct.error().curlCode);
    EXPECT_EQ(viaRelay.error().osErrno, direct.error().osErrno);
    for (const auto* m : {&viaRelay.error().message, &direct.error().message}) {
      EXPECT_NE(m->find("Couldn't connect to server"), std::string::npos) << *m;
    }
  }
}

}  // namespace
}  // namespace ibcni::http
