// SPDX-License-Identifier: Apache-2.0
// Longer than 600 lines on purpose: the YAML subset the deploy manifests use, parsed in one place (no
// YAML library is a dependency); its cases are in yaml_lite_test.cpp.
#include "yaml_lite.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <utility>

namespace ibcni::testing::yamlite {

using nlohmann::json;

namespace {

struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(int line, const std::string& what) {
  throw ParseError("line " + std::to_string(line) + ": " + what);
}

std::vector<std::string> splitLines(std::string_view text) {
  std::vector<std::string> lines;
  if (text.starts_with("\xEF\xBB\xBF")) {
    text.remove_prefix(3);
  }
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      if (start < text.size()) {
        lines.emplace_back(text.substr(start));
      }
      break;
    }
    lines.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  for (auto& l : lines) {
    if (!l.empty() && l.back() == '\r') {
      l.pop_back();
    }
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// True for a line holding only spaces/tabs and perhaps a comment.
bool isBlankOrComment(std::string_view line) {
  std::string_view t = trim(line);
  return t.empty() || t.front() == '#';
}

bool isAllSpace(std::string_view line) { return trim(line).empty(); }

// "---", "--- # comment": a document separator. "--- x" is content after the marker.
bool isSeparator(std::string_view line) {
  return line == "---" || line.starts_with("--- ") || line.starts_with("---\t");
}

bool isEndMarker(std::string_view line) { return trim(line) == "..." && line.starts_with("..."); }

// Where a quoted scalar may start: at the beginning, or after an indicator that introduces a node.
bool quoteMayStartAt(std::string_view s, std::size_t i) {
  std::size_t j = i;
  while (j > 0 && s[j - 1] == ' ') {
    --j;
  }
  if (j == 0) {
    return true;
  }
  char prev = s[j - 1];
  return (prev == ':' || prev == '-' || prev == '[' || prev == '{' || prev == ',' || prev == '?') && j < i;
}

// `s` without its trailing comment and trailing whitespace. A '#' starts a comment at the start
// or after whitespace, outside quoted scalars.
std::string_view stripComment(std::string_view s) {
  char quote = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char ch = s[i];
    if (quote == '\'') {
      if (ch == '\'') {
        if (i + 1 < s.size() && s[i + 1] == '\'') {
          ++i;
        } else {
          quote = 0;
        }
      }
      continue;
    }
    if (quote == '"') {
      if (ch == '\\') {
        ++i;
      } else if (ch == '"') {
        quote = 0;
      }
      continue;
    }
    if ((ch == '\'' || ch == '"') &&
        (i == 0 || quoteMayStartAt(s, i) || s[i - 1] == '[' || s[i - 1] == '{' || s[i - 1] == ',')) {
      quote = ch;
      continue;
    }
    if (ch == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
      return trim(s.substr(0, i));
    }
  }
  return trim(s);
}

void appendUtf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool allDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// A plain scalar's value under YAML's core schema, refusing what YAML 1.1 reads otherwise.
json resolvePlain(std::string_view s, int line) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") {
    return nullptr;
  }
  if (s == "true" || s == "True" || s == "TRUE") {
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    return false;
  }
  const std::string l = lower(s);
  if (l == "yes" || l == "no" || l == "on" || l == "off" || l == "y" || l == "n") {
    fail(line, "plain scalar '" + std::string(s) +
                   "' is a boolean in YAML 1.1 (Kubernetes) and a string in YAML 1.2: quote it or write true/false");
  }
  if (l == ".inf" || l == "-.inf" || l == "+.inf" || l == ".nan") {
    fail(line, "plain scalar '" + std::string(s) + "' is a special float: quote it");
  }
  std::string_view digits = s;
  if (digits.front() == '-' || digits.front() == '+') {
    digits.remove_prefix(1);
  }
  if (digits.starts_with("0x") || digits.starts_with("0o") || digits.starts_with("0b")) {
    fail(line, "plain scalar '" + std::string(s) + "' is an integer in some YAML versions only: quote it");
  }
  if (!digits.empty() && digits.front() >= '0' && digits.front() <= '9' && digits.find('_') != std::string_view::npos &&
      std::all_of(digits.begin(), digits.end(), [](char c) { return (c >= '0' && c <= '9') || c == '_'; })) {
    fail(line, "plain scalar '" + std::string(s) + "' is an integer in YAML 1.1 only: quote it or drop the '_'");
  }
  if (allDigits(digits)) {
    if (digits.size() > 1 && digits.front() == '0') {
      fail(line, "plain scalar '" + std::string(s) + "' is octal in YAML 1.1 (Kubernetes): quote it");
    }
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data() + (s.front() == '+' ? 1 : 0), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) {
      fail(line, "integer '" + std::string(s) + "' does not fit in 64 bits: quote it");
    }
    return v;
  }
  // Floats: digits with one '.', optionally an exponent.
  {
    std::size_t i = 0;
    std::size_t intDigits = 0;
    std::size_t fracDigits = 0;
    bool dot = false;
    while (i < digits.size() && std::isdigit(static_cast<unsigned char>(digits[i]))) {
      ++i;
      ++intDigits;
    }
    if (i < digits.size() && digits[i] == '.') {
      dot = true;
      ++i;
      while (i < digits.size() && std::isdigit(static_cast<unsigned char>(digits[i]))) {
        ++i;
        ++fracDigits;
      }
    }
    bool exponent = false;
    if (i < digits.size() && (digits[i] == 'e' || digits[i] == 'E') && intDigits + fracDigits > 0) {
      std::size_t j = i + 1;
      if (j < digits.size() && (digits[j] == '-' || digits[j] == '+')) {
        ++j;
      }
      std::size_t expStart = j;
      while (j < digits.size() && std::isdigit(static_cast<unsigned char>(digits[j]))) {
        ++j;
      }
      if (j > expStart && j == digits.size()) {
        exponent = true;
        i = j;
      }
    }
    if (i == digits.size() && intDigits + fracDigits > 0 && (dot || exponent)) {
      if (!dot) {
        fail(line, "plain scalar '" + std::string(s) + "' is a float in YAML 1.2 and a string in YAML 1.1: quote it");
      }
      return std::stod(std::string(s));
    }
  }
  return std::string(s);
}

// Reads a quoted scalar starting at s[i] (the quote); leaves i after the closing quote.
std::string readQuoted(std::string_view s, std::size_t& i, int line) {
  const char q = s[i++];
  std::string out;
  while (true) {
    if (i >= s.size()) {
      fail(line, std::string("unterminated ") + (q == '"' ? "double" : "single") +
                     "-quoted scalar (quoted scalars spanning lines are not supported)");
    }
    char ch = s[i++];
    if (q == '\'') {
      if (ch == '\'') {
        if (i < s.size() && s[i] == '\'') {
          out += '\'';
          ++i;
          continue;
        }
        return out;
      }
      out += ch;
      continue;
    }
    if (ch == '"') {
      return out;
    }
    if (ch != '\\') {
      out += ch;
      continue;
    }
    if (i >= s.size()) {
      fail(line, "a backslash ends the line inside a double-quoted scalar (line continuation is not supported)");
    }
    char e = s[i++];
    auto hex = [&](int n) {
      if (i + static_cast<std::size_t>(n) > s.size()) {
        fail(line, "short escape sequence in a double-quoted scalar");
      }
      std::uint32_t v = 0;
      auto [p, ec] = std::from_chars(s.data() + i, s.data() + i + n, v, 16);
      if (ec != std::errc() || p != s.data() + i + n) {
        fail(line, "bad hex escape in a double-quoted scalar");
      }
      i += static_cast<std::size_t>(n);
      appendUtf8(out, v);
    };
    switch (e) {
      case '0':
        out += '\0';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 't':
      case '\t':
        out += '\t';
        break;
      case 'n':
        out += '\n';
        break;
      case 'v':
        out += '\v';
        break;
      case 'f':
        out += '\f';
        break;
      case 'r':
        out += '\r';
        break;
      case 'e':
        out += '\x1b';
        break;
      case ' ':
      case '"':
      case '/':
      case '\\':
        out += e;
        break;
      case 'x':
        hex(2);
        break;
      case 'u':
        hex(4);
        break;
      case 'U':
        hex(8);
        break;
      default:
        fail(line, std::string("unknown escape \\") + e + " in a double-quoted scalar");
    }
  }
}

void rejectIndicator(std::string_view s, int line) {
  if (s.empty()) {
    return;
  }
  switch (s.front()) {
    case '&':
      fail(line, "anchors (&) are not supported");
    case '*':
      fail(line, "aliases (*) are not supported");
    case '!':
      fail(line, "tags (!) are not supported");
    case '%':
    case '@':
    case '`':
      fail(line, std::string("a plain scalar cannot start with '") + s.front() + "'");
    case '?':
      if (s.size() == 1 || s[1] == ' ') {
        fail(line, "complex mapping keys (?) are not supported");
      }
      break;
    default:
      break;
  }
}

// One-line flow collections and scalars inside them.
class FlowReader {
 public:
  FlowReader(std::string_view s, int line) : s_(s), line_(line) {}

  json readAll() {
    json v = node();
    skipWs();
    if (i_ != s_.size()) {
      fail(line_, "unexpected '" + std::string(s_.substr(i_)) + "' after a flow collection");
    }
    return v;
  }

 private:
  void skipWs() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) {
      ++i_;
    }
  }

  bool atEnd() const { return i_ >= s_.size(); }

  void expectMore() {
    if (atEnd()) {
      fail(line_, "flow collection not closed on its line (flow collections spanning lines are not supported)");
    }
  }

  // A plain scalar in flow context: up to , [ ] { } or ": " (or ':' before , ] } or the end).
  std::string plainText() {
    std::size_t start = i_;
    while (i_ < s_.size()) {
      char ch = s_[i_];
      if (ch == ',' || ch == '[' || ch == ']' || ch == '{' || ch == '}') {
        break;
      }
      if (ch == ':' &&
          (i_ + 1 == s_.size() || s_[i_ + 1] == ' ' || s_[i_ + 1] == ',' || s_[i_ + 1] == ']' || s_[i_ + 1] == '}')) {
        break;
      }
      if (ch == '#' && i_ > start && s_[i_ - 1] == ' ') {
        fail(line_, "a comment inside a flow collection");
      }
      ++i_;
    }
    std::string_view t = trim(s_.substr(start, i_ - start));
    if (t.empty()) {
      fail(line_, "empty entry in a flow collection");
    }
    rejectIndicator(t, line_);
    return std::string(t);
  }

  json node() {
    skipWs();
    expectMore();
    char ch = s_[i_];
    if (ch == '{') {
      return mapping();
    }
    if (ch == '[') {
      return sequence();
    }
    if (ch == '"' || ch == '\'') {
      return readQuoted(s_, i_, line_);
    }
    return resolvePlain(plainText(), line_);
  }

  std::string key() {
    skipWs();
    expectMore();
    if (s_[i_] == '"' || s_[i_] == '\'') {
      return readQuoted(s_, i_, line_);
    }
    if (s_[i_] == '{' || s_[i_] == '[') {
      fail(line_, "a collection as a mapping key");
    }
    return plainText();
  }

  json sequence() {
    ++i_;
    json arr = json::array();
    while (true) {
      skipWs();
      expectMore();
      if (s_[i_] == ']') {
        ++i_;
        return arr;
      }
      arr.push_back(node());
      skipWs();
      expectMore();
      if (s_[i_] == ':') {
        fail(line_, "single-pair mappings inside a flow sequence are not supported");
      }
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (s_[i_] != ']') {
        fail(line_, "expected ',' or ']' in a flow sequence");
      }
    }
  }

  json mapping() {
    ++i_;
    json obj = json::object();
    while (true) {
      skipWs();
      expectMore();
      if (s_[i_] == '}') {
        ++i_;
        return obj;
      }
      std::string k = key();
      skipWs();
      expectMore();
      if (s_[i_] != ':') {
        fail(line_, "flow mapping entry '" + k + "' has no ':' (entries without a value are not supported)");
      }
      ++i_;
      skipWs();
      expectMore();
      json v = (s_[i_] == ',' || s_[i_] == '}') ? json(nullptr) : node();
      if (obj.contains(k)) {
        fail(line_, "duplicate key '" + k + "'");
      }
      obj[k] = std::move(v);
      skipWs();
      expectMore();
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (s_[i_] != '}') {
        fail(line_, "expected ',' or '}' in a flow mapping");
      }
    }
  }

  std::string_view s_;
  int line_;
  std::size_t i_ = 0;
};

class Parser {
 public:
  explicit Parser(const Document& doc) : lines_(splitLines(doc.text)), first_(doc.firstLine) {}

  json run() {
    skipBlank();
    if (eof()) {
      return nullptr;
    }
    int ind = indent(pos_);
    if (ind != 0) {
      fail(lineNo(pos_), "the document's top level is indented");
    }
    json v = node(0);
    skipBlank();
    if (!eof()) {
      fail(lineNo(pos_), "unexpected content after the document's top-level node (wrong indentation?)");
    }
    return v;
  }

 private:
  bool eof() const { return pos_ >= lines_.size(); }
  int lineNo(std::size_t i) const { return first_ + static_cast<int>(i); }

  void skipBlank() {
    while (!eof() && isBlankOrComment(lines_[pos_])) {
      ++pos_;
    }
  }

  // Number of leading spaces; a tab among them is an error.
  int indent(std::size_t i) const {
    const std::string& l = lines_[i];
    std::size_t n = 0;
    while (n < l.size() && (l[n] == ' ' || l[n] == '\t')) {
      if (l[n] == '\t') {
        fail(lineNo(i), "tab in indentation");
      }
      ++n;
    }
    return static_cast<int>(n);
  }

  static bool isSeqItem(std::string_view content) {
    return content == "-" || content.starts_with("- ") || content.starts_with("-\t");
  }

  // "key: rest" or "key:": the key and the offset of what follows the ':'.
  std::optional<std::pair<std::string, std::size_t>> splitKey(std::string_view c, int line) const {
    if (c.empty()) {
      return std::nullopt;
    }
    if (c.front() == '"' || c.front() == '\'') {
      std::size_t i = 0;
      std::string k = readQuoted(c, i, line);
      std::size_t j = i;
      while (j < c.size() && c[j] == ' ') {
        ++j;
      }
      if (j < c.size() && c[j] == ':' && (j + 1 == c.size() || c[j + 1] == ' ')) {
        return std::make_pair(k, j + 1);
      }
      return std::nullopt;
    }
    if (c.front() == '{' || c.front() == '[' || c.front() == '|' || c.front() == '>') {
      return std::nullopt;
    }
    for (std::size_t j = 0; j < c.size(); ++j) {
      if (c[j] == ':' && (j + 1 == c.size() || c[j + 1] == ' ')) {
        std::string_view k = trim(c.substr(0, j));
        if (k.empty()) {
          fail(line, "empty mapping key");
        }
        rejectIndicator(k, line);
        return std::make_pair(std::string(k), j + 1);
      }
    }
    return std::nullopt;
  }

  // A scalar or flow collection written on the rest of a line (comment stripped).
  static json inlineValue(std::string_view t, int line) {
    if (t.front() == '"' || t.front() == '\'') {
      std::size_t i = 0;
      std::string v = readQuoted(t, i, line);
      if (!trim(t.substr(i)).empty()) {
        fail(line, "unexpected '" + std::string(trim(t.substr(i))) + "' after a quoted scalar");
      }
      return v;
    }
    if (t.front() == '{' || t.front() == '[') {
      return FlowReader(t, line).readAll();
    }
    rejectIndicator(t, line);
    if (t.starts_with("- ") || t == "-") {
      fail(line, "a sequence item cannot start on the line of a mapping key");
    }
    if (t.find(": ") != std::string_view::npos || t.back() == ':') {
      fail(line, "plain scalar '" + std::string(t) + "' holds ': ', which starts a mapping here: quote it");
    }
    return resolvePlain(t, line);
  }

  // The node starting at the current (non-blank) line, indented at least `minIndent`.
  json node(int minIndent) {
    int ind = indent(pos_);
    if (ind < minIndent) {
      fail(lineNo(pos_), "expected a node indented by at least " + std::to_string(minIndent) + " spaces");
    }
    std::string_view content = std::string_view(lines_[pos_]).substr(static_cast<std::size_t>(ind));
    if (isSeqItem(content)) {
      return sequence(ind);
    }
    std::string_view stripped = stripComment(content);
    if (splitKey(stripped, lineNo(pos_))) {
      return mapping(ind);
    }
    if (stripped.front() == '|' || stripped.front() == '>') {
      fail(lineNo(pos_), "a block scalar header must follow a mapping key or a sequence dash");
    }
    int line = lineNo(pos_);
    json v = inlineValue(stripped, line);
    ++pos_;
    skipBlank();
    if (!eof() && indent(pos_) >= ind) {
      fail(lineNo(pos_), "continuation of the scalar on line " + std::to_string(line) +
                             " (plain scalars spanning lines are not supported; use a block scalar)");
    }
    return v;
  }

  // Skips blank lines, then returns the number of the next line of the block whose lines are
  // indented by `ind` (`what` names them in the error for a deeper line), or nullopt where the
  // block ends.
  std::optional<int> nextInBlock(int ind, const char* what) {
    skipBlank();
    if (eof() || indent(pos_) < ind) {
      return std::nullopt;
    }
    const int line = lineNo(pos_);
    if (indent(pos_) > ind) {
      fail(line, "unexpected indentation: " + std::to_string(indent(pos_)) + " spaces where the " + what +
                     " have " + std::to_string(ind));
    }
    return line;
  }

  json mapping(int ind) {
    json obj = json::object();
    while (auto row = nextInBlock(ind, "mapping's keys")) {
      const int line = *row;
      std::string_view content = std::string_view(lines_[pos_]).substr(static_cast<std::size_t>(ind));
      if (isSeqItem(content)) {
        fail(line, "a sequence item where a mapping key was expected");
      }
      std::string_view stripped = stripComment(content);
      auto kv = splitKey(stripped, line);
      if (!kv) {
        fail(line, "expected 'key: value', got '" + std::string(stripped) + "'");
      }
      const std::string& key = kv->first;
      if (obj.contains(key)) {
        fail(line, "duplicate key '" + key + "'");
      }
      std::string_view rest = trim(stripped.substr(kv->second));
      ++pos_;
      json value;
      if (rest.empty()) {
        skipBlank();
        if (!eof()) {
          int next = indent(pos_);
          std::string_view nc = std::string_view(lines_[pos_]).substr(static_cast<std::size_t>(next));
          if (next > ind) {
            value = node(ind + 1);
          } else if (next == ind && isSeqItem(nc)) {
            value = sequence(ind);
          }
        }
      } else if (rest.front() == '|' || rest.front() == '>') {
        value = blockScalar(rest, ind, line);
      } else {
        value = inlineValue(rest, line);
        skipBlank();
        if (!eof() && indent(pos_) > ind) {
          fail(lineNo(pos_), "unexpected indentation after the value of '" + key +
                                 "' (plain scalars spanning lines are not supported; use a block scalar)");
        }
      }
      obj[key] = std::move(value);
    }
    return obj;
  }

  json sequence(int ind) {
    json arr = json::array();
    while (auto row = nextInBlock(ind, "sequence's items")) {
      const int line = *row;
      std::string& l = lines_[pos_];
      std::string_view content = std::string_view(l).substr(static_cast<std::size_t>(ind));
      if (!isSeqItem(content)) {
        break;  // the mapping that holds this sequence at its own indentation goes on
      }
      std::size_t c = static_cast<std::size_t>(ind) + 1;
      while (c < l.size() && l[c] == ' ') {
        ++c;
      }
      if (c < l.size() && l[c] == '\t') {
        fail(line, "tab after a sequence dash");
      }
      std::string_view rest = stripComment(std::string_view(l).substr(c));
      if (rest.empty()) {
        ++pos_;
        skipBlank();
        if (!eof() && indent(pos_) > ind) {
          arr.push_back(node(ind + 1));
        } else {
          arr.push_back(nullptr);
        }
        continue;
      }
      if (rest.front() == '|' || rest.front() == '>') {
        ++pos_;
        arr.push_back(blockScalar(rest, ind, line));
        continue;
      }
      // The item's node starts at column c: blank out the dash and read it as a node there.
      l[static_cast<std::size_t>(ind)] = ' ';
      arr.push_back(node(static_cast<int>(c)));
    }
    return arr;
  }

  // A block scalar whose header (e.g. "|", "|-", ">+", "|2") is on line `line`, in a node
  // indented by `parentIndent`; the current line is the first after the header.
  json blockScalar(std::string_view header, int parentIndent, int line) {
    const bool literal = header.front() == '|';
    char chomp = 0;
    int explicitIndent = 0;
    for (char ch : header.substr(1)) {
      if ((ch == '-' || ch == '+') && chomp == 0) {
        chomp = ch;
      } else if (ch >= '1' && ch <= '9' && explicitIndent == 0) {
        explicitIndent = ch - '0';
      } else {
        fail(line, "bad block scalar header '" + std::string(header) + "'");
      }
    }
    // The content's indentation: explicit, or that of the first non-empty line.
    int blockIndent = 0;
    if (explicitIndent != 0) {
      blockIndent = parentIndent + explicitIndent;
    } else {
      std::size_t j = pos_;
      while (j < lines_.size() && isAllSpace(lines_[j])) {
        ++j;
      }
      if (j < lines_.size()) {
        int first = 0;
        while (static_cast<std::size_t>(first) < lines_[j].size() &&
               lines_[j][static_cast<std::size_t>(first)] == ' ') {
          ++first;
        }
        blockIndent = first;
      }
      if (blockIndent <= parentIndent) {
        return std::string();  // no content: the next line belongs to the parent
      }
    }
    std::vector<std::string> content;
    while (!eof()) {
      const std::string& l = lines_[pos_];
      if (isAllSpace(l)) {
        content.emplace_back(l.size() > static_cast<std::size_t>(blockIndent)
                                 ? l.substr(static_cast<std::size_t>(blockIndent))
                                 : std::string());
        ++pos_;
        continue;
      }
      int li = 0;
      while (static_cast<std::size_t>(li) < l.size() && l[static_cast<std::size_t>(li)] == ' ') {
        ++li;
      }
      if (li >= blockIndent) {
        content.emplace_back(l.substr(static_cast<std::size_t>(blockIndent)));
        ++pos_;
        continue;
      }
      if (l[static_cast<std::size_t>(li)] == '#') {
        break;  // a comment less indented than the content ends the scalar
      }
      if (li > parentIndent) {
        fail(lineNo(pos_), "bad indentation in the block scalar started on line " + std::to_string(line) + ": " +
                               std::to_string(li) + " spaces, its first line has " + std::to_string(blockIndent));
      }
      break;
    }
    // Trailing empty lines are subject to chomping.
    std::size_t trailing = 0;
    while (trailing < content.size() && content[content.size() - 1 - trailing].empty()) {
      ++trailing;
    }
    std::vector<std::string> body(content.begin(), content.end() - static_cast<std::ptrdiff_t>(trailing));
    std::string text;
    if (literal) {
      for (std::size_t i = 0; i < body.size(); ++i) {
        text += (i ? "\n" : "") + body[i];
      }
    } else {
      auto normal = [&](std::size_t i) { return !body[i].empty() && body[i].front() != ' '; };
      for (std::size_t i = 0; i < body.size(); ++i) {
        if (i > 0) {
          if (normal(i - 1) && normal(i)) {
            text += ' ';
          } else if (!(normal(i - 1) && body[i].empty())) {
            text += '\n';
          }
        }
        text += body[i];
      }
    }
    if (body.empty()) {
      return chomp == '+' ? std::string(trailing, '\n') : std::string();
    }
    if (chomp == '-') {
      return text;
    }
    if (chomp == '+') {
      return text + "\n" + std::string(trailing, '\n');
    }
    return text + "\n";
  }

  std::vector<std::string> lines_;
  int first_;
  std::size_t pos_ = 0;
};

}  // namespace

std::expected<std::vector<Document>, std::string> splitDocuments(std::string_view text, int firstLine) {
  std::vector<std::string> lines = splitLines(text);
  std::vector<Document> docs;
  Document cur{firstLine, {}};
  bool hasContent = false;
  auto flush = [&](int nextFirst) {
    if (hasContent) {
      docs.push_back(std::move(cur));
    }
    cur = Document{nextFirst, {}};
    hasContent = false;
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    const int no = firstLine + static_cast<int>(i);
    if (l.starts_with("%")) {
      return std::unexpected("line " + std::to_string(no) + ": directives (" + l + ") are not supported");
    }
    if (isSeparator(l)) {
      if (!isBlankOrComment(l.substr(3))) {
        return std::unexpected("line " + std::to_string(no) + ": content after '---' is not supported");
      }
      flush(no + 1);
      continue;
    }
    if (isEndMarker(l)) {
      flush(no + 1);
      continue;
    }
    if (!isBlankOrComment(l)) {
      hasContent = true;
    }
    cur.text += l;
    cur.text += '\n';
  }
  flush(0);
  return docs;
}

std::expected<json, std::string> parse(const Document& doc) {
  try {
    return Parser(doc).run();
  } catch (const ParseError& e) {
    return std::unexpected(std::string(e.what()));
  }
}

std::expected<json, std::string> parseOne(std::string_view text) {
  auto docs = splitDocuments(text);
  if (!docs) {
    return std::unexpected(docs.error());
  }
  if (docs->size() != 1) {
    return std::unexpected("expected one document, got " + std::to_string(docs->size()));
  }
  return parse(docs->front());
}

}  // namespace ibcni::testing::yamlite
