// SPDX-License-Identifier: Apache-2.0
#include "lib/http/relay_socket.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <utility>

#include "lib/http/http_relay.h"

namespace ibcni::http {

namespace {

std::expected<sockaddr_un, std::string> addressOf(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path) {
    return std::unexpected("the socket path \"" + path + "\" is empty or longer than " +
                           std::to_string(sizeof a.sun_path - 1) + " bytes");
  }
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

// A connection to `path`, or none when nothing listens there or its backlog is full (never waits).
os::UniqueFd connectTo(const std::string& path) {
  auto a = addressOf(path);
  if (!a) {
    return {};
  }
  os::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*a), sizeof *a) != 0) {
    return {};
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return {};
  }
  return fd;
}

// Whether a process listens at `a`: a connection, or a backlog full (EAGAIN), says so; a socket
// file nobody listens on any more refuses the connection.
bool someoneListens(const sockaddr_un& a) {
  os::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  return fd && (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0 || errno == EAGAIN);
}

// Whether `fd` gives kRelayReady within `wait`.
bool saysReady(int fd, std::chrono::milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  int ready = 0;
  while ((ready = ::poll(&p, 1, static_cast<int>(wait.count()))) < 0 && errno == EINTR) {
  }
  char c = 0;
  return ready == 1 && ::recv(fd, &c, 1, 0) == 1 && c == kRelayReady;
}

}  // namespace

std::string relaySocketFromEnvironment() {
  const char* set = std::getenv(std::string(kRelaySocketEnv).c_str());
  return set != nullptr && *set != '\0' ? std::string(set) : std::string(kDefaultRelaySocket);
}

SocketRelayHttpClient::SocketRelayHttpClient(std::string socketPath, HttpClient& fallback,
                                             std::chrono::milliseconds readyWait, std::chrono::milliseconds slack)
    : path_(std::move(socketPath)), fallback_(fallback), readyWait_(readyWait), slack_(slack) {}

void SocketRelayHttpClient::connect() {
  os::UniqueFd fd = connectTo(path_);
  if (fd && saysReady(fd.get(), readyWait_)) {
    socket_ = std::move(fd);
    route_ = Route::kSocket;
  } else {
    route_ = Route::kFallback;
  }
}

bool SocketRelayHttpClient::throughSocket() const {
  const std::lock_guard lock(mutex_);
  return route_ == Route::kSocket;
}

HttpResult<Response> SocketRelayHttpClient::send(const Request& request) {
  std::unique_lock lock(mutex_);
  if (route_ == Route::kUntried) {
    connect();
  }
  if (route_ == Route::kSocket) {
    auto answer = exchangeOverRelay(socket_.get(), request, slack_);
    if (answer) {
      return std::move(*answer);
    }
    socket_.reset();
    route_ = Route::kFallback;
    if (answer.error() == RelayFailure::kTimeout) {
      return relayFailure(request, ErrorKind::kTimeout, "the HTTP relay at " + path_ + " gave no answer in time");
    }
    if (answer.error() == RelayFailure::kBroken) {
      return relayFailure(request, ErrorKind::kTransfer,
                          "the HTTP relay at " + path_ + " closed the connection before it answered");
    }
  }
  lock.unlock();  // the fallback serializes its own requests
  return fallback_.send(request);
}

std::expected<std::unique_ptr<RelayServer>, std::string> RelayServer::listen(Options options, HttpClient& client) {
  const auto address = addressOf(options.path);
  if (!address) {
    return std::unexpected(address.error());
  }
  const std::string& path = options.path;
  const auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0 && ::mkdir(path.substr(0, slash).c_str(), 0700) != 0 &&
      errno != EEXIST) {
    return std::unexpected("cannot make the directory of " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return std::unexpected(path + " exists and is not a socket: remove it, or name another path");
    }
    if (someoneListens(*address)) {
      return std::unexpected(path + " is served by another process (another agent on this node?)");
    }
    ::unlink(path.c_str());  // stale: its server is gone
  }
  os::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  os::UniqueFd wake(::eventfd(0, EFD_CLOEXEC));
  if (!fd || !wake || ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof *address) != 0 ||
      ::chmod(path.c_str(), 0600) != 0 || ::listen(fd.get(), 128) != 0 || ::lstat(path.c_str(), &st) != 0) {
    return std::unexpected("cannot listen on " + path + ": " + std::strerror(errno));
  }
  return std::unique_ptr<RelayServer>(
      new RelayServer(std::move(options), client, std::move(fd), std::move(wake), st.st_dev, st.st_ino));
}

RelayServer::RelayServer(Options options, HttpClient& client, os::UniqueFd listener, os::UniqueFd wake, dev_t dev,
                         ino_t ino)
    : options_(std::move(options)),
      client_(client),
      listener_(std::move(listener)),
      wake_(std::move(wake)),
      dev_(dev),
      ino_(ino),
      acceptor_([this] { acceptLoop(); }) {}

RelayServer::~RelayServer() {
  const std::uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
  acceptor_.join();
  std::list<std::unique_ptr<Connection>> left;
  {
    const std::lock_guard lock(mutex_);
    for (auto& c : connections_) {
      ::shutdown(c->fd.get(), SHUT_RDWR);  // a request in flight finishes; its answer goes nowhere
    }
    left.swap(connections_);
  }
  for (auto& c : left) {
    c->thread.join();
  }
  struct stat st {};
  if (::lstat(options_.path.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) {
    ::unlink(options_.path.c_str());
  }
}

RelayServer::Counts RelayServer::counts() const {
  const std::lock_guard lock(mutex_);
  return counts_;
}

void RelayServer::acceptLoop() {
  for (;;) {
    pollfd p[2] = {{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) {
      return;
    }
    if (p[1].revents != 0) {
      return;
    }
    if (p[0].revents != 0) {
      os::UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (fd) {
        admit(std::move(fd));
      }
    }
  }
}

void RelayServer::admit(os::UniqueFd fd) {
  reapFinished();
  ucred peer{};
  socklen_t size = sizeof peer;
  const bool allowed = ::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0 &&
                       (peer.uid == 0 || peer.uid == ::geteuid());
  const std::lock_guard lock(mutex_);
  if (!allowed || connections_.size() >= options_.maxConnections) {
    ++(allowed ? counts_.turnedAway : counts_.refused);
    return;  // closed: the client sends by other means
  }
  if (::send(fd.get(), &kRelayReady, 1, MSG_NOSIGNAL) != 1) {
    return;
  }
  ++counts_.served;
  auto c = std::make_unique<Connection>();
  c->fd = std::move(fd);
  Connection* raw = c.get();
  c->thread = std::thread([this, raw] {
    (void)serveHttpRelay(client_, raw->fd.get(), raw->fd.get(), options_.idle);
    raw->done = true;
  });
  connections_.push_back(std::move(c));
}

void RelayServer::reapFinished() {
  std::list<std::unique_ptr<Connection>> finished;
  {
    const std::lock_guard lock(mutex_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto next = std::next(it);
      if ((*it)->done) {
        finished.splice(finished.end(), connections_, it);
      }
      it = next;
    }
  }
  for (auto& c : finished) {
    c->thread.join();
  }
}

}  // namespace ibcni::http
