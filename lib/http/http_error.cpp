// SPDX-License-Identifier: Apache-2.0
#include <string>
#include <string_view>

#include "ibcni/http/http_client.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::http {

std::string_view errorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUnavailable:
      return "unavailable";
    case ErrorKind::kInvalidRequest:
      return "invalid request";
    case ErrorKind::kDns:
      return "DNS";
    case ErrorKind::kConnect:
      return "connect";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kTls:
      return "TLS";
    case ErrorKind::kTransfer:
      return "transfer";
    case ErrorKind::kOther:
      return "other";
  }
  return "other";
}

std::string HttpError::describe() const {
  std::string out = endpoint + ": " + std::string(errorKindName(kind)) + ": " + message;
  if (curlCode != 0 || osErrno != 0) {
    out += " (";
    if (curlCode != 0) {
      out += "curl error " + std::to_string(curlCode);
    }
    if (osErrno != 0) {
      out += (curlCode != 0 ? ", " : "") + os::errnoName(osErrno);
    }
    out += ")";
  }
  return out;
}

}  // namespace ibcni::http
