// SPDX-License-Identifier: Apache-2.0
// What the byte-level netlink tests share: a minimal, independent reader of netlink messages
// (host byte order, as netlink is), the normalisation of sequence number and port id, and the
// capture of what iproute2 sends (`strace -e write=all` hex dumps).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sched.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

namespace ibcni::testing::nlbytes {

using Bytes = std::vector<std::uint8_t>;

template <class T>
inline T load(const Bytes& b, std::size_t at) {
  T v{};
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

template <class T>
inline void store(Bytes& b, std::size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

struct Attr {
  std::uint16_t rawType = 0;  // with the NLA_F_* bits
  std::size_t at = 0;         // offset of the attribute header in the message
  std::size_t len = 0;        // nla_len (header included)
  [[nodiscard]] std::uint16_t type() const { return rawType & 0x3fff; }
  [[nodiscard]] std::size_t payload() const { return at + 4; }
};

// The attributes in [begin, end); nullopt when they do not tile the range exactly.
inline std::optional<std::vector<Attr>> attrsIn(const Bytes& b, std::size_t begin, std::size_t end) {
  std::vector<Attr> out;
  std::size_t at = begin;
  while (at < end) {
    if (at + 4 > end) {
      return std::nullopt;
    }
    Attr a{load<std::uint16_t>(b, at + 2), at, load<std::uint16_t>(b, at)};
    if (a.len < 4 || at + a.len > end) {
      return std::nullopt;
    }
    out.push_back(a);
    at += (a.len + 3) & ~std::size_t{3};
  }
  if (at != end) {
    return std::nullopt;
  }
  return out;
}

// nlmsg_seq and nlmsg_pid: iproute2 numbers its requests from the time of day and leaves the
// port id 0; our socket fills in its own sequence number and port id when it sends. Neither
// says anything about the request.
inline void clearSeqAndPid(Bytes& b) {
  store<std::uint32_t>(b, 8, 0);
  store<std::uint32_t>(b, 12, 0);
}

// `name` found in $PATH (or the usual sbin directories, which a non-login root shell may lack).
inline std::string findProgram(const std::string& name) {
  std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) {
      continue;
    }
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

// Every buffer that `strace -e write=all` dumped, one per sendmsg/sendto call, in order.
// A dump looks like
//   sendmsg(3, {...}, 0) = 52
//    * 52 bytes in buffer 0
//    | 00000  34 00 00 00 10 00 05 00  b3 47 01 6b 00 00 00 00  4........G.k.... |
// (with -f a line may start with "[pid N] "). Buffers of one call are concatenated.
inline std::vector<Bytes> dumpedBuffers(const std::string& straceOutput) {
  std::vector<Bytes> out;
  std::istringstream lines(straceOutput);
  std::string line;
  bool inCall = false;
  while (std::getline(lines, line)) {
    if (line.find("sendmsg(") != std::string::npos || line.find("sendto(") != std::string::npos) {
      out.emplace_back();
      inCall = true;
      continue;
    }
    const std::size_t bar = line.find(" | ");
    if (!inCall || bar == std::string::npos || line.find(" * ") != std::string::npos) {
      continue;
    }
    // " | OOOOO  hh hh hh hh hh hh hh hh  hh hh hh hh hh hh hh hh  ascii |": the hex area is
    // the 49 characters after the offset and its two spaces.
    const std::size_t hexAt = bar + 3 + 5 + 2;
    if (line.size() < hexAt) {
      continue;
    }
    std::istringstream hex(line.substr(hexAt, 49));
    std::string tok;
    while (hex >> tok) {
      if (tok.size() == 2 && std::isxdigit(static_cast<unsigned char>(tok[0])) != 0 &&
          std::isxdigit(static_cast<unsigned char>(tok[1])) != 0) {
        out.back().push_back(static_cast<std::uint8_t>(std::stoul(tok, nullptr, 16)));
      }
    }
  }
  std::erase_if(out, [](const Bytes& b) { return b.empty(); });
  return out;
}

inline std::string hex(const Bytes& b) {
  std::string out;
  char buf[4];
  for (std::size_t i = 0; i < b.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%02x", b[i]);
    out += buf;
    out += (i % 16 == 15) ? "\n" : " ";
  }
  return out;
}

/// What `strace ... <command>` run inside a network namespace wrote.
struct StraceRun {
  bool ran = false;    ///< strace started and the command exited (any status)
  std::string error;   ///< why it did not, when !ran
  std::string output;  ///< strace's trace: every sendmsg/sendto with a hex dump of its buffers
};

/// Runs `command` under strace inside the network namespace `netnsFd` and returns the trace of
/// what it sent. `-e write=all` adds a hex dump of every buffer sent, the raw bytes (the -xx text
/// shows the nlmsghdr decoded into fields, not as bytes); instead of `ip -n NS` (which wants a
/// name under /run/netns) the child enters the namespace itself. The command's own exit status
/// does not matter (the kernel may refuse the request; only the bytes are of interest).
inline StraceRun straceSends(const std::string& strace, int netnsFd, const std::vector<std::string>& command) {
  StraceRun run;
  const char* tmp = std::getenv("TMPDIR");
  std::string outPath = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ibcni-strace-XXXXXX";
  const int outFd = ::mkostemp(outPath.data(), O_CLOEXEC);
  if (outFd < 0) {
    run.error = std::string("mkostemp: ") + std::strerror(errno);
    return run;
  }
  ::close(outFd);
  std::vector<std::string> argv{strace, "-f", "-o", outPath, "-e", "trace=sendmsg,sendto", "-e", "write=all",
                                "-xx", "-s", "65535"};
  argv.insert(argv.end(), command.begin(), command.end());
  std::vector<char*> cargv;
  for (auto& a : argv) {
    cargv.push_back(a.data());
  }
  cargv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    run.error = std::string("fork: ") + std::strerror(errno);
    ::unlink(outPath.c_str());
    return run;
  }
  if (pid == 0) {
    const int devNull = ::open("/dev/null", O_WRONLY);
    if (::setns(netnsFd, CLONE_NEWNET) != 0 || devNull < 0 || ::dup2(devNull, STDOUT_FILENO) < 0 ||
        ::dup2(devNull, STDERR_FILENO) < 0) {
      ::_exit(126);
    }
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::ifstream in(outPath);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(outPath.c_str());
  run.output = text.str();
  // 126/127: the child could not enter the namespace or strace could not be run.
  run.ran = WIFEXITED(status) && WEXITSTATUS(status) != 126 && WEXITSTATUS(status) != 127;
  if (!run.ran) {
    run.error = "strace did not run";
  }
  return run;
}

/// The sizes of struct nlmsghdr and struct ifinfomsg, written out rather than taken from the
/// kernel's headers (the tests check them against sizeof).
inline constexpr std::size_t kNlmsgHdrLen = 16;
inline constexpr std::size_t kIfinfomsgLen = 16;

/// The nlmsghdr and ifinfomsg fields of an RTM_*LINK message.
struct LinkHeader {
  std::uint16_t type = 0;
  std::uint16_t flags = 0;
  std::uint8_t family = 0;
  std::int32_t ifindex = 0;
  std::uint32_t ifiFlags = 0;
  std::uint32_t ifiChange = 0;
};

/// Reads the headers of the link message `b` into `h`. False, with `why`, when `b` is shorter than
/// both, its nlmsg_len is not its size, or the ifinfomsg's padding or ifi_type is not zero.
inline bool readLinkHeader(const Bytes& b, LinkHeader& h, std::string* why) {
  if (b.size() < kNlmsgHdrLen + kIfinfomsgLen) {
    *why = "shorter than nlmsghdr + ifinfomsg";
    return false;
  }
  if (load<std::uint32_t>(b, 0) != b.size()) {
    *why = "nlmsg_len " + std::to_string(load<std::uint32_t>(b, 0)) + " != " + std::to_string(b.size()) + " bytes";
    return false;
  }
  h.type = load<std::uint16_t>(b, 4);
  h.flags = load<std::uint16_t>(b, 6);
  h.family = b[kNlmsgHdrLen];
  h.ifindex = load<std::int32_t>(b, kNlmsgHdrLen + 4);
  h.ifiFlags = load<std::uint32_t>(b, kNlmsgHdrLen + 8);
  h.ifiChange = load<std::uint32_t>(b, kNlmsgHdrLen + 12);
  if (b[kNlmsgHdrLen + 1] != 0 || load<std::uint16_t>(b, kNlmsgHdrLen + 2) != 0) {
    *why = "ifinfomsg padding or ifi_type not zero";
    return false;
  }
  return true;
}

/// Expects the headers of one of our link requests: RTM_NEWLINK with `flags`, AF_UNSPEC, `ifindex`,
/// and neither ifi_flags nor ifi_change.
inline void expectNewLinkHeader(const LinkHeader& h, std::uint16_t flags, std::int32_t ifindex) {
  EXPECT_EQ(h.type, RTM_NEWLINK);
  EXPECT_EQ(h.flags, flags);
  EXPECT_EQ(h.family, AF_UNSPEC);
  EXPECT_EQ(h.ifindex, ifindex);
  EXPECT_EQ(h.ifiFlags, 0u);
  EXPECT_EQ(h.ifiChange, 0u);
}

}  // namespace ibcni::testing::nlbytes
