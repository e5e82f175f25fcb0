// SPDX-License-Identifier: Apache-2.0
// etcd 3.4's v3 JSON gateway as the etcd block backend speaks it: one call's POSTs over several
// endpoints within one deadline, the transaction and range bodies, and the key-values they answer
// decoded. No knowledge of pools or claims (etcd_claim_store.h has that).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/http/http_client.h"
#include "ibcni/ipam/block_backend.h"

namespace ibcni::ipam::etcd {

using nlohmann::json;

/// Where and how to reach etcd.
struct Endpoints {
  std::vector<std::string> urls;  ///< "http(s)://host:port"
  std::chrono::milliseconds timeout{5000};
  http::TlsOptions tls;
};

/// One public call of the backend: every POST it makes shares one deadline. Endpoints are tried
/// in order from the last one that answered (`preferred`, shared by the calls of one backend);
/// the next is tried when one cannot be reached or has no leader or quorum (HTTP 503, gRPC codes
/// 14 Unavailable, 4 DeadlineExceeded, 1 Canceled). Each endpoint gets an equal share of the time
/// left.
class Call {
 public:
  Call(http::HttpClient& client, const Endpoints& endpoints, std::atomic<std::size_t>& preferred);

  /// POSTs `body` to `path`; the JSON object of a 200 answer without an "error".
  [[nodiscard]] BackendResult<json> post(std::string_view path, const json& body);
  /// The endpoint that gave the last answer.
  [[nodiscard]] const std::string& endpoint() const noexcept { return lastEndpoint_; }
  /// An answer that is not what the gateway promises, named after the last endpoint.
  [[nodiscard]] BackendError bad(const std::string& what) const;

 private:
  http::HttpClient& client_;
  const Endpoints& endpoints_;
  std::atomic<std::size_t>& preferred_;
  std::chrono::steady_clock::time_point deadline_;
  std::string lastEndpoint_;
};

/// An int64 field of the gateway's JSON: a string or a number; absent means 0 (omitted zero).
/// nullopt when it is something else.
[[nodiscard]] std::optional<std::int64_t> int64Field(const json& obj, const char* name);

/// The error etcd gives for a put or keepalive on a lease that expired.
[[nodiscard]] bool leaseNotFound(const BackendError& e);

/// One key-value of a range answer, decoded (key and value from base64).
struct Kv {
  std::string key;
  std::string value;
  std::int64_t createRevision = 0;
  std::int64_t modRevision = 0;
  std::int64_t lease = 0;
};

/// The kvs of a range answer (`response`: the answer itself, or a txn's response_range); an
/// omitted kvs is none.
[[nodiscard]] BackendResult<std::vector<Kv>> kvsOf(const json& response, const Call& call);

// Transaction pieces. Keys are given in clear; they are encoded here.
[[nodiscard]] json compareCreate(std::string_view key, std::int64_t createRevision);
[[nodiscard]] json compareMod(std::string_view key, std::int64_t modRevision);
/// A put; `lease` 0 puts the key without a lease.
[[nodiscard]] json putOp(std::string_view key, std::string_view value, std::int64_t lease = 0);
[[nodiscard]] json deleteOp(std::string_view key);
[[nodiscard]] json rangeOp(std::string_view key);
/// Every key under `prefix` (which ends in '/'); `keysOnly` leaves the values out.
[[nodiscard]] json rangePrefixOp(std::string_view prefix, bool keysOnly = false);
/// The body of a range of every key under `prefix` (for /v3/kv/range).
[[nodiscard]] json rangePrefixBody(std::string_view prefix, bool keysOnly = false);

/// The key-value of `key` (none or one), read by one range request.
[[nodiscard]] BackendResult<std::vector<Kv>> range(Call& call, std::string_view key);
/// Every key-value under `prefix` (which ends in '/'), read by one range request.
[[nodiscard]] BackendResult<std::vector<Kv>> rangePrefix(Call& call, std::string_view prefix);

/// A transaction's answer.
struct TxnAnswer {
  bool succeeded = false;
  std::int64_t revision = 0;       ///< header.revision: the revision the transaction made or read at
  std::vector<json> responses;     ///< responses[i]: {"response_range": ...} or {"response_put": ...}
};

/// POSTs a transaction: `compare` (every one must hold), then `success` or `failure`.
[[nodiscard]] BackendResult<TxnAnswer> txn(Call& call, json compare, json success, json failure);

/// The kvs of responses[i] of `answer` (a range op's); a missing range is a bad answer.
[[nodiscard]] BackendResult<std::vector<Kv>> rangeResult(const TxnAnswer& answer, std::size_t i, const Call& call);

}  // namespace ibcni::ipam::etcd
