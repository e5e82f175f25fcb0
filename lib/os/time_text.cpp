// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/time_text.h"

#include <time.h>
#include <ctime>

namespace ibcni::os {

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buf, n);
}

std::optional<std::chrono::system_clock::time_point> parseRfc3339(std::string_view text) {
  const std::string s(text);
  std::tm tm{};
  const char* p = ::strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (p == nullptr) {
    return std::nullopt;
  }
  if (*p == '.') {
    ++p;
    if (*p < '0' || *p > '9') {
      return std::nullopt;
    }
    while (*p >= '0' && *p <= '9') {
      ++p;
    }
  }
  if (*p != 'Z' || p[1] != '\0') {
    return std::nullopt;
  }
  return std::chrono::system_clock::from_time_t(::timegm(&tm));
}

}  // namespace ibcni::os
