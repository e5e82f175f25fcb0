// SPDX-License-Identifier: Apache-2.0
// HTTP exchanges sent by another process: ibcni-ipam is a static program (its exec is its hot
// path) and a static program cannot load libcurl, so its rare cluster-mode requests go through
// `ibcni http-relay`, the dynamic executable installed beside it, which sends them with
// CurlHttpClient. One relay process serves every request of one ibcni-ipam run, over a socket
// pair, one framed request and one framed answer at a time.
#pragma once

#include <chrono>
#include <expected>
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

/// How an exchange with a relay failed: the request could not be written (nothing was sent), the
/// stream ended or broke after it was, or no answer came in time.
enum class RelayFailure { kNotSent, kBroken, kTimeout };

/// One request over a relay's stream `fd`: its frame written, the answer's frame read, waiting at
/// most `request.timeout + slack` for it (the relay's client enforces the timeout itself).
[[nodiscard]] std::expected<HttpResult<Response>, RelayFailure> exchangeOverRelay(int fd, const Request& request,
                                                                                   std::chrono::milliseconds slack);

/// The error of kind `kind` a relay's client answers for `request` with `message`.
[[nodiscard]] HttpResult<Response> relayFailure(const Request& request, ErrorKind kind, std::string message);

/// The relay's side: reads framed requests from `in` until end of file, sends each with `client`
/// and writes its framed answer to `out`. Returns 0 at end of file, 1 on a broken frame or stream,
/// or when `idle` passes with no request begun.
[[nodiscard]] int serveHttpRelay(HttpClient& client, int in, int out,
                                 std::optional<std::chrono::milliseconds> idle = std::nullopt);

}  // namespace ibcni::http
