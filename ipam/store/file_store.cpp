// SPDX-License-Identifier: Apache-2.0
#include "ipam/store/file_store.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "ibcni/os/file_io.h"
#include "ipam/store/record_codec.h"

namespace ibcni::ipam {

namespace {

constexpr const char* kClaimPrefix = "../attachments/";
constexpr std::size_t kMaxFile = std::size_t{1} << 22;  // 4 MiB: the largest index is 128 KiB

std::unexpected<os::SysError> badKey(const AttachmentKey& key) {
  return os::sysFail(EINVAL,
                     "invalid attachment key containerID \"" + key.containerId + "\" ifname \"" + key.ifName + "\"");
}

os::SysResult<std::string> readAt(int dirFd, const std::string& name, const std::string& path) {
  int fd = ::openat(dirFd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return os::sysFail(errno, "open " + path);
  }
  os::UniqueFd owned(fd);
  auto text = os::readAllFd(fd, kMaxFile, path);
  if (!text && text.error().err == EFBIG) {
    return codec::corruptFile(path, "larger than 4 MiB", "remove it");
  }
  return text;
}

// The addresses of `allocation`, then those `old` listed that it drops.
std::vector<net::IpAddress> withDropped(const Allocation& allocation, const std::optional<Allocation>& old) {
  std::vector<net::IpAddress> listed = allocation.addresses;
  if (old) {
    for (const auto& a : old->addresses) {
      if (std::find(listed.begin(), listed.end(), a) == listed.end()) {
        listed.push_back(a);
      }
    }
  }
  return listed;
}

// <dir>/<name>, opened relative to the store's directory and created when missing.
os::SysResult<os::UniqueFd> openSubdir(int dirFd, const std::string& dir, const char* name) {
  for (bool created = false;; created = true) {
    const int raw = ::openat(dirFd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (raw >= 0) {
      return os::UniqueFd(raw);
    }
    if (errno != ENOENT || created) {
      return os::sysFail(errno, "open directory " + dir + "/" + name);
    }
    if (::mkdirat(dirFd, name, 0700) != 0 && errno != EEXIST) {
      return os::sysFail(errno, "create directory " + dir + "/" + name);
    }
  }
}

}  // namespace

FileStore::FileStore(Options options) : options_(std::move(options)) {
  for (const auto& spans : options_.rangeSets) {
    sets_.emplace_back(spans, space());
  }
}

FileStore::~FileStore() { unlock(); }

std::string FileStore::recordPath(const AttachmentKey& key) const {
  return options_.dir + "/attachments/" + codec::recordName(key);
}

std::string FileStore::claimPath(const net::IpAddress& ip) const { return options_.dir + "/ips/" + claimName(ip); }

std::string FileStore::indexPath(std::size_t set) const { return options_.dir + "/index/" + sets_.at(set).fileName(); }

std::string FileStore::indexFix() const { return "remove it to have it rebuilt from " + options_.dir + "/ips"; }

os::SysResult<void> FileStore::requireLock() const {
  if (!lock_) {
    return os::sysFail(ENOLCK, "ipam store " + options_.dir + " used without holding its lock");
  }
  return {};
}

os::SysResult<int> FileStore::openStoreDir() {
  if (options_.dirFd) {
    return options_.dirFd.get();
  }
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  if (ec) {
    return os::sysFail(ec.value(), "create directory " + options_.dir);
  }
  auto fd = os::UniqueFd::open(options_.dir, O_RDONLY | O_DIRECTORY);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  lockedDirFd_ = std::move(*fd);
  return lockedDirFd_.get();
}

os::SysResult<void> FileStore::lock() {
  if (lock_) {
    return os::sysFail(EDEADLK, "ipam store " + options_.dir + " is already locked by this process");
  }
  auto opened = openStoreDir();
  if (!opened) {
    return std::unexpected(opened.error());
  }
  const int dirFd = *opened;
  auto l = os::FileLock::acquireAt(dirFd, "lock", options_.dir + "/lock", options_.lockTimeout);
  if (!l) {
    return std::unexpected(l.error());
  }
  lock_.emplace(std::move(*l));
  auto fail = [this](const os::SysError& e) {
    unlock();
    return std::unexpected(e);
  };
  auto a = openSubdir(dirFd, options_.dir, "attachments");
  auto i = openSubdir(dirFd, options_.dir, "ips");
  auto x = openSubdir(dirFd, options_.dir, "index");
  auto t = openSubdir(dirFd, options_.dir, "tmp");
  for (auto* r : {&a, &i, &x, &t}) {
    if (!*r) {
      return fail(r->error());
    }
  }
  attachmentsFd_ = std::move(*a);
  ipsFd_ = std::move(*i);
  indexFd_ = std::move(*x);
  tmpFd_ = std::move(*t);
  // Only lock holders write, so whatever is in tmp/ now was left by a process that died.
  auto leftovers = os::listDirectoryAt(tmpFd_.get(), options_.dir + "/tmp");
  if (!leftovers) {
    return fail(leftovers.error());
  }
  for (const auto& name : *leftovers) {
    if (::unlinkat(tmpFd_.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
      return fail(os::SysError{errno, "remove " + options_.dir + "/tmp/" + name, {}});
    }
  }
  return {};
}

void FileStore::unlock() noexcept {
  // Another process may change everything once the lock is gone: forget the cached indexes.
  for (auto& s : sets_) {
    s.forget();
  }
  staleIndexesRemoved_ = false;
  attachmentsFd_.reset();
  ipsFd_.reset();
  indexFd_.reset();
  tmpFd_.reset();
  lock_.reset();
  lockedDirFd_.reset();
}

os::SysResult<void> FileStore::writeAtomic(int dirFd, const std::string& dirPath, const std::string& name,
                                           const std::string& data) {
  const std::string tmpName = name + "." + std::to_string(::getpid());
  return os::writeFileAtomicAt({tmpFd_.get(), tmpName, options_.dir + "/tmp/" + tmpName},
                               {dirFd, name, dirPath + "/" + name}, data);
}

std::optional<std::size_t> FileStore::setOf(const net::IpAddress& ip) const {
  for (std::size_t s = 0; s < sets_.size(); ++s) {
    if (sets_[s].covers(ip)) {
      return s;
    }
  }
  return std::nullopt;
}

os::SysResult<Allocation> FileStore::parseRecord(const std::string& text, const AttachmentKey& key,
                                                 const std::string& path, const IdentSpace& space) {
  return codec::decodeRecord(text, key, path, space);
}

os::SysResult<std::optional<net::IpAddress>> FileStore::parseIndex(std::size_t set, const std::string& text,
                                                                   const std::string& path) const {
  if (set >= sets_.size()) {
    return os::sysFail(EINVAL, "ipam store " + options_.dir + ": no range set " + std::to_string(set));
  }
  FreeIndex idx = sets_[set];
  if (auto d = idx.decode(text, path, indexFix()); !d) {
    return std::unexpected(d.error());
  }
  return idx.cursor();
}

os::SysResult<FreeIndex*> FileStore::loadIndex(std::size_t set) {
  if (auto l = requireLock(); !l) {
    return std::unexpected(l.error());
  }
  if (set >= sets_.size()) {
    return os::sysFail(EINVAL, "ipam store " + options_.dir + ": no range set " + std::to_string(set));
  }
  if (!staleIndexesRemoved_) {
    // Indexes of range sets this configuration no longer has would go stale as addresses come
    // and go; drop them so that a configuration returning to them rebuilds from ips/.
    auto names = os::listDirectoryAt(indexFd_.get(), options_.dir + "/index");
    if (!names) {
      return std::unexpected(names.error());
    }
    for (const auto& name : *names) {
      bool current = std::any_of(sets_.begin(), sets_.end(), [&](const FreeIndex& s) { return s.fileName() == name; });
      if (!current && ::unlinkat(indexFd_.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
        return os::sysFail(errno, "remove " + options_.dir + "/index/" + name);
      }
    }
    staleIndexesRemoved_ = true;
  }
  FreeIndex& idx = sets_[set];
  if (idx.known()) {
    return &idx;
  }
  std::string path = indexPath(set);
  auto text = readAt(indexFd_.get(), idx.fileName(), path);
  if (!text) {
    if (text.error().err != ENOENT) {
      return std::unexpected(text.error());
    }
    // First use of this range set (or the file was removed on purpose): ips/ is the truth.
    auto names = os::listDirectoryAt(ipsFd_.get(), options_.dir + "/ips");
    if (!names) {
      return std::unexpected(names.error());
    }
    idx.rebuild(*names);
  } else if (auto d = idx.decode(*text, path, indexFix()); !d) {
    return std::unexpected(d.error());
  }
  return &idx;
}

os::SysResult<void> FileStore::flushIndexes() {
  for (auto& idx : sets_) {
    if (idx.known() && idx.dirty()) {
      if (auto w = writeAtomic(indexFd_.get(), options_.dir + "/index", idx.fileName(), idx.encode()); !w) {
        return w;
      }
      idx.markSaved();
    }
  }
  return {};
}

os::SysResult<void> FileStore::markBit(const net::IpAddress& ip, bool held) {
  auto set = setOf(ip);
  if (!set) {
    return {};  // not in a configured range: nothing indexes it
  }
  auto idx = loadIndex(*set);
  if (!idx) {
    return std::unexpected(idx.error());
  }
  (*idx)->mark(ip, held);
  return {};
}

os::SysResult<bool> FileStore::claimExists(const net::IpAddress& ip) const {
  struct stat st {};
  if (::fstatat(ipsFd_.get(), claimName(ip).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    return true;
  }
  if (errno == ENOENT) {
    return false;
  }
  return os::sysFail(errno, "stat " + claimPath(ip));
}

os::SysResult<std::optional<Allocation>> FileStore::find(const AttachmentKey& key) {
  if (auto l = requireLock(); !l) {
    return std::unexpected(l.error());
  }
  if (!codec::isValidKey(key)) {
    return badKey(key);
  }
  std::string path = recordPath(key);
  auto text = readAt(attachmentsFd_.get(), codec::recordName(key), path);
  if (!text) {
    if (text.error().err == ENOENT) {
      return std::optional<Allocation>();
    }
    return std::unexpected(text.error());
  }
  auto rec = codec::decodeRecord(*text, key, path, space());
  if (!rec) {
    return std::unexpected(rec.error());
  }
  return std::optional<Allocation>(std::move(*rec));
}

os::SysResult<std::optional<AttachmentKey>> FileStore::ownerOf(const net::IpAddress& ip) {
  if (auto l = requireLock(); !l) {
    return std::unexpected(l.error());
  }
  char buf[512];
  ssize_t n = ::readlinkat(ipsFd_.get(), claimName(ip).c_str(), buf, sizeof buf);
  if (n < 0) {
    if (errno == ENOENT) {
      return std::optional<AttachmentKey>();
    }
    if (errno == EINVAL) {
      return codec::corruptFile(claimPath(ip), "not a symbolic link",
                                "remove it if no attachment holds " + ip.toString());
    }
    return os::sysFail(errno, "read link " + claimPath(ip));
  }
  std::string target(buf, static_cast<std::size_t>(n));
  std::optional<AttachmentKey> key;
  if (static_cast<std::size_t>(n) < sizeof buf && target.starts_with(kClaimPrefix)) {
    key = codec::keyFromRecordName(target.substr(std::strlen(kClaimPrefix)));
  }
  if (!key) {
    return codec::corruptFile(claimPath(ip), "bad link target \"" + target + "\"",
                              "remove it if no attachment holds " + ip.toString());
  }
  return key;
}

ClaimCheck FileStore::claimCheck() const {
  return [this](const net::IpAddress& ip) { return claimExists(ip); };
}

os::SysResult<std::optional<net::IpAddress>> FileStore::firstFree(std::size_t set, std::size_t range,
                                                                  const net::IpAddress& lo, const net::IpAddress& hi) {
  auto idx = loadIndex(set);
  if (!idx) {
    return std::unexpected(idx.error());
  }
  if (range >= (*idx)->rangeCount()) {
    return os::sysFail(EINVAL, "ipam store " + options_.dir + ": no range " + std::to_string(range));
  }
  return (*idx)->firstFree(range, lo, hi, claimCheck());
}

os::SysResult<std::optional<net::IpAddress>> FileStore::lastReserved(std::size_t set) {
  auto idx = loadIndex(set);
  if (!idx) {
    return std::unexpected(idx.error());
  }
  return (*idx)->cursor();
}

os::SysResult<std::uint64_t> FileStore::countInUse(std::size_t set) {
  auto idx = loadIndex(set);
  if (!idx) {
    return std::unexpected(idx.error());
  }
  std::uint64_t n = (*idx)->countMarked();
  if ((*idx)->hasProbedRange()) {
    // Counting claims in a probed range takes a directory scan: only exhaustion and STATUS ask.
    auto names = os::listDirectoryAt(ipsFd_.get(), options_.dir + "/ips");
    if (!names) {
      return std::unexpected(names.error());
    }
    n += (*idx)->countInProbedRanges(*names);
  }
  return n;
}

os::SysResult<void> FileStore::removeClaims(const std::vector<net::IpAddress>& ips) {
  for (const auto& ip : ips) {
    if (::unlinkat(ipsFd_.get(), claimName(ip).c_str(), 0) != 0 && errno != ENOENT) {
      return os::sysFail(errno, "remove " + claimPath(ip));
    }
  }
  return os::fsyncFd(ipsFd_.get(), options_.dir + "/ips");
}

os::SysResult<void> FileStore::writeRecord(const Allocation& a) {
  return writeAtomic(attachmentsFd_.get(), options_.dir + "/attachments", codec::recordName(a.key),
                     codec::encodeRecord(a));
}

os::SysResult<void> FileStore::loadIndexesOf(const std::vector<net::IpAddress>& ips) {
  for (const auto& a : ips) {
    if (auto set = setOf(a)) {
      if (auto idx = loadIndex(*set); !idx) {
        return std::unexpected(idx.error());
      }
    }
  }
  return {};
}

os::SysResult<std::vector<net::IpAddress>> FileStore::createClaims(const Allocation& allocation,
                                                                   const std::optional<Allocation>& old) {
  const AttachmentKey& key = allocation.key;
  std::string target = std::string(kClaimPrefix) + codec::recordName(key);
  std::vector<net::IpAddress> created;
  for (const auto& a : allocation.addresses) {
    if (::symlinkat(target.c_str(), ipsFd_.get(), claimName(a).c_str()) == 0) {
      created.push_back(a);
      continue;
    }
    os::SysError failure{errno, "claim " + claimPath(a), {}};
    if (failure.err == EEXIST) {
      auto owner = ownerOf(a);
      if (owner && *owner && **owner == key) {
        continue;  // held already (an earlier ADD of this attachment)
      }
      if (!owner) {
        failure = owner.error();  // a corrupt claim: say so
      } else if (*owner) {
        failure.op += ": " + std::string(space().noun) + " " + a.toString() + " is held by " + (*owner)->toString();
      }
    }
    undoClaims(created, key, old);
    return std::unexpected(std::move(failure));
  }
  if (!created.empty()) {
    if (auto s = os::fsyncFd(ipsFd_.get(), options_.dir + "/ips"); !s) {
      return std::unexpected(s.error());
    }
  }
  return created;
}

void FileStore::undoClaims(const std::vector<net::IpAddress>& created, const AttachmentKey& key,
                           const std::optional<Allocation>& old) {
  // Undo this call: its claims, then the record.
  for (const auto& c : created) {
    ::unlinkat(ipsFd_.get(), claimName(c).c_str(), 0);
  }
  (void)os::fsyncFd(ipsFd_.get(), options_.dir + "/ips");
  if (old) {
    (void)writeRecord(*old);
  } else {
    ::unlinkat(attachmentsFd_.get(), codec::recordName(key).c_str(), 0);
    (void)os::fsyncFd(attachmentsFd_.get(), options_.dir + "/attachments");
  }
}

os::SysResult<void> FileStore::markClaimed(const std::vector<net::IpAddress>& held,
                                           const std::vector<net::IpAddress>& created) {
  for (const auto& a : held) {
    if (auto m = markBit(a, true); !m) {
      return m;
    }
  }
  for (const auto& a : created) {
    if (auto set = setOf(a)) {
      sets_[*set].setCursor(a);
    }
  }
  return {};
}

os::SysResult<void> FileStore::releaseDropped(const Allocation& allocation, const std::vector<net::IpAddress>& listed) {
  std::vector<net::IpAddress> drop;
  for (std::size_t i = allocation.addresses.size(); i < listed.size(); ++i) {
    auto owner = ownerOf(listed[i]);
    if (!owner) {
      return std::unexpected(owner.error());
    }
    if (*owner && **owner == allocation.key) {
      drop.push_back(listed[i]);
      if (auto m = markBit(listed[i], false); !m) {
        return m;
      }
    }
  }
  if (auto f = flushIndexes(); !f) {
    return f;
  }
  if (auto r = removeClaims(drop); !r) {
    return r;
  }
  return writeRecord(allocation);
}

os::SysResult<void> FileStore::reserve(const Allocation& allocation) {
  if (auto l = requireLock(); !l) {
    return std::unexpected(l.error());
  }
  const AttachmentKey& key = allocation.key;
  if (!codec::isValidKey(key)) {
    return badKey(key);
  }
  auto old = find(key);
  if (!old) {
    return std::unexpected(old.error());
  }
  // Load every index this touches first, so that a corrupt index fails before anything changes.
  const std::vector<net::IpAddress> listed = withDropped(allocation, *old);
  if (auto l = loadIndexesOf(listed); !l) {
    return l;
  }
  // 1. The record first, listing old and new addresses: every claim of `key` is always listed by
  //    its record, so DEL finds all of them whenever this process dies.
  Allocation intent = allocation;
  intent.addresses = listed;
  if (auto w = writeRecord(intent); !w) {
    return w;
  }
  // 2. The claims: symlink() creates the name or fails, atomically.
  auto created = createClaims(allocation, *old);
  if (!created) {
    return std::unexpected(created.error());
  }
  // 3. The index: bits after their claims (a crash in between leaves a claim without its bit,
  //    which firstFree() repairs). Written at commit().
  if (auto m = markClaimed(allocation.addresses, *created); !m) {
    return m;
  }
  // 4. Addresses the old record held that the new one drops: released like DEL does.
  if (listed.size() != allocation.addresses.size()) {
    return releaseDropped(allocation, listed);
  }
  return {};
}

os::SysResult<bool> FileStore::release(const AttachmentKey& key) {
  auto rec = find(key);
  if (!rec) {
    return std::unexpected(rec.error());
  }
  if (!*rec) {
    return false;
  }
  std::vector<net::IpAddress> owned;
  for (const auto& a : (*rec)->addresses) {
    auto owner = ownerOf(a);
    if (!owner) {
      return std::unexpected(owner.error());
    }
    // A listed address held by someone else was never claimed by `key` (its ADD died before the
    // claim): it is not ours to release. One held by nobody must not stay marked held.
    if (*owner && **owner == key) {
      owned.push_back(a);
    }
    if (!*owner || **owner == key) {
      if (auto m = markBit(a, false); !m) {
        return std::unexpected(m.error());
      }
    }
  }
  // Bits are cleared on disk before the claims go, so a set bit never lacks its claim.
  if (auto f = flushIndexes(); !f) {
    return std::unexpected(f.error());
  }
  if (!owned.empty()) {
    if (auto r = removeClaims(owned); !r) {
      return std::unexpected(r.error());
    }
  }
  if (::unlinkat(attachmentsFd_.get(), codec::recordName(key).c_str(), 0) != 0 && errno != ENOENT) {
    return os::sysFail(errno, "remove " + recordPath(key));
  }
  if (auto s = os::fsyncFd(attachmentsFd_.get(), options_.dir + "/attachments"); !s) {
    return std::unexpected(s.error());
  }
  return true;
}

os::SysResult<void> FileStore::commit() {
  if (auto l = requireLock(); !l) {
    return l;
  }
  return flushIndexes();
}

}  // namespace ibcni::ipam
