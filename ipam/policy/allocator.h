// SPDX-License-Identifier: Apache-2.0
// The embedded IPAM's policy: which address an attachment gets. It never touches the filesystem;
// everything it remembers goes through a Store.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ipam/policy/allocation.h"
#include "ipam/policy/allocation_space.h"
#include "ibcni/cni/error.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/os/netns_checker.h"
#include "ipam/store/store.h"

namespace ibcni::ipam {

// The configuration config/ parsed: the policy trusts every field.
using config::IpamConfig;
using config::Range;
using config::RangeSet;
using config::Reservation;

/// What ADD asks for.
struct AddRequest {
  AttachmentKey key;
  PodRef pod;                             ///< empty: no reservation applies
  std::string netns;                      ///< CNI_NETNS, recorded for reclaiming
  std::uint64_t netnsInode = 0;           ///< its inode, 0 when unknown
  std::vector<net::IpAddress> requested;  ///< wanted addresses, at most one per range set
  std::string requestedFrom;              ///< where they came from, for messages ("runtimeConfig.ips")
  std::string network;                    ///< the network's name, recorded with the allocation
};

/// One address handed out, with the range it belongs to (which gives prefix length and gateway).
struct Lease {
  net::IpAddress address;
  std::size_t rangeSet = 0;
  Range range;
};

/// How full one range set is.
struct SetUsage {
  std::string path;             ///< "ipam.ranges[0]"
  U128 allocatable = 0;         ///< addresses round-robin can hand out (no gateways, exclusions, reservations)
  std::uint64_t inUse = 0;      ///< addresses held inside the set's ranges
  std::uint64_t freeCount = 0;  ///< free addresses round-robin could hand out (capped at 2^64-1)
};

/// Where the addresses a node may hand out come from in cluster mode (ipam.cluster): the blocks of
/// the shared pool this node holds, and single addresses other nodes lent it (cluster_pool.h).
/// Without one, a node hands out its whole ranges. Each call is made inside the allocator's
/// critical section (the store's lock is held).
class BlockSource {
 public:
  virtual ~BlockSource() = default;
  /// Called first in every critical section: reread what the node holds (no backend call). Never
  /// fails because of the configuration: DEL and GC go on whatever it says.
  [[nodiscard]] virtual cni::Result<void> begin() = 0;
  /// Called by ADD before it hands out an address: the configuration must agree with the pool's
  /// definition (else 7), a claim whose answer was lost is looked up, and the node's holds must be
  /// confirmed within the lease (else one backend call; 11 when the backend cannot confirm them).
  [[nodiscard]] virtual cni::Result<void> prepare() = 0;
  /// The addresses of range set `set` this node may hand out (its blocks and the addresses lent to
  /// it), as sorted intervals.
  [[nodiscard]] virtual const std::vector<Interval>& owned(std::size_t set) = 0;
  /// Gets room for one more address in range set `set` (a free block claimed, a gone node's block
  /// taken over, or an address lent). @return false when there is none now.
  [[nodiscard]] virtual cni::Result<bool> grow(std::size_t set) = 0;
  /// Makes `ip`, named by the attachment `owner` of pod `pod` (a request or a reservation), this
  /// node's across the cluster: nothing to do inside a block this node holds, else a claim of its
  /// block (requested) or of the address itself (reserved). The caller made sure no other
  /// attachment of this node holds it. Claims whose attachment let the address go are given back
  /// by the periodic pass, never on DEL's path.
  [[nodiscard]] virtual cni::Result<void> claimNamed(const net::IpAddress& ip, const AttachmentKey& owner,
                                                     const PodRef& pod, const std::string& what) = 0;
  /// The error for range set `set` having no free address: the pool, the blocks this node holds,
  /// and what was done about it (108; 11 when the pool's holders were asked for room).
  [[nodiscard]] virtual cni::Error exhausted(std::size_t set) = 0;
};

/// Addresses of this node's blocks lent to other nodes (cluster mode's borrowing), kept in the
/// node-local store so that this node never hands them out. Called with the store's lock held.
class LoanBook {
 public:
  virtual ~LoanBook() = default;
  /// A free address of range set `set` inside this node's blocks, recorded as lent to `borrower`;
  /// nullopt when none is free.
  [[nodiscard]] virtual cni::Result<std::optional<net::IpAddress>> lend(std::size_t set,
                                                                        const std::string& borrower) = 0;
  /// Records `ip` as lent to `borrower` (a loan found in a block taken over from a gone node).
  [[nodiscard]] virtual cni::Result<void> recordLent(const net::IpAddress& ip, const std::string& borrower) = 0;
  /// Forgets the loan of `ip` (its borrower gave it back): it may be handed out again.
  [[nodiscard]] virtual cni::Result<void> returned(const net::IpAddress& ip) = 0;
};

/// Allocation per range set over a Store:
/// * round-robin from the address last handed out in the range set, wrapping around, over the
///   ranges minus network/broadcast addresses, every gateway, ipam.exclude and every reserved
///   address (a whole excluded CIDR is skipped in one step; the store finds the next free address
///   without visiting held ones); GUID range sets (family net::kFamilyGuid) have no network,
///   broadcast or gateway, and every GUID of their ranges may be handed out;
/// * a pod's reservation wins; a requested address must be inside a range, not excluded, not a
///   gateway/network/broadcast, not reserved for another pod and not held by a live attachment;
/// * idempotent per (containerID, ifname): an attachment that holds addresses gets them back;
/// * on exhaustion, allocations whose network namespace is gone are released first (never in a
///   GUID space: see reclaimable()), then error 108 names the range set, its size and how many
///   addresses are in use.
/// Each public call is one critical section under the store's lock.
class Allocator final : public LoanBook {
 public:
  using Clock = std::function<std::chrono::system_clock::time_point()>;

  /// `config`, `store` and `netns` must outlive the allocator.
  Allocator(const IpamConfig& config, Store& store, os::NetnsChecker& netns, Clock clock = {});

  /// Cluster mode: hand out only what `blocks` gives (it must outlive the allocator). For a source
  /// built from this allocator's allowed(); called before any other call.
  void useBlocks(BlockSource& blocks) { blocks_ = &blocks; }

  /// The ranges of each range set of `config`, in order: what a Store is built with.
  [[nodiscard]] static std::vector<RangeSetSpans> spansOf(const IpamConfig& config);

  /// ADD: one lease per range set, in range-set order.
  [[nodiscard]] cni::Result<std::vector<Lease>> allocate(const AddRequest& request);
  /// DEL. @return false when the attachment held nothing.
  [[nodiscard]] cni::Result<bool> release(const AttachmentKey& key) { return release(key, {}, false); }
  /// DEL of `key` in network `network` (empty: any): a record of another network with the same key
  /// (an interface name that clashed with another network's attachment) is left alone; a record
  /// that names no network (written before networks were kept) is released unless `exact`.
  /// @return false when nothing was released.
  [[nodiscard]] cni::Result<bool> release(const AttachmentKey& key, const std::string& network, bool exact);
  /// CHECK: the leases `key` holds in the configured range sets (possibly fewer than the sets).
  [[nodiscard]] cni::Result<std::vector<Lease>> held(const AttachmentKey& key);
  /// GC of network `network`: releases every allocation of that network not in `valid`, and claims
  /// no record accounts for. With a BlockSource (a cluster pool's store, shared by the pool's
  /// networks) or in a GUID space (a GUID pool's store is shared by its networks too) only
  /// allocations recorded for `network` are considered; loans never are.
  [[nodiscard]] cni::Result<std::vector<Allocation>> gc(const std::vector<AttachmentKey>& valid,
                                                        const std::string& network);
  /// Releases every allocation whose network namespace is gone (os::NetnsLiveness::kGone), and
  /// claims no record accounts for. With `dryRun`, only reports them. A GUID space releases none.
  [[nodiscard]] cni::Result<std::vector<Allocation>> reclaim(bool dryRun = false);
  /// Size and use of each range set. Counting the addresses held in a range too large for a
  /// bitmap takes a scan of the store: prefer exhausted() when only that matters.
  [[nodiscard]] cni::Result<std::vector<SetUsage>> usage();
  /// The range sets where round-robin finds no free address (indexes into config.rangeSets).
  [[nodiscard]] cni::Result<std::vector<std::size_t>> exhausted();
  /// The addresses round-robin may hand out in range set `set` (every range, before blocks).
  [[nodiscard]] std::vector<Interval> allowed(std::size_t set) const;
  /// Every allocation, under the lock (for the cluster pool's pass: which blocks are empty).
  [[nodiscard]] cni::Result<std::vector<Allocation>> list();

  // LoanBook: the caller holds the store's lock (the cluster pool's periodic pass).
  [[nodiscard]] cni::Result<std::optional<net::IpAddress>> lend(std::size_t set, const std::string& borrower) override;
  [[nodiscard]] cni::Result<void> recordLent(const net::IpAddress& ip, const std::string& borrower) override;
  [[nodiscard]] cni::Result<void> returned(const net::IpAddress& ip) override;

  /// The store key under which a loan of `ip` is kept.
  [[nodiscard]] static AttachmentKey loanKey(const net::IpAddress& ip);

 private:
  struct Forbidden {
    Interval span;
    std::string reason;  // "the gateway of ipam.ranges[0][0]"
  };

  /// One address (or none yet) per range set, in range-set order.
  using SetAddresses = std::vector<std::optional<net::IpAddress>>;
  /// What an attachment's record lists: the address it holds in each range set, and the addresses
  /// it lists that nobody holds (a process died mid-ADD).
  struct Recorded {
    SetAddresses held;
    std::vector<net::IpAddress> unheld;
  };

  cni::Result<StoreLock> lockStore();
  std::optional<std::size_t> setOf(const net::IpAddress& ip) const;
  Lease leaseOf(const net::IpAddress& ip, std::size_t set) const;
  cni::Result<void> checkRequestable(const net::IpAddress& ip, const std::string& what, const PodRef& pod) const;
  cni::Result<void> takeFrom(const net::IpAddress& ip, const AttachmentKey& key, const std::string& what);

  // ADD's steps (allocator_add.cpp).
  /// What `rec` (the attachment `key`'s record, if any) lists, split by who holds it.
  cni::Result<Recorded> recordedOf(const std::optional<Allocation>& rec, const AttachmentKey& key);
  /// The requested addresses by range set: each must fall in a range set, at most one per set.
  cni::Result<SetAddresses> wantedPerSet(const AddRequest& req) const;
  /// The address range set `set` gets by name: the pod's reservation, else the requested address
  /// (which must be requestable); taken for the attachment and, in cluster mode, claimed.
  /// nullopt when neither names one.
  cni::Result<std::optional<net::IpAddress>> takeNamed(std::size_t set, const AddRequest& req,
                                                       const Reservation* reservation,
                                                       const std::optional<net::IpAddress>& wanted);
  /// After a process died mid-ADD: the address of range set `set` the attachment was about to get,
  /// when it may still have it.
  std::optional<net::IpAddress> resumable(std::size_t set, const std::vector<net::IpAddress>& unheld,
                                          const PodRef& pod) const;
  /// Round-robin's next free address of range set `set`, growing the node's blocks in cluster mode
  /// and releasing dead pods' allocations (not `key`'s) before giving up.
  cni::Result<net::IpAddress> freeAddress(std::size_t set, const AttachmentKey& key);
  /// The error for range set `set` having no free address (108).
  cni::Error noFreeAddress(std::size_t set);
  /// Records `chosen` as the attachment's allocation (keeping `existing`'s creation time) and saves
  /// the index.
  cni::Result<void> recordAllocation(const AddRequest& req, const std::optional<Allocation>& existing,
                                     const SetAddresses& chosen);
  std::vector<Lease> leasesOf(const SetAddresses& chosen) const;

  cni::Result<std::optional<net::IpAddress>> roundRobin(std::size_t set);
  cni::Result<std::optional<net::IpAddress>> firstFreeOwned(std::size_t set, std::size_t range, U128 lo, U128 hi);
  cni::Result<std::vector<Allocation>> releaseDead(const AttachmentKey* except, bool dryRun);
  /// Whether `a`'s network namespace is positively gone, so that what it holds may be taken back.
  /// Never for GUIDs: a VF keeps its GUID in a namespace that lingers after its path is gone, and
  /// only ibcni's own records say when it let the GUID go.
  bool reclaimable(const Allocation& a) const;
  cni::Result<std::vector<SetUsage>> usageLocked();
  std::string now() const;

  const IpamConfig& config_;
  /// What it hands out (spaceOf(config_)): the nouns of its messages.
  const IdentSpace& space_;
  Store& store_;
  os::NetnsChecker& netns_;
  Clock clock_;
  BlockSource* blocks_ = nullptr;
  /// allowed_[set][range]: the addresses round-robin may hand out, as sorted intervals.
  std::vector<std::vector<std::vector<Interval>>> allowed_;
  /// Per family (AF_INET, AF_INET6): never handed out, with the reason.
  std::map<int, std::vector<Forbidden>> forbidden_;
  /// Reserved address -> "namespace/name".
  std::map<net::IpAddress, std::string> reservedFor_;
};

/// Maps a Store error to a CNI error: 11 for a lock timeout, 5 for the rest; the message names
/// the file and says what to do.
[[nodiscard]] cni::Error storeError(const os::SysError& err, const std::string& action);

}  // namespace ibcni::ipam
