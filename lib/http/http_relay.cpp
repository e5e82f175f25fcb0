// SPDX-License-Identifier: Apache-2.0
#include "lib/http/http_relay.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstring>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace ibcni::http {

namespace {

// A frame larger than this is broken (the largest answer is maxResponseBytes, 64 MiB by default).
constexpr std::size_t kMaxFrame = std::size_t{1} << 30;

void putField(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
  out += ',';
}

void putNumber(std::string& out, long long n) { putField(out, std::to_string(n)); }

// Reads the fields of a frame in order; any malformed field makes every later read fail.
class FieldReader {
 public:
  explicit FieldReader(std::string_view in) : in_(in) {}

  bool field(std::string& out) {
    std::size_t n = 0;
    auto [end, ec] = std::from_chars(in_.data(), in_.data() + in_.size(), n);
    const auto digits = static_cast<std::size_t>(end - in_.data());
    if (ec != std::errc{} || digits == 0 || digits + 2 + n > in_.size() || in_[digits] != ':' ||
        in_[digits + 1 + n] != ',') {
      ok_ = false;
      return false;
    }
    out.assign(in_.substr(digits + 1, n));
    in_.remove_prefix(digits + 2 + n);
    return ok_;
  }

  template <class N>
  bool number(N& out) {
    std::string text;
    if (!field(text)) {
      return false;
    }
    long long v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    ok_ = ok_ && ec == std::errc{} && end == text.data() + text.size();
    out = static_cast<N>(v);
    return ok_;
  }

  [[nodiscard]] bool done() const { return ok_ && in_.empty(); }

 private:
  std::string_view in_;
  bool ok_ = true;
};

void putHeaders(std::string& out, const std::vector<Header>& headers) {
  putNumber(out, static_cast<long long>(headers.size()));
  for (const auto& h : headers) {
    putField(out, h.name);
    putField(out, h.value);
  }
}

bool readHeaders(FieldReader& r, std::vector<Header>& headers) {
  std::size_t n = 0;
  if (!r.number(n) || n > kMaxFrame) {
    return false;
  }
  headers.resize(n);
  for (auto& h : headers) {
    if (!r.field(h.name) || !r.field(h.value)) {
      return false;
    }
  }
  return true;
}

bool writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) {
      n = ::write(fd, data.data(), data.size());
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

enum class ReadOutcome { kFrame, kEnd, kBroken, kTimeout };
using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// Reads up to `size` bytes into `buf`, waiting at most until `deadline` when one is given. kFrame
// with `got` bytes read; kEnd at end of file.
ReadOutcome readSome(int fd, char* buf, std::size_t size, const Deadline& deadline, std::size_t& got) {
  for (;;) {
    if (deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::max<long long>(left.count(), 0)));
      if (ready == 0) {
        return ReadOutcome::kTimeout;
      }
      if (ready < 0) {
        if (errno == EINTR) {
          continue;
        }
        return ReadOutcome::kBroken;
      }
    }
    const ssize_t n = ::read(fd, buf, size);
    if (n > 0) {
      got = static_cast<std::size_t>(n);
      return ReadOutcome::kFrame;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    return n == 0 ? ReadOutcome::kEnd : ReadOutcome::kBroken;
  }
}

// One frame: "<length>:<bytes>,", its length read a byte at a time so that nothing of the next
// frame is consumed. kEnd only when the stream ends before the frame's first byte.
ReadOutcome readFrame(int fd, std::string& frame, const Deadline& deadline = std::nullopt) {
  std::size_t length = 0;
  std::size_t digits = 0;
  for (char c = 0;;) {
    std::size_t got = 0;
    if (auto r = readSome(fd, &c, 1, deadline, got); r != ReadOutcome::kFrame) {
      return r == ReadOutcome::kEnd && digits > 0 ? ReadOutcome::kBroken : r;
    }
    if (c == ':' && digits > 0) {
      break;
    }
    if (c < '0' || c > '9' || ++digits > 10) {
      return ReadOutcome::kBroken;
    }
    length = length * 10 + static_cast<std::size_t>(c - '0');
  }
  if (length > kMaxFrame) {
    return ReadOutcome::kBroken;
  }
  frame.resize(length + 1);
  for (std::size_t have = 0; have < frame.size();) {
    std::size_t got = 0;
    if (auto r = readSome(fd, frame.data() + have, frame.size() - have, deadline, got); r != ReadOutcome::kFrame) {
      return r == ReadOutcome::kTimeout ? r : ReadOutcome::kBroken;
    }
    have += got;
  }
  if (frame.back() != ',') {
    return ReadOutcome::kBroken;
  }
  frame.pop_back();
  return ReadOutcome::kFrame;
}

std::string framed(const std::string& fields) {
  std::string out;
  putField(out, fields);
  return out;
}

std::string endpointOf(const Request& r) { return std::string(methodName(r.method)) + " " + r.url; }

}  // namespace

std::string encodeRequest(const Request& r) {
  std::string out;
  putNumber(out, static_cast<int>(r.method));
  putField(out, r.url);
  putHeaders(out, r.headers);
  putField(out, r.body);
  putNumber(out, r.timeout.count());
  for (const auto* s : {&r.tls.caFile, &r.tls.caData, &r.tls.certFile, &r.tls.keyFile, &r.tls.certData, &r.tls.keyData}) {
    putField(out, *s);
  }
  putNumber(out, r.tls.insecure ? 1 : 0);
  putField(out, r.proxy);
  putNumber(out, static_cast<long long>(r.maxResponseBytes));
  return out;
}

std::optional<Request> decodeRequest(std::string_view frame) {
  FieldReader in(frame);
  Request r;
  int method = 0;
  long long timeoutMs = 0;
  int insecure = 0;
  bool ok = in.number(method) && method >= 0 && method <= static_cast<int>(Method::kPatch) && in.field(r.url) &&
            readHeaders(in, r.headers) && in.field(r.body) && in.number(timeoutMs);
  for (auto* s : {&r.tls.caFile, &r.tls.caData, &r.tls.certFile, &r.tls.keyFile, &r.tls.certData, &r.tls.keyData}) {
    ok = ok && in.field(*s);
  }
  ok = ok && in.number(insecure) && in.field(r.proxy) && in.number(r.maxResponseBytes) && in.done();
  if (!ok) {
    return std::nullopt;
  }
  r.method = static_cast<Method>(method);
  r.timeout = std::chrono::milliseconds(timeoutMs);
  r.tls.insecure = insecure != 0;
  return r;
}

std::string encodeResult(const HttpResult<Response>& result) {
  std::string out;
  if (result) {
    putField(out, "response");
    putNumber(out, result->status);
    putHeaders(out, result->headers);
    putField(out, result->body);
    return out;
  }
  const auto& e = result.error();
  putField(out, "error");
  putNumber(out, static_cast<int>(e.kind));
  putField(out, e.endpoint);
  putField(out, e.message);
  putNumber(out, e.curlCode);
  putNumber(out, e.osErrno);
  return out;
}

std::optional<HttpResult<Response>> decodeResult(std::string_view frame) {
  FieldReader in(frame);
  std::string tag;
  if (!in.field(tag)) {
    return std::nullopt;
  }
  if (tag == "response") {
    Response r;
    if (in.number(r.status) && readHeaders(in, r.headers) && in.field(r.body) && in.done()) {
      return HttpResult<Response>(std::move(r));
    }
    return std::nullopt;
  }
  HttpError e;
  int kind = 0;
  if (tag == "error" && in.number(kind) && kind >= 0 && kind <= static_cast<int>(ErrorKind::kOther) &&
      in.field(e.endpoint) && in.field(e.message) && in.number(e.curlCode) && in.number(e.osErrno) && in.done()) {
    e.kind = static_cast<ErrorKind>(kind);
    return HttpResult<Response>(std::unexpected(std::move(e)));
  }
  return std::nullopt;
}

RelayHttpClient::RelayHttpClient(std::string program, std::vector<std::string> args, std::chrono::milliseconds slack)
    : program_(std::move(program)), args_(std::move(args)), slack_(slack) {}

RelayHttpClient::~RelayHttpClient() { stop(false); }

bool RelayHttpClient::start(std::string& why) {
  // Asked first, so that the answer does not depend on how posix_spawn reports a failed exec (an
  // emulator's may report none, leaving a child that exits 127).
  if (::access(program_.c_str(), X_OK) != 0) {
    why = std::strerror(errno);
    return false;
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    why = std::string("socketpair: ") + std::strerror(errno);
    return false;
  }
  os::UniqueFd mine(sv[0]);
  os::UniqueFd theirs(sv[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, theirs.get(), 0);
  posix_spawn_file_actions_adddup2(&actions, theirs.get(), 1);
  std::vector<char*> argv;
  argv.push_back(program_.data());
  for (auto& a : args_) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, program_.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    why = std::strerror(rc);
    return false;
  }
  pid_ = pid;
  socket_ = std::move(mine);
  return true;
}

void RelayHttpClient::stop(bool kill) {
  if (pid_ < 0) {
    return;
  }
  socket_.reset();  // the relay reads end of file and exits
  if (kill) {
    ::kill(pid_, SIGKILL);
  }
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

HttpResult<Response> RelayHttpClient::send(const Request& request) {
  const std::lock_guard lock(mutex_);
  std::string why;
  if (pid_ < 0 && !start(why)) {
    return relayFailure(request, ErrorKind::kUnavailable,
                        "the HTTP relay " + program_ + " could not be started (" + why +
                            "): cluster mode's requests are sent by ibcni, installed beside ibcni-ipam");
  }
  auto answer = exchangeOverRelay(socket_.get(), request, slack_);
  if (answer) {
    return std::move(*answer);
  }
  stop(true);
  if (answer.error() == RelayFailure::kTimeout) {
    return relayFailure(request, ErrorKind::kTimeout,
                        "the HTTP relay " + program_ + " gave no answer in time and was stopped");
  }
  return relayFailure(request, ErrorKind::kUnavailable,
                      "the HTTP relay " + program_ + " ended or answered with a broken frame");
}

std::expected<HttpResult<Response>, RelayFailure> exchangeOverRelay(int fd, const Request& request,
                                                                     std::chrono::milliseconds slack) {
  // The relay's client enforces request.timeout; this bound only catches a relay that hangs.
  const auto deadline = std::chrono::steady_clock::now() + request.timeout + slack;
  std::string answer;
  if (!writeAll(fd, framed(encodeRequest(request)))) {
    return std::unexpected(RelayFailure::kNotSent);
  }
  const ReadOutcome got = readFrame(fd, answer, deadline);
  if (got == ReadOutcome::kTimeout) {
    return std::unexpected(RelayFailure::kTimeout);
  }
  auto result = got == ReadOutcome::kFrame ? decodeResult(answer) : std::nullopt;
  if (!result) {
    return std::unexpected(RelayFailure::kBroken);
  }
  return std::move(*result);
}

HttpResult<Response> relayFailure(const Request& request, ErrorKind kind, std::string message) {
  return std::unexpected(HttpError{kind, endpointOf(request), std::move(message), 0, 0});
}

int serveHttpRelay(HttpClient& client, int in, int out, std::optional<std::chrono::milliseconds> idle) {
  for (std::string frame;;) {
    const Deadline deadline =
        idle ? Deadline(std::chrono::steady_clock::now() + *idle) : Deadline(std::nullopt);
    const auto got = readFrame(in, frame, deadline);
    if (got == ReadOutcome::kEnd) {
      return 0;
    }
    auto request = got == ReadOutcome::kFrame ? decodeRequest(frame) : std::nullopt;
    if (!request) {
      return 1;
    }
    if (!writeAll(out, framed(encodeResult(client.send(*request))))) {
      return 1;
    }
  }
}

}  // namespace ibcni::http
