// SPDX-License-Identifier: Apache-2.0
// The call-event ring (plugin/state/call_event_ring): round trip, wrap-around, a slot torn as a
// killed writer leaves it, a foreign file replaced by the writer, appends from many processes at
// once, and processes killed while appending.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "plugin/state/call_event_ring.h"
#include "support/temp_dir.h"

namespace ibcni::state {
namespace {

class CallEventRingTest : public testing::TempDirTest {
 protected:
  CallEventRingTest() : TempDirTest("ibcni-events") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp());
    stateDir_ = dir_ + "/state";
  }
  std::string ringPath() const { return stateDir_ + "/" + kCallEventsFile; }

  static CallEvent event(cni::Command verb, const std::string& network, int code, double seconds = 0.25) {
    CallEvent e;
    e.endUnixMillis = 1700000000000 + code;
    e.verb = verb;
    e.network = network;
    e.code = code;
    e.durationSeconds = seconds;
    return e;
  }
  void append(const CallEvent& e) {
    auto r = FileCallEvents().append(stateDir_, e);
    ASSERT_TRUE(r) << r.error().describe();
  }
  CallEventBatch read(std::uint64_t from) {
    auto b = readCallEvents(stateDir_, from);
    EXPECT_TRUE(b) << b.error().msg << ": " << b.error().details;
    return b ? *b : CallEventBatch{};
  }

  /// The ring's words, mapped read-write, as another process sees them.
  struct Mapped {
    explicit Mapped(const std::string& path) {
      int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
      base = static_cast<std::uint64_t*>(
          ::mmap(nullptr, kCallEventFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
      ::close(fd);
    }
    ~Mapped() { ::munmap(base, kCallEventFileBytes); }
    std::uint64_t* slot(std::uint64_t seq) const { return base + 16 * (1 + (seq - 1) % kCallEventSlots); }
    std::uint64_t& counter() const { return base[8]; }
    std::uint64_t* base;
  };

  std::string stateDir_;
};

TEST_F(CallEventRingTest, NoRingFileIsAnEmptyBatch) {
  auto b = readCallEvents(stateDir_, 7);
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->events.empty());
  EXPECT_EQ(b->next, 7u);
  EXPECT_EQ(b->lost, 0u);
}

TEST_F(CallEventRingTest, RoundTripKeepsEveryField) {
  append(event(cni::Command::kAdd, "ib-net", 0, 0.125));
  append(event(cni::Command::kAdd, "ib-net", 7, 0.5));
  append(event(cni::Command::kDel, "other", 11, 1.0));
  append(event(cni::Command::kStatus, "", 999, 0.0));
  struct stat st {};
  ASSERT_EQ(::lstat(ringPath().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(static_cast<std::size_t>(st.st_size), kCallEventFileBytes);

  CallEventBatch b = read(0);
  ASSERT_EQ(b.events.size(), 4u);
  EXPECT_EQ(b.lost, 0u);
  EXPECT_EQ(b.next, 5u);
  const auto& e = b.events[1];
  EXPECT_EQ(e.seq, 2u);
  EXPECT_EQ(e.verb, cni::Command::kAdd);
  EXPECT_EQ(e.network, "ib-net");
  EXPECT_EQ(e.code, 7);
  EXPECT_EQ(e.endUnixMillis, 1700000000007);
  EXPECT_DOUBLE_EQ(e.durationSeconds, 0.5);
  EXPECT_FALSE(e.networkTruncated);
  EXPECT_EQ(b.events[2].verb, cni::Command::kDel);
  EXPECT_EQ(b.events[2].code, 11);
  EXPECT_EQ(b.events[3].verb, cni::Command::kStatus);
  EXPECT_EQ(b.events[3].network, "");
  EXPECT_EQ(b.events[3].code, 999);

  // From a cursor: only what came after it.
  append(event(cni::Command::kCheck, "ib-net", 0));
  CallEventBatch more = read(b.next);
  ASSERT_EQ(more.events.size(), 1u);
  EXPECT_EQ(more.events[0].seq, 5u);
  EXPECT_EQ(more.events[0].verb, cni::Command::kCheck);
  EXPECT_EQ(more.lost, 0u);
  EXPECT_EQ(read(more.next).events.size(), 0u);
}

TEST_F(CallEventRingTest, LongNetworkNameIsTruncatedAndMarked) {
  const std::string name(120, 'n');
  append(event(cni::Command::kAdd, name, 0));
  CallEventBatch b = read(0);
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(b.events[0].network, name.substr(0, kCallEventNameBytes));
  EXPECT_TRUE(b.events[0].networkTruncated);
}

TEST_F(CallEventRingTest, WrapAroundKeepsTheLastSlotsAndCountsTheRestLost) {
  const int extra = 10;
  for (int i = 1; i <= static_cast<int>(kCallEventSlots) + extra; ++i) {
    append(event(cni::Command::kAdd, "n" + std::to_string(i), i));
  }
  CallEventBatch b = read(0);
  ASSERT_EQ(b.events.size(), kCallEventSlots);
  EXPECT_EQ(b.lost, static_cast<std::uint64_t>(extra));
  EXPECT_EQ(b.events.front().seq, static_cast<std::uint64_t>(extra + 1));
  EXPECT_EQ(b.events.front().network, "n" + std::to_string(extra + 1));
  EXPECT_EQ(b.events.back().code, static_cast<int>(kCallEventSlots) + extra);
  // A cursor the ring has lapped: what was overwritten since counts lost.
  CallEventBatch fromTwo = read(2);
  EXPECT_EQ(fromTwo.lost, static_cast<std::uint64_t>(extra - 1));
  EXPECT_EQ(fromTwo.events.size(), kCallEventSlots);
}

TEST_F(CallEventRingTest, SlotTornByAKilledWriterIsSkippedAndCountedLost) {
  append(event(cni::Command::kAdd, "first", 1));
  append(event(cni::Command::kAdd, "second", 2));
  {
    // What a writer killed midway leaves: a sequence taken, its first word and half the payload.
    Mapped m(ringPath());
    const std::uint64_t seq = ++m.counter();
    ASSERT_EQ(seq, 3u);
    m.slot(seq)[0] = seq;
    m.slot(seq)[1] = 42;
    m.slot(seq)[3] = 0x0001000000000000ULL;  // ADD, name length 1: looks like an event
  }
  append(event(cni::Command::kDel, "fourth", 4));
  {
    // A slot whose two sequence words agree but whose payload two writers mixed.
    Mapped m(ringPath());
    m.slot(2)[4] ^= 0x5a;
  }
  CallEventBatch b = read(0);
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(b.events[0].network, "first");
  EXPECT_EQ(b.events[1].seq, 4u);
  EXPECT_EQ(b.events[1].network, "fourth");
  EXPECT_EQ(b.lost, 2u);
  EXPECT_EQ(b.next, 5u);
}

TEST_F(CallEventRingTest, ForeignFileIsReportedThenReplacedByTheWriter) {
  std::filesystem::create_directories(stateDir_);
  std::ofstream(ringPath()) << "not a ring";
  auto bad = readCallEvents(stateDir_, 0);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().msg.find(ringPath()), std::string::npos) << bad.error().msg;

  append(event(cni::Command::kAdd, "after", 0));
  CallEventBatch b = read(0);
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(b.events[0].seq, 1u);
  EXPECT_EQ(b.events[0].network, "after");
}

TEST_F(CallEventRingTest, SymbolicLinkIsReplacedAndItsTargetUntouched) {
  std::filesystem::create_directories(stateDir_);
  const std::string target = dir_ + "/target";
  std::ofstream(target) << "keep me";
  std::filesystem::create_symlink(target, ringPath());
  EXPECT_FALSE(readCallEvents(stateDir_, 0));

  append(event(cni::Command::kDel, "x", 0));
  EXPECT_FALSE(std::filesystem::is_symlink(ringPath()));
  std::ifstream in(target);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "keep me");
  EXPECT_EQ(read(0).events.size(), 1u);
}

TEST_F(CallEventRingTest, RingOfAnotherSizeIsReplaced) {
  append(event(cni::Command::kAdd, "old", 0));
  ASSERT_EQ(::truncate(ringPath().c_str(), static_cast<off_t>(kCallEventFileBytes / 2)), 0);
  EXPECT_FALSE(readCallEvents(stateDir_, 0));
  append(event(cni::Command::kAdd, "new", 0));
  CallEventBatch b = read(0);
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(b.events[0].network, "new");
}

// Appends `count` events as process `child`: network "p<child>", code = the event's index.
[[noreturn]] void appendAsChild(const std::string& stateDir, int child, int count) {
  FileCallEvents sink;
  for (int i = 0; count < 0 || i < count; ++i) {
    CallEvent e;
    e.verb = cni::Command::kAdd;
    e.network = "p" + std::to_string(child) + "-" + std::to_string(i);
    e.code = i;
    e.endUnixMillis = i;
    e.durationSeconds = i * 0.001;
    if (!sink.append(stateDir, e)) {
      ::_exit(1);
    }
  }
  ::_exit(0);
}

TEST_F(CallEventRingTest, ConcurrentAppendsFromManyProcessesAreAllKept) {
  constexpr int kChildren = 8;
  constexpr int kEach = 200;
  static_assert(kChildren * kEach <= static_cast<int>(kCallEventSlots));
  std::vector<pid_t> pids;
  for (int c = 0; c < kChildren; ++c) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      appendAsChild(stateDir_, c, kEach);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  CallEventBatch b = read(0);
  EXPECT_EQ(b.lost, 0u);
  ASSERT_EQ(b.events.size(), static_cast<std::size_t>(kChildren * kEach));
  std::set<std::uint64_t> seqs;
  std::set<std::string> names;
  for (const auto& e : b.events) {
    seqs.insert(e.seq);
    names.insert(e.network);
    EXPECT_EQ(e.network.substr(e.network.find('-') + 1), std::to_string(e.code));
  }
  EXPECT_EQ(seqs.size(), b.events.size());
  EXPECT_EQ(names.size(), b.events.size());
}

TEST_F(CallEventRingTest, ProcessesKilledWhileAppendingLeaveNoTornEvent) {
  append(event(cni::Command::kAdd, "start", 0));
  for (int round = 0; round < 20; ++round) {
    std::vector<pid_t> pids;
    for (int c = 0; c < 4; ++c) {
      pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        appendAsChild(stateDir_, c, -1);
      }
      pids.push_back(pid);
    }
    ::usleep(2000 + 500 * round);
    for (pid_t pid : pids) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  auto b = readCallEvents(stateDir_, 0);
  ASSERT_TRUE(b) << b.error().msg;
  EXPECT_GT(b->events.size(), 0u);
  for (const auto& e : b->events) {
    if (e.network == "start") {
      continue;
    }
    ASSERT_EQ(e.network.substr(e.network.find('-') + 1), std::to_string(e.code)) << e.seq;
    EXPECT_EQ(e.endUnixMillis, e.code);
    EXPECT_NEAR(e.durationSeconds, e.code * 0.001, 1e-9);
    EXPECT_EQ(e.verb, cni::Command::kAdd);
  }
  // The ring still takes appends.
  const std::uint64_t next = b->next;
  append(event(cni::Command::kDel, "after", 0));
  CallEventBatch after = read(next);
  ASSERT_EQ(after.events.size(), 1u);
  EXPECT_EQ(after.events[0].network, "after");
}

}  // namespace
}  // namespace ibcni::state
