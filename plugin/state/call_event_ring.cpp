// SPDX-License-Identifier: Apache-2.0
#include "plugin/state/call_event_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include "ibcni/os/safe_path.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::state {

namespace {

using Word = std::uint64_t;

constexpr Word kMagic = 0x3156454943424931ULL;  // any constant; the file never leaves the node
constexpr Word kVersion = 1;
constexpr std::size_t kSlotWords = kCallEventSlotBytes / sizeof(Word);
constexpr std::size_t kHeaderWords = 3;  // magic, version|slot size, slot count|header size
constexpr std::size_t kCounterWord = 8;  // byte 64: its own cache line
constexpr std::size_t kNameWords = kCallEventNameBytes / sizeof(Word);
constexpr std::size_t kNameWord = 4;
constexpr std::size_t kChecksumWord = kNameWord + kNameWords;
constexpr std::size_t kEndWord = kSlotWords - 1;
static_assert(kChecksumWord + 1 == kEndWord, "the slot's words: seq, 3 fields, name, checksum, seq");
constexpr Word kTruncatedFlag = 1;

constexpr std::array<Word, kHeaderWords> kHeader = {
    kMagic, kVersion | (Word{kCallEventSlotBytes} << 32), Word{kCallEventSlots} | (Word{kCallEventSlotBytes} << 32)};

// Every access to the mapping goes through atomic_ref: other processes write it at the same time.
// The reader's mapping is read-only; an atomic load of an aligned word is a plain load there.
Word load(const Word& w, std::memory_order order) { return std::atomic_ref<Word>(const_cast<Word&>(w)).load(order); }
void store(Word& w, Word v, std::memory_order order) { std::atomic_ref<Word>(w).store(v, order); }

Word mix(Word h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

// Words 1..kChecksumWord-1 of a slot.
using Payload = std::array<Word, kChecksumWord - 1>;

Word checksum(Word seq, const Payload& p) {
  Word h = mix(seq ^ 0x9e3779b97f4a7c15ULL);
  for (Word w : p) {
    h = mix(h ^ w);
  }
  return h;
}

Payload encode(const CallEvent& e) {
  Payload p{};
  const std::size_t len = std::min(e.network.size(), kCallEventNameBytes);
  const Word flags = e.network.size() > kCallEventNameBytes ? kTruncatedFlag : 0;
  const double nanos = std::isfinite(e.durationSeconds) ? std::max(0.0, e.durationSeconds * 1e9) : 0.0;
  p[0] = static_cast<Word>(e.endUnixMillis);
  p[1] = nanos >= 1.8e19 ? ~Word{0} : static_cast<Word>(nanos);
  p[2] = Word{static_cast<std::uint32_t>(e.code)} | (static_cast<Word>(e.verb) << 32) | (flags << 40) |
         (Word{len} << 48);
  std::memcpy(&p[kNameWord - 1], e.network.data(), len);
  return p;
}

std::optional<CallEvent> decode(Word seq, const Payload& p) {
  const auto verb = static_cast<cni::Command>((p[2] >> 32) & 0xff);
  const std::size_t len = (p[2] >> 48) & 0xffff;
  const bool known = verb == cni::Command::kAdd || verb == cni::Command::kDel || verb == cni::Command::kCheck ||
                     verb == cni::Command::kGc || verb == cni::Command::kStatus;
  if (!known || len > kCallEventNameBytes) {
    return std::nullopt;
  }
  CallEvent e;
  e.seq = seq;
  e.endUnixMillis = static_cast<std::int64_t>(p[0]);
  e.durationSeconds = static_cast<double>(p[1]) / 1e9;
  e.code = static_cast<int>(static_cast<std::uint32_t>(p[2]));
  e.verb = verb;
  e.networkTruncated = ((p[2] >> 40) & kTruncatedFlag) != 0;
  e.network.assign(reinterpret_cast<const char*>(&p[kNameWord - 1]), len);
  return e;
}

// The mapping of a whole ring file.
class Mapping {
 public:
  static os::SysResult<Mapping> map(int fd, bool writable, const std::string& shown) {
    void* base = ::mmap(nullptr, kCallEventFileBytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      return os::sysFail(errno, "mmap " + shown);
    }
    return Mapping(base);
  }
  Mapping(Mapping&& other) noexcept : base_(std::exchange(other.base_, nullptr)) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  Mapping& operator=(Mapping&&) = delete;
  ~Mapping() {
    if (base_ != nullptr) {
      ::munmap(base_, kCallEventFileBytes);
    }
  }
  [[nodiscard]] Word* words() const { return static_cast<Word*>(base_); }
  [[nodiscard]] Word* slot(Word seq) const { return words() + kSlotWords * (1 + (seq - 1) % kCallEventSlots); }

 private:
  explicit Mapping(void* base) : base_(base) {}
  void* base_;
};

// A regular file of the ring's size with the ring's header.
bool isRing(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::size_t>(st.st_size) != kCallEventFileBytes) {
    return false;
  }
  std::array<Word, kHeaderWords> header{};
  return ::pread(fd, header.data(), sizeof header, 0) == static_cast<ssize_t>(sizeof header) && header == kHeader;
}

// A fresh ring renamed to `events`: over a file that is not a ring (`replace`), or only where there
// is none yet (another writer's fresh ring, made meanwhile, wins: it is opened instead).
os::SysResult<os::UniqueFd> freshRing(int dirFd, const std::string& shown, bool replace) {
  const std::string tmp = std::string(kCallEventsFile) + ".tmp." + std::to_string(::getpid());
  ::unlinkat(dirFd, tmp.c_str(), 0);  // left by a killed process of the same pid
  os::UniqueFd fd(::openat(dirFd, tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    return os::sysFail(errno, "create " + shown + ".tmp");
  }
  const bool made = ::ftruncate(fd.get(), kCallEventFileBytes) == 0 &&
                    ::pwrite(fd.get(), kHeader.data(), sizeof kHeader, 0) == static_cast<ssize_t>(sizeof kHeader);
  const int err = made ? 0 : errno;
  if (made && ::renameat2(dirFd, tmp.c_str(), dirFd, kCallEventsFile, replace ? 0 : RENAME_NOREPLACE) == 0) {
    return fd;
  }
  const int renameErr = made ? errno : err;
  ::unlinkat(dirFd, tmp.c_str(), 0);
  if (renameErr == EEXIST) {
    os::UniqueFd theirs(::openat(dirFd, kCallEventsFile, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (theirs && isRing(theirs.get())) {
      return theirs;
    }
  }
  return os::sysFail(renameErr, "make " + shown);
}

// The ring to append to: the one there, or a fresh one in its place.
os::SysResult<os::UniqueFd> openRing(int dirFd, const std::string& shown) {
  os::UniqueFd fd(::openat(dirFd, kCallEventsFile, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (fd && isRing(fd.get())) {
    return fd;
  }
  // ELOOP: a symbolic link; ENXIO and the like: not a regular file. Anything else is a real failure.
  const int err = fd ? 0 : errno;
  if (!fd && err != ENOENT && err != ELOOP && err != ENXIO && err != ENODEV) {
    return os::sysFail(err, "open " + shown);
  }
  return freshRing(dirFd, shown, err != ENOENT);
}

enum class SlotState { kPublished, kPending, kLost };

// Slot `seq` as a seqlock reader sees it.
SlotState readSlot(const Mapping& m, Word seq, std::optional<CallEvent>& out) {
  const Word* slot = m.slot(seq);
  const Word end = load(slot[kEndWord], std::memory_order_acquire);
  if (end < seq) {
    return SlotState::kPending;
  }
  Payload p{};
  for (std::size_t i = 0; i < p.size(); ++i) {
    p[i] = load(slot[i + 1], std::memory_order_relaxed);
  }
  const Word sum = load(slot[kChecksumWord], std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  const Word begin = load(slot[0], std::memory_order_relaxed);
  if (end != seq || begin != seq || sum != checksum(seq, p)) {
    return SlotState::kLost;
  }
  out = decode(seq, p);
  return out ? SlotState::kPublished : SlotState::kLost;
}

void walk(const Mapping& m, std::uint64_t from, CallEventBatch& b) {
  const Word head = load(m.words()[kCounterWord], std::memory_order_acquire);
  if (from == 0 || from > head + 1) {
    from = 1;
  }
  const Word oldest = head > kCallEventSlots ? head - kCallEventSlots + 1 : 1;
  const Word start = std::max<Word>(from, oldest);
  b.lost = start - from;
  // A sequence taken but not yet published is most likely being written right now: an append takes
  // microseconds. A writer that was killed never publishes; the waiting has a budget per read.
  constexpr auto kPause = std::chrono::microseconds(50);
  int pausesLeft = 200;
  for (Word s = start; s <= head; ++s) {
    std::optional<CallEvent> e;
    SlotState state = readSlot(m, s, e);
    for (int tries = 0; state == SlotState::kPending && tries < 40 && pausesLeft > 0; ++tries, --pausesLeft) {
      std::this_thread::sleep_for(kPause);
      state = readSlot(m, s, e);
    }
    if (state == SlotState::kPublished) {
      b.events.push_back(std::move(*e));
    } else {
      ++b.lost;
    }
  }
  b.next = head + 1;
}

}  // namespace

os::SysResult<void> FileCallEvents::append(const std::string& stateDir, const CallEvent& event) {
  auto dir = os::openDirectory(stateDir, os::DirPolicy{.trustedOwners = true, .create = true, .mode = 0700});
  if (!dir) {
    return std::unexpected(dir.error());
  }
  const std::string shown = stateDir + "/" + kCallEventsFile;
  auto fd = openRing(dir->get(), shown);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  auto m = Mapping::map(fd->get(), true, shown);
  if (!m) {
    return std::unexpected(m.error());
  }
  const Word seq = std::atomic_ref<Word>(m->words()[kCounterWord]).fetch_add(1, std::memory_order_acq_rel) + 1;
  const Payload p = encode(event);
  Word* slot = m->slot(seq);
  store(slot[0], seq, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t i = 0; i < p.size(); ++i) {
    store(slot[i + 1], p[i], std::memory_order_relaxed);
  }
  store(slot[kChecksumWord], checksum(seq, p), std::memory_order_relaxed);
  store(slot[kEndWord], seq, std::memory_order_release);
  return {};
}

cni::Result<CallEventBatch> readCallEvents(const std::string& stateDir, std::uint64_t from) {
  CallEventBatch b;
  b.next = from;
  const std::string shown = stateDir + "/" + kCallEventsFile;
  auto dir = os::openDirectory(stateDir, os::DirPolicy{.trustedOwners = true, .create = false});
  if (!dir) {
    if (dir.error().err == ENOENT) {
      return b;
    }
    return cni::fail(cni::Errc::kIoFailure, "cannot open the state directory " + stateDir + " to read " + shown,
                     dir.error().describe());
  }
  os::UniqueFd fd(::openat(dir->get(), kCallEventsFile, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  const int openErr = fd ? 0 : errno;
  if (!fd && openErr != ELOOP) {
    if (openErr == ENOENT) {
      return b;
    }
    return cni::fail(cni::Errc::kIoFailure, "cannot open " + shown, os::SysError{openErr, "open " + shown, {}}.describe());
  }
  if (!fd || !isRing(fd.get())) {
    return cni::fail(cni::Errc::kIoFailure,
                     shown + " is not an event ring (a symbolic link, another file, or another size or version)",
                     "the plugin's next call replaces it with an empty ring");
  }
  auto m = Mapping::map(fd.get(), false, shown);
  if (!m) {
    return cni::fail(cni::Errc::kIoFailure, "cannot read " + shown, m.error().describe());
  }
  walk(*m, from, b);
  return b;
}

}  // namespace ibcni::state
