// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ipam/store/free_index.h"
#include "ibcni/os/file_lock.h"
#include "ibcni/os/unique_fd.h"
#include "ipam/store/store.h"

namespace ibcni::ipam {

/// The embedded IPAM's on-disk store: one directory per network.
///
///   <dir>/lock                               flock(2)ed for every critical section
///   <dir>/attachments/<containerID>:<ifname> one record per attachment: pod, netns (path and
///                                            inode), time, addresses; framed with length + CRC-32
///   <dir>/ips/<address>                      symlink -> ../attachments/<containerID>:<ifname>:
///                                            the claim, created with symlink(2) (atomic, fails
///                                            if it exists), so no address can have two holders
///                                            (a store of GUIDs: ips/<16 hex digits>, Options::space)
///   <dir>/index/set-<hash>                   per range set: the round-robin cursor and, for each
///                                            range of at most 2^20 addresses, a bitmap of held
///                                            addresses; framed with length + CRC-32
///   <dir>/tmp/                               files being written (emptied on every lock)
///
/// Every file is written to tmp/, fsync()ed, renamed into place, and its directory fsync()ed.
/// Ordering keeps the store consistent whenever a process dies: a record is written before the
/// claims it lists and removed after them (so every claim has a record naming it); a bitmap bit
/// is set after its claim and cleared before it (so a set bit always has a claim; a claim without
/// its bit is found and the bit repaired when firstFree() meets it). A corrupt or truncated file
/// is an EUCLEAN error naming the file, never silently reset. A missing index is rebuilt from
/// ips/.
///
/// Cost of an ADD: one record write, one symlink and one index write per range set, whatever the
/// number of allocations; firstFree() scans the bitmap 64 addresses per step from the cursor.
/// Ranges larger than 2^20 addresses (IPv6 /64s) have no bitmap: firstFree() probes ips/ from
/// the cursor, which finds a free address at once in a sparse range.
///
/// The file formats are record_codec.h's (frame, record) and free_index.h's (index); this class
/// owns the directory: where each file lives, the lock, and the write order above.
class FileStore final : public Store {
 public:
  struct Options {
    std::string dir;                       ///< <dataDir>/<network name>
    std::vector<RangeSetSpans> rangeSets;  ///< Allocator::spansOf(config)
    std::chrono::milliseconds lockTimeout = std::chrono::seconds(30);
    /// `dir` opened already (the session's checked walk, os::openDirectory), used for the store's
    /// life; without it, each lock() creates `dir` when missing and opens it until unlock().
    /// Every file is reached relative to it.
    os::UniqueFd dirFd{};
    /// What the store holds: addresses (ips/<address>) or GUIDs (ips/<16 hex digits>, values of
    /// family net::kFamilyGuid); spaceOf(config).kind.
    SpaceKind space = SpaceKind::kIp;
  };

  explicit FileStore(Options options);
  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  [[nodiscard]] os::SysResult<void> lock() override;
  void unlock() noexcept override;
  [[nodiscard]] os::SysResult<std::optional<Allocation>> find(const AttachmentKey& key) override;
  [[nodiscard]] os::SysResult<std::optional<AttachmentKey>> ownerOf(const net::IpAddress& ip) override;
  [[nodiscard]] os::SysResult<std::optional<net::IpAddress>> firstFree(std::size_t set, std::size_t range,
                                                                       const net::IpAddress& lo,
                                                                       const net::IpAddress& hi) override;
  [[nodiscard]] os::SysResult<std::optional<net::IpAddress>> lastReserved(std::size_t set) override;
  [[nodiscard]] os::SysResult<std::uint64_t> countInUse(std::size_t set) override;
  [[nodiscard]] os::SysResult<void> reserve(const Allocation& allocation) override;
  [[nodiscard]] os::SysResult<bool> release(const AttachmentKey& key) override;
  [[nodiscard]] os::SysResult<std::vector<Allocation>> list() override;
  [[nodiscard]] os::SysResult<std::size_t> dropOrphans() override;
  [[nodiscard]] os::SysResult<void> commit() override;

  /// A full consistency check (call under lock()): every record and claim parses, every claim is
  /// listed by its holder's record, every set bit has a claim. @return the problems found
  /// (empty when consistent); an error only when the store cannot be read at all.
  [[nodiscard]] os::SysResult<std::vector<std::string>> verify();

  /// The parsers behind find() and the index load, on a whole file's bytes (tests/fuzz feeds them
  /// arbitrary bytes). A corrupt file is an EUCLEAN error naming `path`.
  /// A record (attachments/<containerID>:<ifname>), which must describe `key`.
  [[nodiscard]] static os::SysResult<Allocation> parseRecord(const std::string& text, const AttachmentKey& key,
                                                             const std::string& path,
                                                             const IdentSpace& space = ipSpace());
  /// An index (index/set-<hash>) of range set `set`, which must describe that set's ranges.
  /// @return the round-robin cursor it holds.
  [[nodiscard]] os::SysResult<std::optional<net::IpAddress>> parseIndex(std::size_t set, const std::string& text,
                                                                        const std::string& path) const;

  [[nodiscard]] const std::string& dir() const noexcept { return options_.dir; }
  [[nodiscard]] std::string recordPath(const AttachmentKey& key) const;
  [[nodiscard]] std::string claimPath(const net::IpAddress& ip) const;
  [[nodiscard]] const IdentSpace& space() const noexcept { return spaceOf(options_.space); }
  /// The name of `ip`'s claim under ips/.
  [[nodiscard]] std::string claimName(const net::IpAddress& ip) const { return space().claimName(ip); }
  [[nodiscard]] std::string indexPath(std::size_t set) const;

 private:
  os::SysResult<void> requireLock() const;
  /// Range set `set`'s index, read (or rebuilt from ips/) at its first use under the lock.
  os::SysResult<FreeIndex*> loadIndex(std::size_t set);
  os::SysResult<void> flushIndexes();
  /// The range set holding `ip`, or nullopt.
  std::optional<std::size_t> setOf(const net::IpAddress& ip) const;
  os::SysResult<void> markBit(const net::IpAddress& ip, bool held);
  os::SysResult<bool> claimExists(const net::IpAddress& ip) const;
  /// claimExists() as a FreeIndex sees it.
  ClaimCheck claimCheck() const;
  /// What to do about a corrupt index file.
  std::string indexFix() const;
  /// Removes the claims of `ips` (gone already is fine) and makes that durable. Callers write the
  /// cleared bits first.
  os::SysResult<void> removeClaims(const std::vector<net::IpAddress>& ips);
  os::SysResult<void> writeRecord(const Allocation& a);
  // reserve()'s steps, in its write order.
  /// Loads the index of every range set holding one of `ips`.
  os::SysResult<void> loadIndexesOf(const std::vector<net::IpAddress>& ips);
  /// Claims the addresses of `allocation` and makes the new claims durable. @return the claims
  /// created (not those it held already). On failure, undoes them and puts `old` back.
  os::SysResult<std::vector<net::IpAddress>> createClaims(const Allocation& allocation,
                                                          const std::optional<Allocation>& old);
  /// Removes `created` and restores the record of `key` to `old` (none: no record), best effort.
  void undoClaims(const std::vector<net::IpAddress>& created, const AttachmentKey& key,
                  const std::optional<Allocation>& old);
  /// Sets the bits of `held` and moves the round-robin cursor past `created`.
  os::SysResult<void> markClaimed(const std::vector<net::IpAddress>& held, const std::vector<net::IpAddress>& created);
  /// Releases what `listed` holds past the addresses of `allocation` (the old record's, dropped
  /// now) and writes the record without them.
  os::SysResult<void> releaseDropped(const Allocation& allocation, const std::vector<net::IpAddress>& listed);
  os::SysResult<void> writeAtomic(int dirFd, const std::string& dirPath, const std::string& name,
                                  const std::string& data);
  /// The store's directory for lock() to work in: options_.dirFd, or `dir` opened until unlock().
  os::SysResult<int> openStoreDir();

  Options options_;
  std::vector<FreeIndex> sets_;
  std::optional<os::FileLock> lock_;
  os::UniqueFd attachmentsFd_;
  os::UniqueFd ipsFd_;
  os::UniqueFd indexFd_;
  os::UniqueFd tmpFd_;
  os::UniqueFd lockedDirFd_;
  bool staleIndexesRemoved_ = false;
};

}  // namespace ibcni::ipam
