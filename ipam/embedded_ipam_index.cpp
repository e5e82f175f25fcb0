// SPDX-License-Identifier: Apache-2.0
// The pool index (EmbeddedIpamOptions::poolIndexDir): each cluster pool of the default data
// directory, kept where a reboot does not wipe it.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ibcni/os/file_io.h"
#include "ipam/embedded_ipam.h"
#include "ipam/embedded_ipam_guids.h"
#include "ipam/embedded_ipam_session.h"
#include "lib/json/json_fields.h"
#include "lib/log/log.h"

namespace ibcni::ipam {

namespace {

using config::fields::json;

constexpr std::size_t kMaxEntry = std::size_t{1} << 20;

// Whether `dir` is `root` or below it (both absolute, compared as normalized paths).
bool isUnder(const std::string& dir, const std::string& root) {
  const auto d = std::filesystem::path(dir).lexically_normal().string();
  auto r = std::filesystem::path(root).lexically_normal().string();
  if (!r.empty() && r.back() != '/') {
    r += '/';
  }
  return d.starts_with(r);
}

std::string entryPath(const std::string& dir, const std::string& kind, const std::string& pool) {
  return dir + "/" + kind + "-" + pool + ".json";
}

}  // namespace

void keepPoolIndex(const EmbeddedIpamOptions& options, const std::string& pool, const PoolIndexEntry& entry) {
  if (options.poolIndexDir.empty() || !isUnder(entry.storeDir, options.defaultDataDir)) {
    return;
  }
  const std::string path = entryPath(options.poolIndexDir, entry.kind, pool);
  const json j = {{"kind", entry.kind}, {"storeDir", entry.storeDir}, {"file", entry.fileName}, {"text", entry.text}};
  std::error_code ec;
  std::filesystem::create_directories(options.poolIndexDir, ec);
  if (auto w = keepFile(path, j.dump() + "\n"); !w) {
    log::warn("cannot keep pool {} in the pool index: {}", pool, w.error().describe());
  }
}

std::vector<PoolIndexEntry> readPoolIndex(const std::string& dir) {
  std::vector<PoolIndexEntry> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json") {
      continue;
    }
    auto text = os::readFile(e.path().string(), kMaxEntry);
    const json j = text ? json::parse(*text, nullptr, false) : json();
    PoolIndexEntry p;
    if (j.is_object() && j.value("kind", "").size() > 0) {
      p = {j.value("kind", ""), j.value("storeDir", ""), j.value("file", ""), j.value("text", "")};
    }
    const bool known = (p.kind == "address" && p.fileName == kNetworkFileName) ||
                       (p.kind == "guid" && p.fileName == kGuidPoolFileName);
    if (!known || !p.storeDir.starts_with('/') || p.text.empty()) {
      log::warn("pool index entry {} is not one ibcni wrote: skipped", e.path().string());
      continue;
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace ibcni::ipam
