// SPDX-License-Identifier: Apache-2.0
// HTTP exchanges sent by another process: ibcni-ipam is a static program (its exec is its hot
// path) and a static program cannot load libcurl, so its rare cluster-mode requests go through
// `ibcni http-relay`, the dynamic executable installed beside it, which sends them with
// CurlHttpClient. One relay process serves every request of one ibcni-ipam run, over a socket
// pair, one framed request and one framed answer at a time.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include "ibcni/http/http_client.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::http {

/// The frames (netstrings of the fields, in a netstring). Exposed for the codec's tests.
[[nodiscard]] std::string encodeRequest(const Request& request);
[[nodiscard]] std::optional<Request> decodeRequest(std::string_view frame);
[[nodiscard]] std::string encodeResult(const HttpResult<Response>& result);
[[nodiscard]] std::optional<HttpResult<Response>> decodeResult(std::string_view frame);

/// An HttpClient whose exchanges a relay process sends: `program args...` is started on the first
/// send() with a socket on its stdin and stdout, and ends when this client is destroyed (it reads
/// end of file) or when a request outlives its timeout (it is killed). A relay that cannot be
/// started, or that dies, is an error of kind kUnavailable naming the program; the next send()
/// starts a new one.
class RelayHttpClient final : public HttpClient {
 public:
  /// `slack`: how long past a request's own timeout an answer is waited for before the relay is
  /// taken for hung (its client enforces the timeout itself).
  RelayHttpClient(std::string program, std::vector<std::string> args,
                  std::chrono::milliseconds slack = std::chrono::seconds(5));
  ~RelayHttpClient() override;
  RelayHttpClient(const RelayHttpClient&) = delete;
  RelayHttpClient& operator=(const RelayHttpClient&) = delete;

  [[nodiscard]] HttpResult<Response> send(const Request& request) override;

 private:
  [[nodiscard]] bool start(std::string& why);
  void stop(bool kill);

  std::string program_;
  std::vector<std::string> args_;
  std::chrono::milliseconds slack_;
  std::mutex mutex_;
  os::UniqueFd socket_;
  pid_t pid_ = -1;
};

/// The relay's side: reads framed requests from `in` until end of file, sends each with `client`
/// and writes its framed answer to `out`. Returns 0 at end of file, 1 on a broken frame or stream.
[[nodiscard]] int serveHttpRelay(HttpClient& client, int in, int out);

}  // namespace ibcni::http
