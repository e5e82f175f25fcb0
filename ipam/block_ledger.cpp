// SPDX-License-Identifier: Apache-2.0
#include "block_ledger.h"

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <nlohmann/json.hpp>

#include "ibcni/os/file_io.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::ipam {

namespace {

using nlohmann::json;

json entryJson(const LedgerEntry& e, bool block) {
  json j{{"state", e.state == LedgerEntry::State::kOwned ? "owned" : "intent"}, {"name", e.name}};
  if (block) {
    j["set"] = e.set;
  } else {
    j["owner"] = e.owner;
  }
  if (!e.version.empty()) {
    j["version"] = e.version;
  }
  if (!e.claimedAt.empty()) {
    j["claimedAt"] = e.claimedAt;
  }
  if (!e.emptySince.empty()) {
    j["emptySince"] = e.emptySince;
  }
  return j;
}

std::optional<LedgerEntry> entryOf(const json& j, bool block) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || !j.contains("state") ||
      !j["state"].is_string()) {
    return std::nullopt;
  }
  LedgerEntry e;
  const auto state = j["state"].get<std::string>();
  if (state == "owned") {
    e.state = LedgerEntry::State::kOwned;
  } else if (state != "intent") {
    return std::nullopt;
  }
  e.name = j["name"].get<std::string>();
  if (block) {
    if (!j.contains("set") || !j["set"].is_number_unsigned()) {
      return std::nullopt;
    }
    e.set = j["set"].get<std::size_t>();
  } else {
    if (!j.contains("owner") || !j["owner"].is_string()) {
      return std::nullopt;
    }
    e.owner = j["owner"].get<std::string>();
  }
  for (auto [key, field] : {std::pair{"version", &e.version}, std::pair{"claimedAt", &e.claimedAt},
                            std::pair{"emptySince", &e.emptySince}}) {
    if (j.contains(key)) {
      if (!j[key].is_string()) {
        return std::nullopt;
      }
      *field = j[key].get<std::string>();
    }
  }
  return e;
}

}  // namespace

os::SysResult<std::optional<Ledger>> readLedger(const std::string& dir) {
  const std::string path = dir + "/" + kLedgerFileName;
  auto text = os::readFile(path, std::size_t{16} << 20);
  if (!text) {
    if (text.error().err == ENOENT) {
      return std::optional<Ledger>();
    }
    return std::unexpected(text.error());
  }
  auto corrupt = [&](const std::string& why) {
    return std::unexpected(os::SysError{EUCLEAN, path + " is not a block ledger (" + why +
                                                     "); move it away: the node finds its blocks again from the backend",
                                        {}});
  };
  const json j = json::parse(*text, nullptr, false);
  if (!j.is_object()) {
    return corrupt("not a JSON object");
  }
  Ledger l;
  for (auto [key, field] : {std::pair{"pool", &l.pool}, std::pair{"node", &l.node},
                            std::pair{"fingerprint", &l.fingerprint}, std::pair{"network", &l.network},
                            std::pair{"backend", &l.backend}}) {
    if (!j.contains(key) || !j[key].is_string()) {
      return corrupt(std::string("no \"") + key + "\"");
    }
    *field = j[key].get<std::string>();
  }
  if (j.contains("etcdLease")) {
    if (!j["etcdLease"].is_string()) {
      return corrupt("etcdLease is not a string");
    }
    l.etcdLease = std::strtoll(j["etcdLease"].get<std::string>().c_str(), nullptr, 10);
  }
  l.defined = j.value("defined", false);
  if (j.contains("pendingCheckedAt") && j["pendingCheckedAt"].is_string()) {
    l.pendingCheckedAt = j["pendingCheckedAt"].get<std::string>();
  }
  for (auto [key, list, block] : {std::tuple{"blocks", &l.blocks, true}, std::tuple{"addresses", &l.addresses, false}}) {
    if (!j.contains(key) || !j[key].is_array()) {
      return corrupt(std::string("no \"") + key + "\" list");
    }
    for (const auto& item : j[key]) {
      auto e = entryOf(item, block);
      if (!e) {
        return corrupt(std::string("a malformed entry in \"") + key + "\": " + item.dump().substr(0, 200));
      }
      list->push_back(std::move(*e));
    }
  }
  return std::optional<Ledger>(std::move(l));
}

os::SysResult<void> writeLedger(const std::string& dir, const Ledger& l) {
  json j{{"pool", l.pool},       {"node", l.node},       {"fingerprint", l.fingerprint}, {"network", l.network},
         {"backend", l.backend}, {"defined", l.defined}, {"blocks", json::array()},       {"addresses", json::array()}};
  if (!l.pendingCheckedAt.empty()) {
    j["pendingCheckedAt"] = l.pendingCheckedAt;
  }
  if (l.etcdLease != 0) {
    j["etcdLease"] = std::to_string(l.etcdLease);
  }
  for (const auto& e : l.blocks) {
    j["blocks"].push_back(entryJson(e, true));
  }
  for (const auto& e : l.addresses) {
    j["addresses"].push_back(entryJson(e, false));
  }
  const std::string path = dir + "/" + kLedgerFileName;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto fd = os::UniqueFd::open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  if (auto w = os::writeAll(fd->get(), j.dump(1) + "\n", tmp); !w) {
    ::unlink(tmp.c_str());
    return w;
  }
  if (::fsync(fd->get()) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return std::unexpected(os::SysError{err, "write " + path, {}});
  }
  return os::fsyncDirectory(dir);
}

}  // namespace ibcni::ipam
