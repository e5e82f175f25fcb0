// SPDX-License-Identifier: Apache-2.0
#include "plugin/sysfs/sysfs_paths.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <utility>

namespace ibcni::sysfs {

namespace detail {

namespace {

struct DirCloser {
  void operator()(DIR* dir) const noexcept { (void)::closedir(dir); }
};
using DirPtr = std::unique_ptr<DIR, DirCloser>;

struct FreeDeleter {
  void operator()(char* p) const noexcept { std::free(p); }
};

}  // namespace

os::SysResult<os::UniqueFd> openDirAt(int dirFd, const std::string& rel, const std::string& shown) {
  int fd = ::openat(dirFd, rel.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return os::sysFail(errno, "open directory " + shown);
  }
  return os::UniqueFd(fd);
}

os::SysResult<std::vector<std::string>> listDirAt(int dirFd, const std::string& rel,
                                                  const std::string& shown) {
  auto fd = openDirAt(dirFd, rel, shown);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  DirPtr dir(::fdopendir(fd->get()));
  if (!dir) {
    return os::sysFail(errno, "open directory " + shown);
  }
  (void)fd->release();  // the DIR owns the fd now
  std::vector<std::string> names;
  for (;;) {
    // readdir returns NULL both at the end and on error; only errno tells them apart.
    errno = 0;
    const dirent* entry = ::readdir(dir.get());
    if (entry == nullptr) {
      if (errno != 0) {
        return os::sysFail(errno, "read directory " + shown);
      }
      break;
    }
    std::string_view name(entry->d_name);
    if (name != "." && name != "..") {
      names.emplace_back(name);
    }
  }
  return names;
}

os::SysResult<std::string> realPath(const std::string& path) {
  std::unique_ptr<char, FreeDeleter> resolved(::realpath(path.c_str(), nullptr));
  if (!resolved) {
    return os::sysFail(errno, "resolve " + path);
  }
  return std::string(resolved.get());
}

std::string_view lastComponent(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string_view parentPath(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view{} : path.substr(0, slash);
}

std::optional<net::PciAddress> canonicalPci(std::string_view component) {
  auto pci = net::PciAddress::parse(component);
  if (!pci || pci->text != component) {
    return std::nullopt;
  }
  return pci;
}

std::string excerpt(std::string_view text) {
  constexpr std::size_t kMax = 32;
  return text.size() <= kMax ? std::string(text) : std::string(text.substr(0, kMax)) + "...";
}

}  // namespace detail

os::SysResult<std::string> readSysfsFile(const std::string& path, std::size_t maxBytes) {
  auto fd = os::UniqueFd::open(path, O_RDONLY);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  // One byte more than allowed, so that a full buffer tells "too long" from "exactly maxBytes".
  std::string buf(maxBytes + 1, '\0');
  std::size_t len = 0;
  while (len < buf.size()) {
    ssize_t n = ::read(fd->get(), buf.data() + len, buf.size() - len);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return os::sysFail(errno, "read " + path);
    }
    if (n == 0) {
      break;
    }
    len += static_cast<std::size_t>(n);
  }
  if (len > maxBytes) {
    // libibverbs fails here too: a truncated value would be silently wrong.
    return os::sysFail(EOVERFLOW,
                       "read " + path + ": longer than " + std::to_string(maxBytes) + " bytes");
  }
  buf.resize(len);
  if (!buf.empty() && buf.back() == '\n') {
    buf.pop_back();
  }
  return buf;
}

}  // namespace ibcni::sysfs
