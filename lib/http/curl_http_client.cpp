// SPDX-License-Identifier: Apache-2.0
#include "lib/http/curl_http_client.h"
#include "ibcni/os/dl_symbol.h"
#include "lib/http/relay_socket.h"

// <curl/curl.h> is compiled against for its types and constants only: every function is resolved
// with dlsym (the plugins do not link libcurl). CURLOPT_PROTOCOLS, the fallback for a libcurl
// older than 7.85, is deprecated in the header.
#define CURL_DISABLE_TYPECHECK 1
#define CURL_DISABLE_DEPRECATION 1
#include <curl/curl.h>
#include <dlfcn.h>

#include <cstring>
#include <expected>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace ibcni::http {

/// libcurl's functions, resolved once per client.
struct CurlApi {
  std::once_flag once;
  std::string loadError;  ///< non-empty: the library is unusable, and why
  decltype(&::curl_global_init) globalInit = nullptr;
  decltype(&::curl_easy_init) easyInit = nullptr;
  decltype(&::curl_easy_setopt) easySetopt = nullptr;
  decltype(&::curl_easy_perform) easyPerform = nullptr;
  decltype(&::curl_easy_getinfo) easyGetinfo = nullptr;
  decltype(&::curl_easy_cleanup) easyCleanup = nullptr;
  decltype(&::curl_easy_strerror) easyStrerror = nullptr;
  decltype(&::curl_slist_append) slistAppend = nullptr;
  decltype(&::curl_slist_free_all) slistFreeAll = nullptr;
  // The connection cache of a client that keeps its connections (resolved when it does).
  decltype(&::curl_share_init) shareInit = nullptr;
  decltype(&::curl_share_setopt) shareSetopt = nullptr;
  decltype(&::curl_share_cleanup) shareCleanup = nullptr;
  CURLSH* share = nullptr;
  std::mutex shareLocks[CURL_LOCK_DATA_LAST];
};

namespace {

/// Connections a client that keeps them holds open at most: as many as the concurrent requests of
/// its busiest caller, the relay socket.
constexpr long kSharedConnections = static_cast<long>(kRelayMaxConnections);

constexpr const char* kPackageHint = "install libcurl4 on Debian/Ubuntu, libcurl on RHEL/Fedora";

void lockShare(CURL* /*handle*/, curl_lock_data data, curl_lock_access /*access*/, void* api) {
  static_cast<CurlApi*>(api)->shareLocks[data].lock();
}
void unlockShare(CURL* /*handle*/, curl_lock_data data, void* api) {
  static_cast<CurlApi*>(api)->shareLocks[data].unlock();
}

/// A share of connections and TLS sessions for the client's handles (libcurl 7.57 or newer), or
/// null when this libcurl cannot: then every request opens its own connection.
CURLSH* makeShare(void* lib, CurlApi& api) {
  std::string missing;
  if (!os::resolveSymbols(lib, missing, os::Symbol{"curl_share_init", api.shareInit},
                          os::Symbol{"curl_share_setopt", api.shareSetopt},
                          os::Symbol{"curl_share_cleanup", api.shareCleanup})) {
    return nullptr;
  }
  CURLSH* share = api.shareInit();
  if (share == nullptr) {
    return nullptr;
  }
  const bool ok = api.shareSetopt(share, CURLSHOPT_LOCKFUNC, &lockShare) == CURLSHE_OK &&
                  api.shareSetopt(share, CURLSHOPT_UNLOCKFUNC, &unlockShare) == CURLSHE_OK &&
                  api.shareSetopt(share, CURLSHOPT_USERDATA, &api) == CURLSHE_OK &&
                  api.shareSetopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) == CURLSHE_OK &&
                  api.shareSetopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) == CURLSHE_OK;
  if (!ok) {
    api.shareCleanup(share);
    return nullptr;
  }
  return share;
}

/// @return empty on success, else the reason, naming the library and the package.
std::string loadCurl(const std::string& library, CurlApi& api, bool keepConnections) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return "cannot load " + library + " (" + kPackageHint + "): " + (why != nullptr ? why : "dlopen failed");
  }
  std::string missing;
  const bool ok = os::resolveSymbols(
      lib, missing, os::Symbol{"curl_global_init", api.globalInit}, os::Symbol{"curl_easy_init", api.easyInit},
      os::Symbol{"curl_easy_setopt", api.easySetopt}, os::Symbol{"curl_easy_perform", api.easyPerform},
      os::Symbol{"curl_easy_getinfo", api.easyGetinfo}, os::Symbol{"curl_easy_cleanup", api.easyCleanup},
      os::Symbol{"curl_easy_strerror", api.easyStrerror}, os::Symbol{"curl_slist_append", api.slistAppend},
      os::Symbol{"curl_slist_free_all", api.slistFreeAll});
  if (!ok) {
    // Left loaded: unloading a library whose constructors ran is not worth the risk.
    return library + " is not a usable libcurl (" + kPackageHint + "): " + missing;
  }
  // Before 7.84 curl_global_init is not thread-safe; clients may load at the same time.
  static std::mutex globalInitMutex;
  const std::lock_guard lock(globalInitMutex);
  const CURLcode rc = api.globalInit(CURL_GLOBAL_DEFAULT);
  if (rc != CURLE_OK) {
    return library + ": curl_global_init failed: " + api.easyStrerror(rc);
  }
  if (keepConnections) {
    api.share = makeShare(lib, api);
  }
  return {};
}

ErrorKind kindOf(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return ErrorKind::kDns;
    case CURLE_COULDNT_CONNECT:
      return ErrorKind::kConnect;
    case CURLE_OPERATION_TIMEDOUT:
      return ErrorKind::kTimeout;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
      return ErrorKind::kTls;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_UNKNOWN_OPTION:
    case CURLE_NOT_BUILT_IN:
    case CURLE_BAD_FUNCTION_ARGUMENT:
      return ErrorKind::kInvalidRequest;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_WRITE_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return ErrorKind::kTransfer;
    default:
      return ErrorKind::kOther;
  }
}

bool startsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && equalsIgnoreCase(s.substr(0, prefix.size()), prefix);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

/// What the callbacks fill.
struct Sink {
  Response response;
  std::size_t maxBody = 0;
  bool tooLong = false;
};

std::size_t writeBody(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::size_t n = size * count;
  if (sink->response.body.size() + n > sink->maxBody) {
    sink->tooLong = true;
    return 0;  // CURLE_WRITE_ERROR
  }
  try {
    sink->response.body.append(data, n);
  } catch (...) {
    return 0;
  }
  return n;
}

/// One header line at a time; a status line (of a 1xx or the final response) starts over.
std::size_t writeHeader(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::size_t n = size * count;
  try {
    const std::string_view line(data, n);
    auto& headers = sink->response.headers;
    if (startsWithIgnoreCase(line, "HTTP/")) {
      headers.clear();
    } else if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
      if (!headers.empty()) {  // obsolete line folding: a continuation of the last value
        headers.back().value += ' ';
        headers.back().value += trim(line);
      }
    } else if (const auto colon = line.find(':'); colon != std::string_view::npos) {
      headers.push_back(Header{std::string(trim(line.substr(0, colon))), std::string(trim(line.substr(colon + 1)))});
    }
  } catch (...) {
    return 0;
  }
  return n;
}

/// Owns one easy handle and the header list.
class Easy {
 public:
  explicit Easy(const CurlApi& api) : api_(api), handle_(api.easyInit()) {}
  ~Easy() {
    if (headers_ != nullptr) {
      api_.slistFreeAll(headers_);
    }
    if (handle_ != nullptr) {
      api_.easyCleanup(handle_);
    }
  }
  Easy(const Easy&) = delete;
  Easy& operator=(const Easy&) = delete;

  [[nodiscard]] CURL* get() const { return handle_; }

  /// Appends one header line. @return false when out of memory.
  bool addHeader(const std::string& line) {
    curl_slist* next = api_.slistAppend(headers_, line.c_str());
    if (next == nullptr) {
      return false;
    }
    headers_ = next;
    return true;
  }
  [[nodiscard]] curl_slist* headers() const { return headers_; }

 private:
  const CurlApi& api_;
  CURL* handle_;
  curl_slist* headers_ = nullptr;
};

/// Sets options on one handle and keeps the first one curl refused, by name; once one is refused,
/// the later ones are skipped.
class OptionSetter {
 public:
  OptionSetter(const CurlApi& api, CURL* handle) : api_(api), handle_(handle) {}

  template <class Value>
  void set(const char* name, CURLoption opt, Value value) {
    if (!refused_.empty()) {
      return;
    }
    const CURLcode rc = api_.easySetopt(handle_, opt, value);
    if (rc != CURLE_OK) {
      refused_ = name;
      refusedCode_ = rc;
    }
  }
  void setBlob(const char* name, CURLoption opt, const std::string& pem) {
    curl_blob blob{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
    set(name, opt, &blob);
  }

  [[nodiscard]] bool anyRefused() const { return !refused_.empty(); }
  [[nodiscard]] const std::string& refused() const { return refused_; }
  [[nodiscard]] CURLcode refusedCode() const { return refusedCode_; }

 private:
  const CurlApi& api_;
  CURL* handle_;
  std::string refused_;
  CURLcode refusedCode_ = CURLE_OK;
};

/// A request this client will not send, and why.
struct Refusal {
  ErrorKind kind;
  std::string message;
};

/// @return why the request cannot be sent as given (its scheme, its TLS material), or empty.
std::string requestProblem(const Request& request) {
  if (!startsWithIgnoreCase(request.url, "http://") && !startsWithIgnoreCase(request.url, "https://")) {
    return "only http:// and https:// URLs are supported";
  }
  const TlsOptions& tls = request.tls;
  if (!tls.caFile.empty() && !tls.caData.empty()) {
    return "both a CA file and CA data are given";
  }
  if ((!tls.certFile.empty() || !tls.keyFile.empty()) && (!tls.certData.empty() || !tls.keyData.empty())) {
    return "a client certificate or key is given both as a file and as data";
  }
  if ((tls.certFile.empty() && tls.certData.empty()) != (tls.keyFile.empty() && tls.keyData.empty())) {
    return "a client certificate needs its key, and a key its certificate";
  }
  return {};
}

/// Where to, how long, and through which proxy; errors go to `errorBuffer`.
void setConnection(OptionSetter& options, const Request& request, char* errorBuffer) {
  options.set("CURLOPT_ERRORBUFFER", CURLOPT_ERRORBUFFER, errorBuffer);
  options.set("CURLOPT_URL", CURLOPT_URL, request.url.c_str());
  options.set("CURLOPT_NOSIGNAL", CURLOPT_NOSIGNAL, 1L);
  options.set("CURLOPT_TIMEOUT_MS", CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  options.set("CURLOPT_CONNECTTIMEOUT_MS", CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.timeout.count()));
  options.set("CURLOPT_FOLLOWLOCATION", CURLOPT_FOLLOWLOCATION, 0L);
  options.set("CURLOPT_PROXY", CURLOPT_PROXY, request.proxy.c_str());
  // HTTP/1.1 on both schemes: one exchange per handle gains nothing from HTTP/2, and the servers
  // (etcd's gateway, the Kubernetes API) speak 1.1.
  options.set("CURLOPT_HTTP_VERSION", CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
}

/// Only http and https, by name from 7.85, by bit mask before it.
void allowHttpOnly(const CurlApi& api, CURL* h, OptionSetter& options) {
  if (api.easySetopt(h, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK) {
    options.set("CURLOPT_PROTOCOLS", CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  }
}

/// The method, and the body. @return whether a body is sent.
bool setMethodAndBody(OptionSetter& options, const Request& request) {
  const bool withBody = !request.body.empty() || request.method == Method::kPost ||
                        request.method == Method::kPut || request.method == Method::kPatch;
  if (withBody) {
    options.set("CURLOPT_POSTFIELDSIZE_LARGE", CURLOPT_POSTFIELDSIZE_LARGE,
                static_cast<curl_off_t>(request.body.size()));
    options.set("CURLOPT_POSTFIELDS", CURLOPT_POSTFIELDS, request.body.data());
    if (request.method != Method::kPost) {
      options.set("CURLOPT_CUSTOMREQUEST", CURLOPT_CUSTOMREQUEST, methodName(request.method).data());
    }
  } else if (request.method == Method::kGet) {
    options.set("CURLOPT_HTTPGET", CURLOPT_HTTPGET, 1L);
  } else {
    options.set("CURLOPT_CUSTOMREQUEST", CURLOPT_CUSTOMREQUEST, methodName(request.method).data());
  }
  return withBody;
}

/// Headers: the caller's; no Content-Type or Expect of curl's own.
std::expected<void, Refusal> addHeaders(Easy& easy, const Request& request, bool withBody) {
  bool hasContentType = false;
  for (const auto& hdr : request.headers) {
    if (hdr.name.find_first_of(":\r\n") != std::string::npos || hdr.value.find_first_of("\r\n") != std::string::npos) {
      return std::unexpected(
          Refusal{ErrorKind::kInvalidRequest, "header '" + hdr.name + "' has a forbidden character"});
    }
    hasContentType = hasContentType || equalsIgnoreCase(hdr.name, "Content-Type");
    // "Name;" is curl's way of sending a header with an empty value.
    if (!easy.addHeader(hdr.value.empty() ? hdr.name + ";" : hdr.name + ": " + hdr.value)) {
      return std::unexpected(Refusal{ErrorKind::kOther, "curl_slist_append: out of memory"});
    }
  }
  if ((withBody && !hasContentType && !easy.addHeader("Content-Type:")) || !easy.addHeader("Expect:")) {
    return std::unexpected(Refusal{ErrorKind::kOther, "curl_slist_append: out of memory"});
  }
  return {};
}

/// Verification, the trusted CA, and the client certificate, each from a file or from data.
void setTls(OptionSetter& options, const TlsOptions& tls) {
  if (tls.insecure) {
    options.set("CURLOPT_SSL_VERIFYPEER", CURLOPT_SSL_VERIFYPEER, 0L);
    options.set("CURLOPT_SSL_VERIFYHOST", CURLOPT_SSL_VERIFYHOST, 0L);
  } else {
    options.set("CURLOPT_SSL_VERIFYPEER", CURLOPT_SSL_VERIFYPEER, 1L);
    options.set("CURLOPT_SSL_VERIFYHOST", CURLOPT_SSL_VERIFYHOST, 2L);
  }
  if (!tls.caFile.empty() || !tls.caData.empty()) {
    options.set("CURLOPT_CAPATH", CURLOPT_CAPATH, static_cast<const char*>(nullptr));
  }
  if (!tls.caFile.empty()) {
    options.set("CURLOPT_CAINFO", CURLOPT_CAINFO, tls.caFile.c_str());
  }
  if (!tls.caData.empty()) {
    options.set("CURLOPT_CAINFO", CURLOPT_CAINFO, static_cast<const char*>(nullptr));
    options.setBlob("CURLOPT_CAINFO_BLOB", CURLOPT_CAINFO_BLOB, tls.caData);
  }
  if (!tls.certFile.empty()) {
    options.set("CURLOPT_SSLCERTTYPE", CURLOPT_SSLCERTTYPE, "PEM");
    options.set("CURLOPT_SSLCERT", CURLOPT_SSLCERT, tls.certFile.c_str());
    options.set("CURLOPT_SSLKEYTYPE", CURLOPT_SSLKEYTYPE, "PEM");
    options.set("CURLOPT_SSLKEY", CURLOPT_SSLKEY, tls.keyFile.c_str());
  }
  if (!tls.certData.empty()) {
    options.set("CURLOPT_SSLCERTTYPE", CURLOPT_SSLCERTTYPE, "PEM");
    options.setBlob("CURLOPT_SSLCERT_BLOB", CURLOPT_SSLCERT_BLOB, tls.certData);
    options.set("CURLOPT_SSLKEYTYPE", CURLOPT_SSLKEYTYPE, "PEM");
    options.setBlob("CURLOPT_SSLKEY_BLOB", CURLOPT_SSLKEY_BLOB, tls.keyData);
  }
}

/// Where the answer goes.
void setSink(OptionSetter& options, Sink& sink) {
  options.set("CURLOPT_WRITEFUNCTION", CURLOPT_WRITEFUNCTION, &writeBody);
  options.set("CURLOPT_WRITEDATA", CURLOPT_WRITEDATA, static_cast<void*>(&sink));
  options.set("CURLOPT_HEADERFUNCTION", CURLOPT_HEADERFUNCTION, &writeHeader);
  options.set("CURLOPT_HEADERDATA", CURLOPT_HEADERDATA, static_cast<void*>(&sink));
}

}  // namespace

CurlHttpClient::CurlHttpClient(std::string library)
    : libraries_{std::move(library)}, api_(std::make_unique<CurlApi>()) {}

CurlHttpClient::CurlHttpClient(std::vector<std::string> libraries, bool keepConnections)
    : libraries_(std::move(libraries)), keepConnections_(keepConnections), api_(std::make_unique<CurlApi>()) {}

CurlHttpClient::~CurlHttpClient() {
  if (api_->share != nullptr) {
    api_->shareCleanup(api_->share);  // after every handle: each send() cleans its own up
  }
}

HttpResult<Response> CurlHttpClient::send(const Request& request) {
  const std::string endpoint = std::string(methodName(request.method)) + " " + request.url;
  auto fail = [&](ErrorKind kind, std::string message, int code = 0, int osErrno = 0) {
    return std::unexpected(HttpError{kind, endpoint, std::move(message), code, osErrno});
  };

  std::call_once(api_->once, [this] {
    // The first that is there; a library that is there but unusable is an error of its own.
    for (const auto& library : libraries_) {
      api_->loadError = loadCurl(library, *api_, keepConnections_);
      if (api_->loadError.empty() || !api_->loadError.starts_with("cannot load ") || &library == &libraries_.back()) {
        break;
      }
    }
  });
  if (!api_->loadError.empty()) {
    return fail(ErrorKind::kUnavailable, api_->loadError);
  }
  const CurlApi& api = *api_;
  if (std::string problem = requestProblem(request); !problem.empty()) {
    return fail(ErrorKind::kInvalidRequest, std::move(problem));
  }

  Easy easy(api);
  if (easy.get() == nullptr) {
    return fail(ErrorKind::kOther, "curl_easy_init failed");
  }
  CURL* h = easy.get();
  Sink sink;
  sink.maxBody = request.maxResponseBytes;
  char errorBuffer[CURL_ERROR_SIZE] = {};

  OptionSetter options(api, h);
  setConnection(options, request, static_cast<char*>(errorBuffer));
  if (api.share != nullptr) {
    options.set("CURLOPT_SHARE", CURLOPT_SHARE, api.share);
    // The shared cache is trimmed to a handle's CURLOPT_MAXCONNECTS (5 unless set) whenever a
    // handle gives its connection back: with more requests at once than that (the agent's relay
    // serves a thread per plugin run), connections would close and reopen, each with a TLS
    // handshake on both sides. The cache holds as many as the callers' threads use at once.
    options.set("CURLOPT_MAXCONNECTS", CURLOPT_MAXCONNECTS, kSharedConnections);
  }
  if (options.anyRefused()) {
    return fail(kindOf(options.refusedCode()),
                "curl refused " + options.refused() + ": " + api.easyStrerror(options.refusedCode()),
                options.refusedCode());
  }
  allowHttpOnly(api, h, options);
  const bool withBody = setMethodAndBody(options, request);
  if (auto added = addHeaders(easy, request, withBody); !added) {
    return fail(added.error().kind, std::move(added.error().message));
  }
  options.set("CURLOPT_HTTPHEADER", CURLOPT_HTTPHEADER, easy.headers());
  setTls(options, request.tls);
  setSink(options, sink);
  if (options.anyRefused()) {
    return fail(ErrorKind::kInvalidRequest,
                "this libcurl refused " + options.refused() + ": " + api.easyStrerror(options.refusedCode()),
                options.refusedCode());
  }

  const CURLcode rc = api.easyPerform(h);
  if (rc != CURLE_OK) {
    long osErrno = 0;
    (void)api.easyGetinfo(h, CURLINFO_OS_ERRNO, &osErrno);
    if (sink.tooLong) {
      return fail(ErrorKind::kTransfer,
                  "response body longer than " + std::to_string(request.maxResponseBytes) + " bytes", rc);
    }
    std::string message = errorBuffer[0] != '\0' ? std::string(errorBuffer) : std::string(api.easyStrerror(rc));
    return fail(kindOf(rc), std::move(message), rc, static_cast<int>(osErrno));
  }
  long status = 0;
  (void)api.easyGetinfo(h, CURLINFO_RESPONSE_CODE, &status);
  sink.response.status = status;
  return std::move(sink.response);
}

}  // namespace ibcni::http
