// SPDX-License-Identifier: Apache-2.0
#include "ibcni/ipam/block_backend.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ibcni::ipam {

std::string_view backendErrcName(BackendErrc kind) {
  switch (kind) {
    case BackendErrc::kUnreachable:
      return "unreachable";
    case BackendErrc::kTimeout:
      return "timeout";
    case BackendErrc::kBadAnswer:
      return "bad answer";
    case BackendErrc::kAuth:
      return "auth";
    case BackendErrc::kUnavailable:
      return "unavailable";
    case BackendErrc::kInvalidArgument:
      return "invalid argument";
  }
  return "bad answer";
}

std::string BackendError::describe() const {
  std::string out(backendErrcName(kind));
  if (!endpoint.empty()) {
    out += ": " + endpoint;
  }
  if (!message.empty()) {
    out += ": " + message;
  }
  return out;
}

cni::Error toCniError(const BackendError& error, std::string_view action) {
  cni::Errc code = cni::Errc::kTryAgainLater;
  switch (error.kind) {
    case BackendErrc::kUnreachable:
    case BackendErrc::kTimeout:
    case BackendErrc::kBadAnswer:
      code = cni::Errc::kTryAgainLater;
      break;
    case BackendErrc::kAuth:
    case BackendErrc::kInvalidArgument:
      code = cni::Errc::kInvalidConfig;
      break;
    case BackendErrc::kUnavailable:
      code = cni::Errc::kInvalidEnvironment;
      break;
  }
  return cni::Error{code, std::string(action) + ": " + error.describe(), {}};
}

std::string_view claimKindName(ClaimKind kind) { return kind == ClaimKind::kBlock ? "block" : "address"; }

}  // namespace ibcni::ipam
