// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ibcni::http {

enum class Method { kGet, kPost, kPut, kDelete, kPatch };

/// "GET", "POST", ...
[[nodiscard]] constexpr std::string_view methodName(Method m) {
  switch (m) {
    case Method::kGet:
      return "GET";
    case Method::kPost:
      return "POST";
    case Method::kPut:
      return "PUT";
    case Method::kDelete:
      return "DELETE";
    case Method::kPatch:
      return "PATCH";
  }
  return "GET";
}

struct Header {
  std::string name;
  std::string value;
  bool operator==(const Header&) const = default;
};

/// ASCII case-insensitive equality (header names).
[[nodiscard]] inline bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

/// How the server is verified and how the client proves itself. A file and in-memory PEM of the
/// same thing are exclusive (send() fails with kInvalidRequest when both are set).
struct TlsOptions {
  std::string caFile;    ///< PEM bundle trusted instead of the system's
  std::string caData;    ///< the same, in memory
  std::string certFile;  ///< client certificate (PEM)
  std::string keyFile;   ///< its private key (PEM, unencrypted)
  std::string certData;  ///< client certificate, in memory
  std::string keyData;   ///< its key, in memory
  bool insecure = false; ///< verify neither the server's certificate nor its name (tests only)
};

struct Request {
  Method method = Method::kGet;
  std::string url;               ///< http:// or https:// only
  std::vector<Header> headers;   ///< sent as given; Content-Type only when given
  std::string body;              ///< sent for every method but a GET or DELETE with an empty body
  std::chrono::milliseconds timeout{5000};  ///< the whole exchange, connecting included
  TlsOptions tls;
  std::string proxy;             ///< empty: never a proxy (the environment's *_proxy are ignored)
  std::size_t maxResponseBytes = 64U << 20U;  ///< a longer body fails with kTransfer
};

struct Response {
  long status = 0;               ///< every status is a response, never an error (201, 409, 500...)
  std::vector<Header> headers;   ///< the final response's headers, in order
  std::string body;

  /// The first header named `name` (case-insensitive).
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const {
    for (const auto& h : headers) {
      if (equalsIgnoreCase(h.name, name)) {
        return h.value;
      }
    }
    return std::nullopt;
  }
  [[nodiscard]] std::string contentType() const { return header("Content-Type").value_or(""); }
};

/// What failed. A backend retries kConnect and kTimeout on another endpoint; kTls and
/// kInvalidRequest are configuration errors; kUnavailable means the HTTP library is missing.
enum class ErrorKind {
  kUnavailable,     ///< libcurl could not be loaded (or lacks a function we call)
  kInvalidRequest,  ///< the request cannot be sent as given (bad URL, scheme, TLS options)
  kDns,             ///< the host name did not resolve
  kConnect,         ///< no connection (refused, unreachable)
  kTimeout,         ///< Request::timeout passed
  kTls,             ///< handshake, verification, certificate or key
  kTransfer,        ///< the connection broke, or the answer is not HTTP, or too long
  kOther,
};

/// "unavailable", "invalid request", "DNS", "connect", "timeout", "TLS", "transfer", "other"
[[nodiscard]] std::string_view errorKindName(ErrorKind kind);

struct HttpError {
  ErrorKind kind = ErrorKind::kOther;
  std::string endpoint;  ///< "METHOD URL"
  std::string message;   ///< curl's message (its error buffer), or dlerror()'s text
  int curlCode = 0;      ///< CURLcode; 0 when curl was not reached
  int osErrno = 0;       ///< CURLINFO_OS_ERRNO when curl gave one (ECONNREFUSED ...)

  /// "METHOD URL: <kind>: <message> (curl error N[, ENAME])"
  [[nodiscard]] std::string describe() const;
};

template <class T>
using HttpResult = std::expected<T, HttpError>;

/// One HTTP(S) exchange per send(): no redirects followed, no proxy unless asked, no cookies.
/// Implementations are safe to call from several threads at once.
class HttpClient {
 public:
  virtual ~HttpClient() = default;
  [[nodiscard]] virtual HttpResult<Response> send(const Request& request) = 0;
};

}  // namespace ibcni::http
