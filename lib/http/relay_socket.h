// SPDX-License-Identifier: Apache-2.0
// The HTTP relay served on a Unix socket by a long-running process (the node agent), so that a
// plugin run's cluster requests cost neither the exec of `ibcni http-relay` nor loading libcurl
// (most of a fresh node's first ADD), and go over connections and TLS sessions kept open. The
// frames are http_relay.h's; after accepting a connection the server writes one byte, kRelayReady,
// so that a client turned away (not its user, too many connections) learns it before it sends.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <thread>

#include "ibcni/http/http_client.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::http {

inline constexpr char kRelayReady = 'R';

/// Where the node agent serves the relay unless told otherwise (ibcni-agent --http-relay-socket),
/// and the environment variable that names another place to the plugins (tests, other layouts).
inline constexpr std::string_view kDefaultRelaySocket = "/run/ibcni/http-relay.sock";
inline constexpr std::string_view kRelaySocketEnv = "IBCNI_HTTP_RELAY_SOCKET";
/// The connections a relay server serves at once (RelayServer::Options), and so the connections the
/// client it sends with keeps open (CurlHttpClient).
inline constexpr std::size_t kRelayMaxConnections = 64;

/// Where the plugins look for the node agent's relay: $IBCNI_HTTP_RELAY_SOCKET when set and not
/// empty, else kDefaultRelaySocket.
[[nodiscard]] std::string relaySocketFromEnvironment();

/// Sends through the relay listening on `socketPath`, and through `fallback` when none serves there:
/// the socket is tried on the first send(). A path with no listener, or a listener that turns this
/// client away or does not say it is ready within `readyWait`, sends every request with `fallback`.
/// A connection that breaks after a request was written fails that request (it may have been
/// carried out) and sends the later ones with `fallback`; one that breaks before sends it there.
class SocketRelayHttpClient final : public HttpClient {
 public:
  SocketRelayHttpClient(std::string socketPath, HttpClient& fallback,
                        std::chrono::milliseconds readyWait = std::chrono::seconds(1),
                        std::chrono::milliseconds slack = std::chrono::seconds(5));

  [[nodiscard]] HttpResult<Response> send(const Request& request) override;

  /// Whether the requests go through the socket (false before the first send()).
  [[nodiscard]] bool throughSocket() const;

 private:
  enum class Route { kUntried, kSocket, kFallback };
  void connect();

  std::string path_;
  HttpClient& fallback_;
  std::chrono::milliseconds readyWait_;
  std::chrono::milliseconds slack_;
  mutable std::mutex mutex_;
  Route route_ = Route::kUntried;
  os::UniqueFd socket_;
};

/// Serves relay requests on a Unix socket (mode 0600) to the processes of this process's user and
/// of root, each connection on a thread of its own sending with `client` (which must be safe to
/// call from several threads), at most `maxConnections` at once; a connection idle for `idle` is
/// closed. The socket is removed when the server is destroyed, if it is still the one it made.
class RelayServer {
 public:
  struct Options {
    std::string path;
    std::size_t maxConnections = kRelayMaxConnections;
    std::chrono::milliseconds idle = std::chrono::minutes(2);
  };
  struct Counts {
    std::uint64_t served = 0;     ///< connections served
    std::uint64_t refused = 0;    ///< from another user
    std::uint64_t turnedAway = 0;  ///< past maxConnections
  };

  /// Makes the socket (its directory too, mode 0700, when missing) and starts accepting. A stale
  /// socket at `path` (nothing listening) is replaced; a file that is not a socket, or a socket
  /// another process serves, is an error naming it.
  [[nodiscard]] static std::expected<std::unique_ptr<RelayServer>, std::string> listen(Options options,
                                                                                      HttpClient& client);
  ~RelayServer();
  RelayServer(const RelayServer&) = delete;
  RelayServer& operator=(const RelayServer&) = delete;

  [[nodiscard]] Counts counts() const;
  [[nodiscard]] const std::string& path() const { return options_.path; }

 private:
  struct Connection {
    os::UniqueFd fd;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  RelayServer(Options options, HttpClient& client, os::UniqueFd listener, os::UniqueFd wake, dev_t dev, ino_t ino);
  void acceptLoop();
  void admit(os::UniqueFd fd);
  void reapFinished();

  Options options_;
  HttpClient& client_;
  os::UniqueFd listener_;
  os::UniqueFd wake_;  ///< an eventfd: written to stop the accept loop
  dev_t dev_;
  ino_t ino_;
  mutable std::mutex mutex_;
  std::list<std::unique_ptr<Connection>> connections_;
  Counts counts_;
  std::thread acceptor_;
};

}  // namespace ibcni::http
