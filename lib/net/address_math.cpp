// SPDX-License-Identifier: Apache-2.0
#include "ibcni/net/address_math.h"

#include <sys/socket.h>
#include <algorithm>

namespace ibcni::net {

U128 toInt(const IpAddress& ip) {
  U128 v = 0;
  for (std::size_t i = 0; i < ip.size(); ++i) {
    v = (v << 8) | ip.bytes[i];
  }
  return v;
}

IpAddress fromInt(U128 v, int family) {
  IpAddress ip;
  ip.family = family;
  const auto n = static_cast<std::size_t>(bitsOf(family) / 8);
  for (std::size_t i = 0; i < n; ++i) {
    ip.bytes[n - 1 - i] = static_cast<std::uint8_t>(v & 0xff);
    v >>= 8;
  }
  return ip;
}

std::string toDecimal(U128 v) {
  if (v == 0) {
    return "0";
  }
  std::string out;
  while (v != 0) {
    out.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

namespace {

U128 hostMask(const IpPrefix& p) {
  int hostBits = bitsOf(p.address) - p.prefixLen;
  if (hostBits <= 0) {
    return 0;
  }
  if (hostBits >= 128) {
    return ~U128{0};
  }
  return (U128{1} << hostBits) - 1;
}

}  // namespace

U128 firstOf(const IpPrefix& prefix) { return toInt(prefix.address) & ~hostMask(prefix); }

U128 lastOf(const IpPrefix& prefix) { return firstOf(prefix) | hostMask(prefix); }

std::vector<Interval> normalized(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  std::vector<Interval> out;
  for (const auto& i : v) {
    // Adjacent intervals merge too: [1,4] and [5,9] are [1,9]. hi + 1 cannot overflow unless hi
    // is the maximum, which then covers everything after it anyway.
    if (!out.empty() && (out.back().hi == ~U128{0} || i.lo <= out.back().hi + 1)) {
      out.back().hi = std::max(out.back().hi, i.hi);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

std::vector<Interval> subtract(Interval base, const std::vector<Interval>& holes) {
  std::vector<Interval> out;
  U128 cur = base.lo;
  bool done = false;
  for (const auto& h : holes) {
    if (h.hi < cur) {
      continue;
    }
    if (h.lo > base.hi) {
      break;
    }
    if (h.lo > cur) {
      out.push_back({cur, h.lo - 1});
    }
    if (h.hi >= base.hi) {
      done = true;
      break;
    }
    cur = h.hi + 1;
  }
  if (!done && cur <= base.hi) {
    out.push_back({cur, base.hi});
  }
  return out;
}

U128 totalSize(const std::vector<Interval>& v) {
  U128 total = 0;
  for (const auto& i : v) {
    U128 n = i.hi - i.lo + 1;  // wraps to 0 only for the whole IPv6 space
    if (n == 0 || total + n < total) {
      return ~U128{0};
    }
    total += n;
  }
  return total;
}

long findInterval(const std::vector<Interval>& v, U128 x) {
  auto it = std::lower_bound(v.begin(), v.end(), x, [](const Interval& i, U128 val) { return i.hi < val; });
  if (it == v.end() || it->lo > x) {
    return -1;
  }
  return static_cast<long>(it - v.begin());
}

}  // namespace ibcni::net
