// SPDX-License-Identifier: Apache-2.0
#include "ibcni/yaml/yaml_json.h"

#include <yaml.h>

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/yaml/plain_scalar.h"

namespace ibcni::yaml {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxNodes = 1000000;

/// One open collection: the value being built and, for a mapping, the key waiting for its value.
struct Frame {
  json value;
  std::optional<std::string> key;
  std::string anchor;
};

class Converter {
 public:
  explicit Converter(std::string_view text) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  }
  ~Converter() { yaml_parser_delete(&parser_); }
  Converter(const Converter&) = delete;
  Converter& operator=(const Converter&) = delete;

  /// The first document (`all` false) or every one, each with the line its content starts on.
  std::expected<std::vector<YamlDocument>, YamlError> run(bool all, bool strict = false) {
    all_ = all;
    strict_ = strict;
    bool inDocument = false;
    bool done = false;
    while (!done) {
      yaml_event_t event;
      if (yaml_parser_parse(&parser_, &event) == 0) {
        return std::unexpected(parserError());
      }
      auto r = handle(event, inDocument, done);
      yaml_event_delete(&event);
      if (!r) {
        return std::unexpected(std::move(r.error()));
      }
    }
    if (!all_) {
      documents_.clear();
      documents_.push_back(YamlDocument{rootLine_, result_.dump()});
    }
    return std::move(documents_);
  }

 private:
  YamlError parserError() const {
    YamlError e;
    e.message = parser_.problem != nullptr ? parser_.problem : "unreadable YAML";
    if (parser_.context != nullptr) {
      e.message = std::string(parser_.context) + ": " + e.message;
    }
    e.line = parser_.problem_mark.line + 1;
    e.column = parser_.problem_mark.column + 1;
    return e;
  }

  static YamlError errorAt(const yaml_event_t& event, std::string message) {
    return YamlError{std::move(message), event.start_mark.line + 1, event.start_mark.column + 1};
  }

  static std::string text(const yaml_char_t* s) { return s != nullptr ? reinterpret_cast<const char*>(s) : ""; }

  std::expected<void, YamlError> count(const yaml_event_t& event, std::size_t n) {
    nodes_ += n;
    if (nodes_ > kMaxNodes) {
      return std::unexpected(errorAt(event, "more than " + std::to_string(kMaxNodes) + " nodes (aliases expanded)"));
    }
    return {};
  }

  /// Notes where the document's root node starts (its first node event).
  void noteRoot(const yaml_event_t& event) {
    if (stack_.empty() && !haveRoot_) {
      rootLine_ = event.start_mark.line + 1;
    }
  }

  /// Puts a finished node into its parent (or makes it the document).
  std::expected<void, YamlError> add(const yaml_event_t& event, json value, const std::string& anchor) {
    if (!anchor.empty()) {
      anchors_[anchor] = value;
    }
    if (stack_.empty()) {
      result_ = std::move(value);
      haveRoot_ = true;
      return {};
    }
    Frame& top = stack_.back();
    if (top.value.is_array()) {
      top.value.push_back(std::move(value));
      return {};
    }
    if (!top.key) {
      if (value.is_object() || value.is_array()) {
        return std::unexpected(errorAt(event, "a mapping key that is a mapping or a sequence"));
      }
      top.key = value.is_string() ? value.get<std::string>() : value.dump();
      return {};
    }
    if (strict_ && top.value.contains(*top.key)) {
      return std::unexpected(errorAt(event, "duplicate key " + *top.key));
    }
    top.value[*top.key] = std::move(value);  // a repeated key: the last value
    top.key.reset();
    return {};
  }

  /// Opens a sequence or a mapping (`empty`), which its end event adds to its parent.
  std::expected<void, YamlError> openCollection(const yaml_event_t& event, json empty, const yaml_char_t* anchor) {
    noteRoot(event);
    if (auto c = count(event, 1); !c) {
      return c;
    }
    stack_.push_back(Frame{std::move(empty), std::nullopt, text(anchor)});
    return {};
  }

  /// A document's end: with `all`, keeps the document and starts the next one afresh.
  void endDocument(bool& done) {
    if (haveRoot_ && !all_) {
      done = true;
    } else if (all_) {
      // A document holding nothing (comments only, or an empty "---") is dropped.
      if (haveRoot_ && !result_.is_null()) {
        documents_.push_back(YamlDocument{rootLine_, result_.dump()});
      }
      result_ = nullptr;
      haveRoot_ = false;
      anchors_.clear();
    }
  }

  /// An alias: a copy of its anchor's node, whose nodes count again.
  std::expected<void, YamlError> alias(const yaml_event_t& event) {
    noteRoot(event);
    const auto it = anchors_.find(text(event.data.alias.anchor));
    if (it == anchors_.end()) {
      return std::unexpected(errorAt(event, "unknown alias *" + text(event.data.alias.anchor)));
    }
    std::size_t n = 0;
    const auto walk = [&n](const json& j, const auto& self) -> void {
      ++n;
      if (j.is_structured()) {
        for (const auto& child : j) {
          self(child, self);
        }
      }
    };
    walk(it->second, walk);
    if (auto c = count(event, n); !c) {
      return c;
    }
    return add(event, it->second, {});
  }

  /// A scalar: a plain one (or one tagged int, float, bool or null) as YAML 1.2's core schema reads
  /// it (strict: refused where YAML 1.1 reads it otherwise), any other as a string.
  std::expected<void, YamlError> scalar(const yaml_event_t& event) {
    noteRoot(event);
    if (auto c = count(event, 1); !c) {
      return c;
    }
    const std::string value(reinterpret_cast<const char*>(event.data.scalar.value), event.data.scalar.length);
    const std::string tag = text(event.data.scalar.tag);
    json v;
    if (event.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && tag.empty()) {
      if (std::string why = strict_ ? yaml11Reading(value) : std::string(); !why.empty()) {
        return std::unexpected(errorAt(event, "plain " + value + " is " + why + ": quote it"));
      }
      v = resolvePlain(value);
    } else if (tag == "tag:yaml.org,2002:int" || tag == "tag:yaml.org,2002:float" ||
               tag == "tag:yaml.org,2002:bool" || tag == "tag:yaml.org,2002:null") {
      v = resolvePlain(value);
    } else {
      v = value;
    }
    return add(event, std::move(v), text(event.data.scalar.anchor));
  }

  /// A sequence's or a mapping's end: the finished collection goes to its parent.
  std::expected<void, YamlError> closeCollection(const yaml_event_t& event) {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    return add(event, std::move(f.value), f.anchor);
  }

  std::expected<void, YamlError> handle(const yaml_event_t& event, bool& inDocument, bool& done) {
    switch (event.type) {
      case YAML_STREAM_START_EVENT:
        return {};
      case YAML_STREAM_END_EVENT:
        done = true;
        return {};
      case YAML_DOCUMENT_START_EVENT:
        if (haveRoot_ && !all_) {
          done = true;  // only the first document
        }
        inDocument = true;
        return {};
      case YAML_DOCUMENT_END_EVENT:
        inDocument = false;
        endDocument(done);
        return {};
      case YAML_ALIAS_EVENT:
        return alias(event);
      case YAML_SCALAR_EVENT:
        return scalar(event);
      case YAML_SEQUENCE_START_EVENT:
        return openCollection(event, json::array(), event.data.sequence_start.anchor);
      case YAML_MAPPING_START_EVENT:
        return openCollection(event, json::object(), event.data.mapping_start.anchor);
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        return closeCollection(event);
      case YAML_NO_EVENT:
        return {};
    }
    return {};
  }

  yaml_parser_t parser_{};
  std::vector<Frame> stack_;
  std::map<std::string, json> anchors_;
  json result_;
  bool haveRoot_ = false;
  std::size_t rootLine_ = 0;
  bool all_ = false;
  bool strict_ = false;
  std::vector<YamlDocument> documents_;
  std::size_t nodes_ = 0;
};

}  // namespace

std::string YamlError::describe() const {
  if (line == 0) {
    return message;
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message;
}

std::expected<std::string, YamlError> yamlToJson(std::string_view text) {
  Converter converter(text);
  auto docs = converter.run(false);
  if (!docs) {
    return std::unexpected(std::move(docs.error()));
  }
  return std::move(docs->front().json);
}

std::expected<std::vector<YamlDocument>, YamlError> yamlDocumentsToJson(std::string_view text, YamlReading reading) {
  Converter converter(text);
  return converter.run(true, reading == YamlReading::kAsKubernetesDoes);
}

}  // namespace ibcni::yaml
