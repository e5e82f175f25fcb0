// SPDX-License-Identifier: Apache-2.0
// FileStore's whole-store reads: list() of every attachment (GC, reclaiming, reports), and the
// consistency check and repair: verify() finds what only outside hands can break (a record removed
// by hand, a restored backup, an index edited), dropOrphans() repairs it for GC and reclaiming.
// Kept apart from file_store.cpp, the lock and the ADD/DEL path with its write order; both files
// implement the one class of file_store.h.
#include "ipam/store/file_store.h"

#include <algorithm>
#include <set>

#include "ibcni/os/file_io.h"
#include "ipam/store/record_codec.h"

namespace ibcni::ipam {

os::SysResult<std::vector<Allocation>> FileStore::list() {
  if (auto l = requireLock(); !l) {
    return std::unexpected(l.error());
  }
  auto names = os::listDirectoryAt(attachmentsFd_.get(), options_.dir + "/attachments");
  if (!names) {
    return std::unexpected(names.error());
  }
  std::sort(names->begin(), names->end());
  std::vector<Allocation> out;
  for (const auto& name : *names) {
    auto key = codec::keyFromRecordName(name);
    if (!key) {
      return codec::corruptFile(options_.dir + "/attachments/" + name, "not named <containerID>:<ifname>", "remove it");
    }
    auto rec = find(*key);
    if (!rec) {
      return std::unexpected(rec.error());
    }
    if (*rec) {
      out.push_back(std::move(**rec));
    }
  }
  return out;
}

os::SysResult<std::size_t> FileStore::dropOrphans() {
  if (auto l = requireLock(); !l) {
    return std::unexpected(l.error());
  }
  auto names = os::listDirectoryAt(ipsFd_.get(), options_.dir + "/ips");
  if (!names) {
    return std::unexpected(names.error());
  }
  std::vector<net::IpAddress> orphans;
  for (const auto& name : *names) {
    auto ip = space().fromClaimName(name);
    if (!ip || claimName(*ip) != name) {
      return codec::corruptFile(options_.dir + "/ips/" + name, "not named after " + std::string(space().aNoun),
                                "remove it");
    }
    auto owner = ownerOf(*ip);
    if (!owner) {
      return std::unexpected(owner.error());
    }
    if (!*owner) {
      continue;
    }
    auto rec = find(**owner);
    if (!rec) {
      return std::unexpected(rec.error());
    }
    if (!*rec || std::find((*rec)->addresses.begin(), (*rec)->addresses.end(), *ip) == (*rec)->addresses.end()) {
      orphans.push_back(*ip);
      if (auto m = markBit(*ip, false); !m) {
        return std::unexpected(m.error());
      }
    }
  }
  // And bits marked held without a claim (never left by this store's own write order, but a
  // restored backup or a hand edit can): such an address would otherwise never be handed out.
  std::size_t stale = 0;
  for (std::size_t s = 0; s < sets_.size(); ++s) {
    auto idx = loadIndex(s);
    if (!idx) {
      return std::unexpected(idx.error());
    }
    auto dropped = (*idx)->dropUnclaimed(claimCheck());
    if (!dropped) {
      return std::unexpected(dropped.error());
    }
    stale += *dropped;
  }
  if (orphans.empty() && stale == 0) {
    return std::size_t{0};
  }
  if (auto f = flushIndexes(); !f) {
    return std::unexpected(f.error());
  }
  if (auto r = removeClaims(orphans); !r) {
    return std::unexpected(r.error());
  }
  return orphans.size() + stale;
}

os::SysResult<std::vector<std::string>> FileStore::verify() {
  if (auto l = requireLock(); !l) {
    return std::unexpected(l.error());
  }
  std::vector<std::string> problems;
  auto recordNames = os::listDirectoryAt(attachmentsFd_.get(), options_.dir + "/attachments");
  if (!recordNames) {
    return std::unexpected(recordNames.error());
  }
  for (const auto& name : *recordNames) {
    auto key = codec::keyFromRecordName(name);
    if (!key) {
      problems.push_back(options_.dir + "/attachments/" + name + ": not named <containerID>:<ifname>");
      continue;
    }
    if (auto rec = find(*key); !rec) {
      problems.push_back(rec.error().describe());
    }
  }
  auto claimNames = os::listDirectoryAt(ipsFd_.get(), options_.dir + "/ips");
  if (!claimNames) {
    return std::unexpected(claimNames.error());
  }
  std::set<std::string> claims(claimNames->begin(), claimNames->end());
  for (const auto& name : *claimNames) {
    auto ip = space().fromClaimName(name);
    if (!ip || claimName(*ip) != name) {
      problems.push_back(options_.dir + "/ips/" + name + ": not named after " + std::string(space().aNoun));
      continue;
    }
    auto owner = ownerOf(*ip);
    if (!owner) {
      problems.push_back(owner.error().describe());
      continue;
    }
    auto rec = find(**owner);
    if (!rec) {
      continue;  // reported above
    }
    if (!*rec) {
      problems.push_back(claimPath(*ip) + ": held by " + (*owner)->toString() + ", which has no record");
    } else if (std::find((*rec)->addresses.begin(), (*rec)->addresses.end(), *ip) == (*rec)->addresses.end()) {
      problems.push_back(claimPath(*ip) + ": held by " + (*owner)->toString() + ", whose record does not list it");
    }
  }
  for (std::size_t s = 0; s < sets_.size(); ++s) {
    auto idx = loadIndex(s);
    if (!idx) {
      problems.push_back(idx.error().describe());
      continue;
    }
    for (const auto& ip : (*idx)->marked()) {
      if (!claims.contains(claimName(ip))) {
        problems.push_back(indexPath(s) + ": " + ip.toString() + " is marked held but has no claim");
      }
    }
  }
  return problems;
}

}  // namespace ibcni::ipam
