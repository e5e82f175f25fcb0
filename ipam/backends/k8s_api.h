// SPDX-License-Identifier: Apache-2.0
// The Kubernetes API as the Kubernetes block backend speaks it: one call's requests within one
// deadline and with one bearer token, coordination.k8s.io/v1 Leases read back and written, and
// the encodings (Lease names, label values, MicroTime). No knowledge of pools or claims
// (k8s_claim_store.h has that).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "ibcni/http/http_client.h"
#include "ibcni/ipam/block_backend.h"

namespace ibcni::ipam::k8s {

using nlohmann::json;
using SysClock = std::chrono::system_clock;

/// Where and how to reach the API server.
struct Server {
  std::string url;                       ///< "https://host:port" (no trailing '/')
  std::string namespace_ = "kube-system";
  http::TlsOptions tls;
  std::string token;                     ///< bearer token ("": none, or tokenFile's)
  std::string tokenFile;                 ///< read for every call when set (a projected token rotates)
  std::chrono::milliseconds timeout{5000};
};

/// An answer that passed the transport and status checks of Call::send.
struct Answer {
  long status = 0;
  json doc;
  std::string where;  ///< "METHOD URL"
  std::string body;

  /// The Status's message (or an excerpt of the body).
  [[nodiscard]] std::string message() const;
  /// A bad answer: `what` with the status and the Status's message.
  [[nodiscard]] BackendError unexpected(std::string_view what) const;
  /// 404 for a namespace that does not exist (the Status names kind "namespaces").
  [[nodiscard]] bool namespaceMissing() const;
};

/// A Lease as read back.
struct LeaseView {
  json object;
  std::string name;
  std::string uid;
  std::string resourceVersion;
  std::string creationTimestamp;
  json annotations = json::object();
  json labels = json::object();
  std::optional<std::int64_t> duration;  ///< spec.leaseDurationSeconds
  std::int64_t transitions = 0;
  std::string holderIdentity;
  std::optional<SysClock::time_point> acquireTime;
  std::optional<SysClock::time_point> renewTime;
  bool deleting = false;  ///< metadata.deletionTimestamp is set (finalizers keep it)

  /// An annotation's value, "" when absent.
  [[nodiscard]] std::string annotation(const char* key) const;
  /// Its renewTime (else acquireTime) + leaseDurationSeconds (else `fallback`) is before `now`.
  [[nodiscard]] bool lapsed(SysClock::time_point now, std::chrono::seconds fallback) const;
};

/// The newest resourceVersion that the writes of one store's calls were answered with. A read that
/// must come after them asks for a version not older than it (what a GET's resourceVersion means),
/// which the API server answers from its watch cache instead of a quorum read of etcd. The versions
/// are etcd revisions, decimal: one that is not (another server's) ends the marking, and every read
/// goes to etcd again. Calls on several threads may share it.
class WriteMark {
 public:
  void note(const std::string& resourceVersion);
  /// "" before any write (or once a version was not decimal).
  [[nodiscard]] std::string newest() const;

 private:
  mutable std::mutex mutex_;
  std::uint64_t newest_ = 0;
  bool opaque_ = false;
};

/// One public call of the backend: its requests share one deadline and one token.
class Call {
 public:
  /// `writes`: where its writes are noted (createLease, putLease), and getLeaseAfterWrites reads.
  Call(http::HttpClient& client, const Server& server, WriteMark* writes = nullptr);

  /// One request; transport failures, 401/403, 429 and 5xx, and a 2xx without a JSON object are
  /// errors, any other status is the caller's to judge.
  [[nodiscard]] BackendResult<Answer> send(http::Method method, const std::string& path, const json* body);
  /// GET of Lease `name`: the Lease, or nullopt on 404.
  [[nodiscard]] BackendResult<std::optional<LeaseView>> getLease(const std::string& name);
  /// getLease as of a version not older than the newest write noted in the WriteMark (its watch
  /// cache answers it); when none is noted, or the cache does not answer (504 "Too large resource
  /// version" when it lags), a quorum read as getLease.
  [[nodiscard]] BackendResult<std::optional<LeaseView>> getLeaseAfterWrites(const std::string& name);
  /// POST of a new Lease: the Lease created, or nullopt on 409 AlreadyExists. A namespace that does
  /// not exist is kInvalidArgument naming ipam.cluster.kubernetes.namespace.
  [[nodiscard]] BackendResult<std::optional<LeaseView>> createLease(const json& body);
  /// PUT of `body` (an update of Lease `name`): the Lease written, or nullopt on 409/404.
  [[nodiscard]] BackendResult<std::optional<LeaseView>> putLease(const std::string& name, const json& body);
  /// How a DELETE ended.
  enum class Deleted {
    kDeleted,   ///< 200 with a Status (or the object as it was, from older servers)
    kPending,   ///< finalizers keep it: 200 with the object, deletionTimestamp set (202 when the
                ///< client asked for cascading deletion)
    kGone,      ///< 404
    kConflict,  ///< 409: a precondition failed
  };
  /// DELETE of Lease `name` with preconditions {uid, resourceVersion} (each when non-empty).
  [[nodiscard]] BackendResult<Deleted> deleteLease(const std::string& name, const std::string& uid,
                                                   const std::string& resourceVersion);
  /// GET of Leases by label selector (already encoded terms "k=v,k=v").
  [[nodiscard]] BackendResult<std::vector<LeaseView>> listLeases(const std::string& selector);
  /// Whether Node `name` exists (GET /api/v1/nodes/<name>: 200 or 404).
  [[nodiscard]] BackendResult<bool> nodeExists(const std::string& name);

  [[nodiscard]] const Server& server() const noexcept { return server_; }
  [[nodiscard]] std::string leasesPath() const;

 private:
  [[nodiscard]] BackendResult<std::optional<LeaseView>> readLease(const std::string& name, const std::string& query);
  /// A Lease a write was answered with, noted in writes_.
  BackendResult<std::optional<LeaseView>> written(BackendResult<std::optional<LeaseView>> v);

  http::HttpClient& client_;
  const Server& server_;
  WriteMark* writes_;
  std::chrono::steady_clock::time_point deadline_;
  std::string token_;
  std::optional<BackendError> tokenError_;
};

/// The Lease read from a 2xx answer; a bad answer when it is not one.
[[nodiscard]] BackendResult<LeaseView> parseLease(const Answer& a);

/// The name encoding of Lease names: injective, output in [a-z0-9.-], never "--", never starting
/// or ending with '.' or '-', never ".-", "-." or "..".
[[nodiscard]] std::string encodeName(std::string_view s);
/// A label's value for `value` (itself when valid as a label value, else "h" + 16 hex digits of
/// its hash).
[[nodiscard]] std::string labelValue(std::string_view value);
/// A DNS-1123 label (a namespace's name).
[[nodiscard]] bool dnsLabel(std::string_view v);
/// Percent-encoding of a query value.
[[nodiscard]] std::string urlEncode(std::string_view s);

}  // namespace ibcni::ipam::k8s
