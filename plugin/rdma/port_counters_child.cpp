// SPDX-License-Identifier: Apache-2.0
#include "plugin/rdma/port_counters_child.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <utility>

#include "ibcni/os/child_process.h"
#include "ibcni/os/file_io.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::rdma {
namespace {

/// Far more than any port's counters (about 40 lines of 40 bytes each).
constexpr std::size_t kMaxAnswerBytes = 1U << 20;

std::string oneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

std::string nameText(std::string name) {
  std::replace(name.begin(), name.end(), '\n', '?');
  std::replace(name.begin(), name.end(), ' ', '?');
  return name;
}

template <class T>
std::optional<T> parseNumber(std::string_view text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

/// "NAME VALUE" into `map`. @return false when malformed.
bool addCounter(std::string_view rest, std::map<std::string, std::uint64_t>& map) {
  const auto space = rest.rfind(' ');
  if (space == std::string_view::npos || space == 0) {
    return false;
  }
  auto value = parseNumber<std::uint64_t>(rest.substr(space + 1));
  return value && map.emplace(std::string(rest.substr(0, space)), *value).second;
}

/// One line of a port that was read ("state", "counter", "hw", "skipped").
bool addFact(std::string_view key, std::string_view rest, PortCounters& port) {
  if (key == "state") {
    port.state = parseNumber<std::uint32_t>(rest);
    return port.state.has_value();
  }
  if (key == "counter") {
    return addCounter(rest, port.counters);
  }
  if (key == "hw") {
    return addCounter(rest, port.hwCounters);
  }
  if (key == "skipped" && !rest.empty()) {
    port.skipped.emplace_back(rest);
    return true;
  }
  return false;
}

/// The first line of an item: "ok DEV PORT" or "error CODE MSG".
std::optional<cni::Result<PortCounters>> beginItem(std::string_view key, std::string_view rest) {
  const auto space = rest.find(' ');
  if (space == std::string_view::npos || space == 0) {
    return std::nullopt;
  }
  if (key == "ok") {
    auto port = parseNumber<std::uint32_t>(rest.substr(space + 1));
    if (!port) {
      return std::nullopt;
    }
    PortCounters out;
    out.device = std::string(rest.substr(0, space));
    out.port = *port;
    return cni::Result<PortCounters>(std::move(out));
  }
  auto code = parseNumber<std::uint32_t>(rest.substr(0, space));
  if (key != "error" || !code) {
    return std::nullopt;
  }
  return cni::Result<PortCounters>(cni::fail(static_cast<cni::Errc>(*code), std::string(rest.substr(space + 1))));
}

/// One more line of the item `item` (begun); sets `done` on "end". @return false when malformed.
bool continueItem(std::string_view key, std::string_view rest, cni::Result<PortCounters>& item, bool& done) {
  if (key == "end" && rest.empty()) {
    done = true;
    return true;
  }
  if (!item) {
    item.error().details = std::string(rest);
    return key == "details";
  }
  return addFact(key, rest, *item);
}

// --- the child -----------------------------------------------------------------------------------

/// A mount namespace of the child's own with a sysfs of the netns it is in on `root`.
os::SysResult<void> mountFreshSysfs(const std::string& root) {
  if (::unshare(CLONE_NEWNS) != 0) {
    return os::sysFail(errno, "unshare(CLONE_NEWNS)");
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return os::sysFail(errno, "make / private");
  }
  if (::mount("sysfs", root.c_str(), "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    return os::sysFail(errno, "mount sysfs on " + root);
  }
  return {};
}

std::vector<cni::Result<PortCounters>> allFailed(std::size_t n, const cni::Error& err) {
  return std::vector<cni::Result<PortCounters>>(n, std::unexpected(err));
}

/// What the child reads, after joining the netns open as `nsFd`.
std::vector<cni::Result<PortCounters>> readInChild(int nsFd, const std::string& netnsPath,
                                                   const std::vector<PortRef>& ports, const CounterSource& source) {
  if (::setns(nsFd, CLONE_NEWNET) != 0) {
    return allFailed(ports.size(), cni::sysError(cni::Errc::kNetnsFailure,
                                                 "cannot enter network namespace " + cni::quoted(netnsPath) +
                                                     " to read RDMA counters",
                                                 os::SysError{errno, "setns " + netnsPath, {}}));
  }
  ::close(nsFd);
  if (source.mountFreshSysfs) {
    if (auto mounted = mountFreshSysfs(source.netnsSysfsRoot); !mounted) {
      return allFailed(ports.size(), cni::sysError(cni::Errc::kNetnsFailure,
                                                   "cannot mount the sysfs of network namespace " +
                                                       cni::quoted(netnsPath) + " (needs CAP_SYS_ADMIN)",
                                                   mounted.error()));
    }
  }
  std::vector<cni::Result<PortCounters>> out;
  for (const auto& port : ports) {
    out.push_back(readPortCountersAt(source.netnsSysfsRoot, port.device, port.port));
  }
  return out;
}

/// The forked child: never returns (no destructor of the parent's objects runs here).
[[noreturn]] void runChild(pid_t parent, int nsFd, int outFd, const std::string& netnsPath,
                           const std::vector<PortRef>& ports, const CounterSource& source) {
  if (!os::dieWithParent(parent)) {
    ::_exit(3);  // the parent died before prctl
  }
  try {
    (void)os::writeAll(outFd, encodePortCounters(readInChild(nsFd, netnsPath, ports, source)), "answer");
  } catch (...) {
    ::_exit(2);
  }
  ::_exit(0);
}

}  // namespace

std::string encodePortCounters(const std::vector<cni::Result<PortCounters>>& results) {
  std::string out;
  for (const auto& r : results) {
    if (!r) {
      out += "error " + std::to_string(static_cast<std::uint32_t>(r.error().code)) + " " + oneLine(r.error().msg) +
             "\ndetails " + oneLine(r.error().details) + "\nend\n";
      continue;
    }
    out += "ok " + nameText(r->device) + " " + std::to_string(r->port) + "\n";
    if (r->state) {
      out += "state " + std::to_string(*r->state) + "\n";
    }
    for (const auto& [name, value] : r->counters) {
      out += "counter " + nameText(name) + " " + std::to_string(value) + "\n";
    }
    for (const auto& [name, value] : r->hwCounters) {
      out += "hw " + nameText(name) + " " + std::to_string(value) + "\n";
    }
    for (const auto& name : r->skipped) {
      out += "skipped " + nameText(name) + "\n";
    }
    out += "end\n";
  }
  return out;
}

std::optional<std::vector<cni::Result<PortCounters>>> decodePortCounters(std::string_view text) {
  std::vector<cni::Result<PortCounters>> out;
  std::optional<cni::Result<PortCounters>> item;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    if (eol == std::string_view::npos) {
      return std::nullopt;  // a line cut short: the child died while writing
    }
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    const auto space = line.find(' ');
    const std::string_view key = line.substr(0, space);
    const std::string_view rest = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    if (!item) {
      item = beginItem(key, rest);
      if (!item) {
        return std::nullopt;
      }
      continue;
    }
    bool done = false;
    if (!continueItem(key, rest, *item, done)) {
      return std::nullopt;
    }
    if (done) {
      out.push_back(std::move(*item));
      item.reset();
    }
  }
  if (item) {
    return std::nullopt;
  }
  return out;
}

std::vector<cni::Result<PortCounters>> readInNetnsChild(const os::Netns& ns, const std::string& netnsPath,
                                                        const std::vector<PortRef>& ports,
                                                        const CounterSource& source) {
  const std::string what = "RDMA counters child in network namespace " + cni::quoted(netnsPath);
  auto failed = [&](cni::Errc code, const os::SysError& err) {
    return allFailed(ports.size(), cni::sysError(code, "cannot read RDMA counters in network namespace " +
                                                           cni::quoted(netnsPath), err));
  };
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
    return failed(cni::Errc::kIoFailure, os::SysError{errno, "pipe2 for " + what, {}});
  }
  os::UniqueFd readEnd(fds[0]);
  os::UniqueFd writeEnd(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + source.timeout;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    return failed(cni::Errc::kIoFailure, os::SysError{errno, "fork for " + what, {}});
  }
  if (pid == 0) {
    ::close(readEnd.get());
    runChild(parent, ns.fd(), writeEnd.get(), netnsPath, ports, source);
  }
  writeEnd.reset();
  auto answer = os::readChildAnswer(readEnd.get(), deadline, kMaxAnswerBytes, what);
  if (!answer) {
    os::killAndReapChild(pid);
    return failed(cni::Errc::kIoFailure, answer.error());
  }
  const int status = os::reapChild(pid);
  auto decoded = decodePortCounters(*answer);
  if (!decoded || decoded->size() != ports.size()) {
    return failed(cni::Errc::kIoFailure,
                  os::SysError{EPROTO,
                               what + ": child " + os::describeWaitStatus(status) + " without a well-formed answer (" +
                                   std::to_string(answer->size()) + " bytes)",
                               {}});
  }
  return std::move(*decoded);
}

}  // namespace ibcni::rdma
