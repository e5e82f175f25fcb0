// SPDX-License-Identifier: Apache-2.0
#include "ipam/cluster/block_ledger.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "ibcni/os/file_io.h"
#include "ibcni/os/time_text.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::ipam {

namespace {

using nlohmann::json;
using State = LedgerEntry::State;

constexpr int kFormat = 2;

json stampJson(const os::BootStamp& s) { return json{{"boot", s.boot}, {"ns", std::to_string(s.ns)}}; }

std::optional<os::BootStamp> stampOf(const json& j) {
  if (!j.is_object() || !j.contains("boot") || !j["boot"].is_string() || !j.contains("ns") || !j["ns"].is_string()) {
    return std::nullopt;
  }
  return os::BootStamp{j["boot"].get<std::string>(), std::strtoll(j["ns"].get<std::string>().c_str(), nullptr, 10)};
}

void putStamp(json& j, const char* key, const os::BootStamp& s) {
  if (!s.empty()) {
    j[key] = stampJson(s);
  }
}

std::optional<State> stateOf(const std::string& s) {
  for (auto st : {State::kIntent, State::kOwned, State::kReleasing, State::kLost}) {
    if (s == ledgerStateName(st)) {
      return st;
    }
  }
  return std::nullopt;
}

json entryJson(const LedgerEntry& e, bool block) {
  json j{{"state", ledgerStateName(e.state)}, {"name", e.name}};
  if (block) {
    j["set"] = e.set;
  } else {
    j["owner"] = e.attrs.owner;
    for (auto [key, field] : {std::pair{"pod", &e.attrs.pod}, std::pair{"lender", &e.attrs.lender}}) {
      if (!field->empty()) {
        j[key] = *field;
      }
    }
  }
  for (auto [key, field] : {std::pair{"identity", &e.identity}, std::pair{"version", &e.version},
                            std::pair{"claimedAt", &e.claimedAt}}) {
    if (!field->empty()) {
      j[key] = *field;
    }
  }
  putStamp(j, "since", e.since);
  putStamp(j, "emptySince", e.emptySince);
  return j;
}

std::optional<LedgerEntry> entryOf(const json& j, bool block) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || !j.contains("state") ||
      !j["state"].is_string()) {
    return std::nullopt;
  }
  LedgerEntry e;
  const auto state = stateOf(j["state"].get<std::string>());
  if (!state) {
    return std::nullopt;
  }
  e.state = *state;
  e.name = j["name"].get<std::string>();
  if (block) {
    if (!j.contains("set") || !j["set"].is_number_unsigned()) {
      return std::nullopt;
    }
    e.set = j["set"].get<std::size_t>();
  } else if (!j.contains("owner") || !j["owner"].is_string()) {
    return std::nullopt;
  }
  for (auto [key, field] : {std::pair{"owner", &e.attrs.owner}, std::pair{"pod", &e.attrs.pod},
                            std::pair{"lender", &e.attrs.lender}, std::pair{"identity", &e.identity},
                            std::pair{"version", &e.version}, std::pair{"claimedAt", &e.claimedAt}}) {
    if (j.contains(key)) {
      if (!j[key].is_string()) {
        return std::nullopt;
      }
      *field = j[key].get<std::string>();
    }
  }
  // Format 1 kept emptySince as RFC 3339: the time is not comparable on the boot clock; the pass
  // starts counting again.
  for (auto [key, field] : {std::pair{"since", &e.since}, std::pair{"emptySince", &e.emptySince}}) {
    if (j.contains(key)) {
      *field = stampOf(j[key]).value_or(os::BootStamp{});
    }
  }
  return e;
}

using Corrupt = std::unexpected<os::SysError>;

Corrupt corrupt(const std::string& path, const std::string& why) {
  return std::unexpected(os::SysError{
      EUCLEAN, path + " is not a block ledger (" + why + "); the node rebuilds it from the backend", {}});
}

std::optional<std::string> readHeader(const json& j, Ledger& l) {
  for (auto [key, field] : {std::pair{"pool", &l.pool}, std::pair{"node", &l.node}, std::pair{"network", &l.network},
                            std::pair{"backend", &l.backend}}) {
    if (!j.contains(key) || !j[key].is_string()) {
      return std::string("no \"") + key + "\"";
    }
    *field = j[key].get<std::string>();
  }
  if (j.contains("etcdLease")) {
    if (!j["etcdLease"].is_string()) {
      return "etcdLease is not a string";
    }
    l.etcdLease = std::strtoll(j["etcdLease"].get<std::string>().c_str(), nullptr, 10);
  }
  if (j.contains("format") && j["format"] == kFormat && j.contains("definition")) {
    const json& d = j["definition"];
    if (!d.is_object() || !d.contains("fields") || !d["fields"].is_string()) {
      return "a malformed definition";
    }
    l.definition = LedgerDefinition{d["fields"].get<std::string>(), d.value("identity", std::string()),
                                    d.value("origin", std::string())};
  }
  for (auto [key, field] : {std::pair{"confirmed", &l.confirmed}, std::pair{"pendingCheckedAt", &l.pendingCheckedAt},
                            std::pair{"demandedAt", &l.demandedAt},
                            std::pair{"askedAt", &l.askedAt}}) {
    if (j.contains(key)) {
      *field = stampOf(j[key]).value_or(os::BootStamp{});
    }
  }
  return std::nullopt;
}

}  // namespace

const char* ledgerStateName(LedgerEntry::State state) {
  switch (state) {
    case State::kIntent:
      return "intent";
    case State::kOwned:
      return "owned";
    case State::kReleasing:
      return "releasing";
    case State::kLost:
      return "lost";
  }
  return "intent";
}

os::SysResult<std::optional<Ledger>> readLedger(const std::string& dir) {
  const std::string path = dir + "/" + kLedgerFileName;
  auto text = os::readFile(path, std::size_t{16} << 20);
  if (!text) {
    if (text.error().err == ENOENT) {
      return std::optional<Ledger>();
    }
    return std::unexpected(text.error());
  }
  const json j = json::parse(*text, nullptr, false);
  if (!j.is_object()) {
    return corrupt(path, "not a JSON object");
  }
  if (j.contains("format") && (!j["format"].is_number_integer() || j["format"].get<int>() < 1 ||
                                j["format"].get<int>() > kFormat)) {
    return corrupt(path, "format " + j["format"].dump() + " is not one this ibcni-ipam reads");
  }
  Ledger l;
  if (auto why = readHeader(j, l)) {
    return corrupt(path, *why);
  }
  for (auto [key, list, block] : {std::tuple{"blocks", &l.blocks, true}, std::tuple{"addresses", &l.addresses, false}}) {
    if (!j.contains(key) || !j[key].is_array()) {
      return corrupt(path, std::string("no \"") + key + "\" list");
    }
    for (const auto& item : j[key]) {
      auto e = entryOf(item, block);
      if (!e) {
        return corrupt(path, std::string("a malformed entry in \"") + key + "\": " + item.dump().substr(0, 200));
      }
      list->push_back(std::move(*e));
    }
  }
  return std::optional<Ledger>(std::move(l));
}

os::SysResult<void> writeLedger(const std::string& dir, const Ledger& l) {
  json j{{"format", kFormat}, {"pool", l.pool},       {"node", l.node},         {"network", l.network},
         {"backend", l.backend}, {"blocks", json::array()}, {"addresses", json::array()}};
  if (l.etcdLease != 0) {
    j["etcdLease"] = std::to_string(l.etcdLease);
  }
  if (l.definition) {
    j["definition"] = {{"fields", l.definition->fields}, {"identity", l.definition->identity},
                       {"origin", l.definition->origin}};
  }
  putStamp(j, "confirmed", l.confirmed);
  putStamp(j, "pendingCheckedAt", l.pendingCheckedAt);
  putStamp(j, "demandedAt", l.demandedAt);
  putStamp(j, "askedAt", l.askedAt);
  for (const auto& e : l.blocks) {
    j["blocks"].push_back(entryJson(e, true));
  }
  for (const auto& e : l.addresses) {
    j["addresses"].push_back(entryJson(e, false));
  }
  const std::string path = dir + "/" + kLedgerFileName;
  return os::writeFileAtomic(path, j.dump(1) + "\n");
}

os::SysResult<std::string> setLedgerAside(const std::string& dir) {
  const std::string path = dir + "/" + kLedgerFileName;
  const std::string aside = path + ".corrupt-" + os::rfc3339(std::chrono::system_clock::now());
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    return std::unexpected(os::SysError{errno, "rename " + path + " to " + aside, {}});
  }
  if (auto s = os::fsyncDirectory(dir); !s) {
    return std::unexpected(s.error());
  }
  return aside;
}

}  // namespace ibcni::ipam
