// SPDX-License-Identifier: Apache-2.0
#include "plugin/rdma/port_counters.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <string_view>
#include <utility>

#include "ibcni/os/file_io.h"
#include "ibcni/os/netns.h"
#include "ibcni/os/text.h"
#include "ibcni/os/unique_fd.h"
#include "plugin/rdma/port_counters_child.h"

namespace ibcni::rdma {
namespace {

/// More than any sysfs attribute holds (one page).
constexpr std::size_t kMaxAttributeBytes = 4096;
/// IB_DEVICE_NAME_MAX: the kernel's limit on an RDMA device name, with its NUL.
constexpr std::size_t kDeviceNameMax = 64;

/// A name that may be put in a path below class/infiniband: what the kernel allows as a device
/// name, without '/', "." and "..".
bool isDeviceName(const std::string& name) {
  return !name.empty() && name.size() < kDeviceNameMax && name != "." && name != ".." &&
         name.find('/') == std::string::npos && os::isPrintableText(name);
}

/// One decimal number and at most one trailing newline, as the kernel prints a counter.
std::optional<std::uint64_t> parseCounter(std::string_view text) {
  if (!text.empty() && text.back() == '\n') {
    text.remove_suffix(1);
  }
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

/// "4: ACTIVE" -> 4 (ib_core's state_show: "%d: %s").
std::optional<std::uint32_t> parseState(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    return std::nullopt;
  }
  std::uint32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + colon, value);
  if (colon == 0 || ec != std::errc() || end != text.data() + colon) {
    return std::nullopt;
  }
  return value;
}

os::SysResult<os::UniqueFd> openAt(int dirFd, const std::string& name, int flags, const std::string& shown) {
  const int fd = ::openat(dirFd, name.c_str(), flags | O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return os::sysFail(errno, "open " + shown);
  }
  return os::UniqueFd(fd);
}

os::SysResult<std::string> readAttribute(int dirFd, const std::string& name, const std::string& shown) {
  auto fd = openAt(dirFd, name, 0, shown);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  return os::readAllFd(fd->get(), kMaxAttributeBytes, shown);
}

/// Every file of directory `sub` of the port directory into `out`; a file that cannot be read or
/// is no number goes to `skipped` instead. A missing directory is an empty one.
os::SysResult<void> readCounterDir(int portFd, const std::string& sub, const std::string& shownPort,
                                   std::map<std::string, std::uint64_t>& out,
                                   std::vector<std::string>& skipped) {
  const std::string shown = shownPort + "/" + sub;
  auto dir = openAt(portFd, sub, O_DIRECTORY, shown);
  if (!dir) {
    return dir.error().err == ENOENT ? os::SysResult<void>{} : std::unexpected(dir.error());
  }
  auto names = os::listDirectoryAt(dir->get(), shown);
  if (!names) {
    return std::unexpected(names.error());
  }
  std::sort(names->begin(), names->end());
  for (const auto& name : *names) {
    if (sub == "hw_counters" && name == "lifespan") {
      continue;  // the cache time of the hw counters, in ms: a setting
    }
    auto text = readAttribute(dir->get(), name, shown + "/" + name);
    auto value = text ? parseCounter(*text) : std::nullopt;
    if (value) {
      out.emplace(name, *value);
    } else {
      skipped.push_back(sub + "/" + name);
    }
  }
  return {};
}

cni::Error notFound(const std::string& what, const std::string& where, const os::SysError& err) {
  return cni::sysError(cni::Errc::kDeviceNotFound,
                       what + " not found in " + where +
                           ": check the name (rdma link show), and the network namespace it is in",
                       err);
}

/// The device directory; a missing device is kDeviceNotFound naming it.
cni::Result<os::UniqueFd> openDevice(const std::string& sysfsRoot, const std::string& device) {
  if (!isDeviceName(device)) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "RDMA device " + cni::quoted(device) +
                         " is no device name: give a name as /sys/class/infiniband lists it (mlx5_0, rxe0)");
  }
  const std::string classDir = sysfsRoot + "/class/infiniband";
  auto dir = openAt(AT_FDCWD, classDir + "/" + device, O_DIRECTORY, classDir + "/" + device);
  if (!dir) {
    if (dir.error().err == ENOENT || dir.error().err == ENOTDIR) {
      return std::unexpected(notFound("RDMA device " + cni::quoted(device), classDir, dir.error()));
    }
    return std::unexpected(cni::sysError(cni::Errc::kIoFailure,
                                         "cannot open RDMA device " + cni::quoted(device) + " in " + classDir,
                                         dir.error()));
  }
  return std::move(*dir);
}

/// Whether the netns child must read `device`: a valid name the host's sysfs does not show.
bool onlyInNetns(const std::string& sysfsRoot, const std::string& device) {
  return isDeviceName(device) && ::access((sysfsRoot + "/class/infiniband/" + device).c_str(), F_OK) != 0;
}

}  // namespace

cni::Result<PortCounters> readPortCountersAt(const std::string& sysfsRoot, const std::string& device,
                                             std::uint32_t port) {
  auto deviceDir = openDevice(sysfsRoot, device);
  if (!deviceDir) {
    return std::unexpected(deviceDir.error());
  }
  const std::string shown = sysfsRoot + "/class/infiniband/" + device + "/ports/" + std::to_string(port);
  auto portDir = openAt(deviceDir->get(), "ports/" + std::to_string(port), O_DIRECTORY, shown);
  if (!portDir) {
    if (portDir.error().err == ENOENT) {
      return std::unexpected(notFound("port " + std::to_string(port) + " of RDMA device " + cni::quoted(device),
                                      sysfsRoot + "/class/infiniband/" + device + "/ports", portDir.error()));
    }
    return std::unexpected(cni::sysError(cni::Errc::kIoFailure, "cannot open " + shown, portDir.error()));
  }
  PortCounters out;
  out.device = device;
  out.port = port;
  if (auto state = readAttribute(portDir->get(), "state", shown + "/state")) {
    out.state = parseState(*state);
  }
  for (const auto& [sub, map] : {std::pair<std::string, std::map<std::string, std::uint64_t>*>{"counters", &out.counters},
                                 {"hw_counters", &out.hwCounters}}) {
    auto read = readCounterDir(portDir->get(), sub, shown, *map, out.skipped);
    if (!read) {
      return std::unexpected(cni::sysError(cni::Errc::kIoFailure,
                                           "cannot list the " + sub + " of RDMA device " + cni::quoted(device) +
                                               " port " + std::to_string(port),
                                           read.error()));
    }
  }
  return out;
}

std::vector<cni::Result<PortCounters>> readPortCountersBatch(const std::string& netnsPath,
                                                            const std::vector<PortRef>& ports,
                                                            const CounterSource& source) {
  std::vector<cni::Result<PortCounters>> results(ports.size());
  os::Netns ns;
  if (!netnsPath.empty()) {
    auto opened = os::Netns::open(netnsPath);
    if (!opened) {
      const cni::Error err = cni::sysError(
          cni::Errc::kNetnsFailure,
          "cannot open network namespace " + cni::quoted(netnsPath) + " to read RDMA counters (is the pod gone?)",
          opened.error());
      std::fill(results.begin(), results.end(), std::unexpected(err));
      return results;
    }
    ns = std::move(*opened);
  }
  std::vector<std::size_t> inNetns;  // the ports only the netns's own sysfs shows
  for (std::size_t i = 0; i < ports.size(); ++i) {
    if (ns && onlyInNetns(source.sysfsRoot, ports[i].device)) {
      inNetns.push_back(i);
    } else {
      results[i] = readPortCountersAt(source.sysfsRoot, ports[i].device, ports[i].port);
    }
  }
  if (!inNetns.empty()) {
    std::vector<PortRef> refs;
    for (std::size_t i : inNetns) {
      refs.push_back(ports[i]);
    }
    auto fromChild = readInNetnsChild(ns, netnsPath, refs, source);
    for (std::size_t k = 0; k < inNetns.size(); ++k) {
      results[inNetns[k]] = std::move(fromChild[k]);
    }
  }
  return results;
}

cni::Result<PortCounters> readPortCounters(const std::string& netnsPath, const std::string& device,
                                           std::uint32_t port, const CounterSource& source) {
  auto results = readPortCountersBatch(netnsPath, {PortRef{device, port}}, source);
  return std::move(results.front());
}

}  // namespace ibcni::rdma
