// SPDX-License-Identifier: Apache-2.0
#include "lib/yaml/plain_scalar.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>

namespace ibcni::yaml {

namespace {

using nlohmann::json;

bool decimalDigit(char c) { return c >= '0' && c <= '9'; }
bool octalDigit(char c) { return c >= '0' && c <= '7'; }
bool hexDigit(char c) { return decimalDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool digitOrUnderscore(char c) { return decimalDigit(c) || c == '_'; }

/// A cursor over a scalar, consuming the parts of a shape from the left.
class Shape {
 public:
  explicit Shape(std::string_view s) : s_(s) {}
  [[nodiscard]] bool end() const { return i_ == s_.size(); }
  [[nodiscard]] std::string_view rest() const { return s_.substr(i_); }
  /// [-+]?
  void sign() { static_cast<void>(skip('-') || skip('+')); }
  bool skip(char c) {
    if (end() || s_[i_] != c) {
      return false;
    }
    ++i_;
    return true;
  }
  bool skip(std::string_view word) {
    if (!rest().starts_with(word)) {
      return false;
    }
    i_ += word.size();
    return true;
  }
  /// The longest run of characters `in` takes: [...]*; @return its length.
  template <class Pred>
  std::size_t run(Pred in) {
    const std::size_t from = i_;
    while (!end() && in(s_[i_])) {
      ++i_;
    }
    return i_ - from;
  }
  /// The first character of what run() takes next.
  [[nodiscard]] char peek() const { return end() ? '\0' : s_[i_]; }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

bool oneOf(std::string_view s, std::initializer_list<std::string_view> words) {
  for (const auto w : words) {
    if (s == w) {
      return true;
    }
  }
  return false;
}

// [-+]?[0-9]+
bool isDecimal(std::string_view s) {
  Shape m(s);
  m.sign();
  return m.run(decimalDigit) > 0 && m.end();
}

// 0o[0-7]+ and 0x[0-9a-fA-F]+
bool isPrefixed(std::string_view s, std::string_view prefix, bool (*digit)(char)) {
  Shape m(s);
  return m.skip(prefix) && m.run(digit) > 0 && m.end();
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool isFloat(std::string_view s) {
  Shape m(s);
  m.sign();
  if (m.skip('.')) {
    if (m.run(decimalDigit) == 0) {
      return false;
    }
  } else {
    if (m.run(decimalDigit) == 0) {
      return false;
    }
    if (m.skip('.')) {
      m.run(decimalDigit);
    }
  }
  if (m.skip('e') || m.skip('E')) {
    m.sign();
    if (m.run(decimalDigit) == 0) {
      return false;
    }
  }
  return m.end();
}

// [-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)
bool isInfinityOrNan(std::string_view s) {
  if (oneOf(s, {".nan", ".NaN", ".NAN"})) {
    return true;
  }
  Shape m(s);
  m.sign();
  return oneOf(m.rest(), {".inf", ".Inf", ".INF"});
}

// [-+]?0[0-7]+
bool isOctal11(std::string_view s) {
  Shape m(s);
  m.sign();
  return m.skip('0') && m.run(octalDigit) > 0 && m.end();
}

// [-+]?[0-9][0-9_]*_[0-9_]*(\.[0-9_]*)?  (an integer part with an underscore)
// [-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?  (sexagesimal)
bool isNumber11(std::string_view s) {
  Shape m(s);
  m.sign();
  if (!decimalDigit(m.peek())) {
    return false;
  }
  const std::string_view integer = m.rest().substr(0, m.run(digitOrUnderscore));
  std::size_t groups = 0;
  while (m.skip(':')) {
    const std::string_view digits = m.rest().substr(0, m.run(decimalDigit));
    if (digits.size() != 1 && (digits.size() != 2 || digits[0] > '5')) {
      return false;
    }
    ++groups;
  }
  if (groups == 0 && integer.find('_') == std::string_view::npos) {
    return false;
  }
  if (m.skip('.')) {
    m.run(digitOrUnderscore);
  }
  return m.end();
}

}  // namespace

json resolvePlain(std::string_view s) {
  if (oneOf(s, {"", "~", "null", "Null", "NULL"})) {
    return nullptr;
  }
  if (oneOf(s, {"true", "True", "TRUE"})) {
    return true;
  }
  if (oneOf(s, {"false", "False", "FALSE"})) {
    return false;
  }
  const auto integer = [&s](std::string_view digits, int base, bool negative) -> json {
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
    if (ec != std::errc() || end != digits.data() + digits.size()) {
      return s;  // out of range: keep the text
    }
    if (negative) {
      if (v > static_cast<std::uint64_t>(INT64_MAX) + 1) {
        return s;
      }
      return v == static_cast<std::uint64_t>(INT64_MAX) + 1 ? INT64_MIN : -static_cast<std::int64_t>(v);
    }
    return v;
  };
  if (isDecimal(s)) {
    const std::size_t skip = (s[0] == '-' || s[0] == '+') ? 1 : 0;
    return integer(s.substr(skip), 10, s[0] == '-');
  }
  if (isPrefixed(s, "0o", octalDigit)) {
    return integer(s.substr(2), 8, false);
  }
  if (isPrefixed(s, "0x", hexDigit)) {
    return integer(s.substr(2), 16, false);
  }
  if (isFloat(s)) {
    return std::strtod(std::string(s).c_str(), nullptr);
  }
  if (isInfinityOrNan(s)) {
    return nullptr;  // JSON has no infinity or NaN
  }
  return s;
}

std::string yaml11Reading(std::string_view s) {
  if (oneOf(s, {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"})) {
    return "a boolean in YAML 1.1, a string in YAML 1.2";
  }
  if (isOctal11(s)) {
    return "an octal number in YAML 1.1, a decimal one in YAML 1.2";
  }
  if (isNumber11(s)) {
    return "a number in YAML 1.1, a string in YAML 1.2";
  }
  return {};
}

}  // namespace ibcni::yaml
