// SPDX-License-Identifier: Apache-2.0
#include "ibcni/sysfs/net_sysctls.h"

#include <cerrno>
#include <fcntl.h>

#include <algorithm>

#include "ibcni/net/ip.h"
#include "ibcni/os/file_io.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::sysfs {

using os::Netns;
using os::NetnsGuard;
using os::SysResult;
using os::UniqueFd;
using os::sysFail;

namespace {

// The sysctl file, or EINVAL when the parts cannot name one (a key with "/" or "..", an invalid
// interface name): nothing outside /proc/sys/net/<family>/conf/<if>/ is ever opened.
SysResult<std::string> sysctlPath(std::string_view family, const std::string& ifName, const std::string& key) {
  const bool keyOk = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  if ((family != "ipv4" && family != "ipv6") || !net::isValidIfName(ifName) || !keyOk) {
    return sysFail(EINVAL, "sysctl net." + std::string(family) + ".conf." + ifName + "." + key + ": not a sysctl name");
  }
  return "/proc/sys/net/" + std::string(family) + "/conf/" + ifName + "/" + key;
}

// The sysctl file of `key` of `ifName`, opened in `ns` (the open is what binds it to the namespace),
// with its path for messages.
struct OpenSysctl {
  std::string path;
  UniqueFd fd;
};
SysResult<OpenSysctl> openIn(const Netns& ns, std::string_view family, const std::string& ifName,
                             const std::string& key, int flags) {
  auto path = sysctlPath(family, ifName, key);
  if (!path) {
    return std::unexpected(path.error());
  }
  auto guard = NetnsGuard::enter(ns);
  if (!guard) {
    return std::unexpected(guard.error());
  }
  auto fd = UniqueFd::open(*path, flags | O_CLOEXEC);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  return OpenSysctl{std::move(*path), std::move(*fd)};
}

class SystemNetSysctls final : public NetSysctls {
 public:
  SysResult<std::string> get(const Netns& ns, std::string_view family, const std::string& ifName,
                             const std::string& key) override {
    auto file = openIn(ns, family, ifName, key, O_RDONLY);
    if (!file) {
      return std::unexpected(file.error());
    }
    auto text = os::readAllFd(file->fd.get(), 256, file->path);
    if (!text) {
      return std::unexpected(text.error());
    }
    while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) {
      text->pop_back();
    }
    return *text;
  }

  SysResult<void> set(const Netns& ns, std::string_view family, const std::string& ifName, const std::string& key,
                      const std::string& value) override {
    auto file = openIn(ns, family, ifName, key, O_WRONLY);
    if (!file) {
      return std::unexpected(file.error());
    }
    return os::writeAll(file->fd.get(), value + "\n", "write " + file->path);
  }
};

}  // namespace

std::unique_ptr<NetSysctls> systemNetSysctls() { return std::make_unique<SystemNetSysctls>(); }

}  // namespace ibcni::sysfs
