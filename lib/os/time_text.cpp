// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/time_text.h"

#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace ibcni::os {

std::string rfc3339(std::chrono::system_clock::time_point t) {
  // Calendar arithmetic, not gmtime_r/strftime: glibc's run tzset(), which reads /etc/localtime on
  // every run for a zone this text never names (an exec'd plugin would pay it on each ADD).
  using namespace std::chrono;
  const auto day = floor<days>(t);
  const year_month_day date{day};
  const hh_mm_ss time{floor<seconds>(t) - day};
  char buf[48];
  const int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(date.year()),
                              static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                              static_cast<int>(time.hours().count()), static_cast<int>(time.minutes().count()),
                              static_cast<int>(time.seconds().count()));
  return std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
}

std::string rfc3339Micros(std::chrono::system_clock::time_point t) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::int64_t secs = us / 1000000;
  std::int64_t frac = us % 1000000;
  if (frac < 0) {
    frac += 1000000;
    --secs;
  }
  const std::string whole = rfc3339(std::chrono::system_clock::from_time_t(static_cast<std::time_t>(secs)));
  char out[64];
  std::snprintf(out, sizeof out, "%.*s.%06lldZ", static_cast<int>(whole.size() - 1), whole.c_str(),
                static_cast<long long>(frac));
  return out;
}

namespace {

int twoDigits(const char* p) { return (p[0] - '0') * 10 + (p[1] - '0'); }

bool isDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::optional<std::chrono::system_clock::time_point> parseRfc3339(std::string_view text) {
  const std::string s(text);
  std::tm tm{};
  const char* p = ::strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (p == nullptr) {
    return std::nullopt;
  }
  std::int64_t micros = 0;
  if (*p == '.') {
    ++p;
    if (!isDigit(*p)) {
      return std::nullopt;
    }
    int digits = 0;
    for (; isDigit(*p); ++p, ++digits) {
      if (digits < 6) {
        micros = micros * 10 + (*p - '0');
      }
    }
    for (; digits < 6; ++digits) {
      micros *= 10;
    }
  }
  std::int64_t offset = 0;
  if (*p == 'Z' || *p == 'z') {
    ++p;
  } else if ((*p == '+' || *p == '-') && std::strlen(p) == 6 && isDigit(p[1]) && isDigit(p[2]) && p[3] == ':' &&
             isDigit(p[4]) && isDigit(p[5])) {
    offset = (*p == '-' ? -1 : 1) * (twoDigits(p + 1) * 3600 + twoDigits(p + 4) * 60);
    p += 6;
  } else {
    return std::nullopt;
  }
  if (*p != '\0') {
    return std::nullopt;
  }
  return std::chrono::system_clock::from_time_t(::timegm(&tm) - offset) + std::chrono::microseconds(micros);
}

}  // namespace ibcni::os
