// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/file_io.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include "ibcni/os/unique_fd.h"

namespace ibcni::os {

SysResult<std::string> readAllFd(int fd, std::size_t maxBytes, const std::string& what) {
  // Read straight into the string's own buffer, doubled when full: no bounce buffer on the stack
  // and no zero fill (every page touched is a page fault in a short-lived plugin); one read for
  // most files ibcni reads.
  std::string out;
  std::size_t capacity = 16384;
  while (true) {
    ssize_t n = 0;
    out.resize_and_overwrite(capacity, [&](char* buf, std::size_t size) {
      const std::size_t have = out.size();
      n = ::read(fd, buf + have, size - have);
      return have + static_cast<std::size_t>(std::max<ssize_t>(n, 0));
    });
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return sysFail(errno, "read " + what);
    }
    if (n == 0) {
      return out;
    }
    if (out.size() > maxBytes) {
      return sysFail(EFBIG, "read " + what + ": larger than " + std::to_string(maxBytes) + " bytes");
    }
    if (out.size() == capacity) {
      capacity *= 2;
    }
  }
}

SysResult<std::string> readFile(const std::string& path, std::size_t maxBytes) {
  auto fd = UniqueFd::open(path, O_RDONLY);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  return readAllFd(fd->get(), maxBytes, path);
}

SysResult<void> writeAll(int fd, std::string_view data, const std::string& what) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return sysFail(errno, "write " + what);
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

SysResult<std::vector<std::string>> listDirectoryAt(int dirFd, const std::string& what) {
  if (::lseek(dirFd, 0, SEEK_SET) != 0) {
    return sysFail(errno, "read directory " + what);
  }
  std::vector<std::string> names;
  alignas(dirent64) char buf[8192];
  for (;;) {
    const ssize_t n = ::getdents64(dirFd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return sysFail(errno, "read directory " + what);
    }
    if (n == 0) {
      return names;
    }
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const dirent64*>(buf + at);
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
        names.emplace_back(e->d_name);
      }
      at += e->d_reclen;
    }
  }
}

SysResult<void> fsyncFd(int fd, const std::string& what) {
  if (::fsync(fd) != 0) {
    return sysFail(errno, "fsync " + what);
  }
  return {};
}

SysResult<void> fsyncDirectory(const std::string& dir) {
  auto fd = UniqueFd::open(dir, O_RDONLY | O_DIRECTORY);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  return fsyncFd(fd->get(), dir);
}

SysResult<void> writeFileAtomicAt(const FileAt& temp, const FileAt& target, std::string_view data, bool durable) {
  int raw = ::openat(temp.dirFd, temp.name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (raw < 0) {
    return sysFail(errno, "create " + temp.shown);
  }
  UniqueFd fd(raw);
  auto fail = [&](int err, const std::string& what) -> SysResult<void> {
    ::unlinkat(temp.dirFd, temp.name.c_str(), 0);
    return sysFail(err, what);
  };
  if (auto w = writeAll(fd.get(), data, temp.shown); !w) {
    return fail(w.error().err, w.error().op);
  }
  if (durable) {
    if (auto s = fsyncFd(fd.get(), temp.shown); !s) {
      return fail(s.error().err, s.error().op);
    }
  }
  if (auto c = fd.close(); !c) {
    return fail(c.error().err, "close " + temp.shown);
  }
  // rename() replaces the old file in one step: a reader (or a process killed here) sees the old
  // content or the new, never a mix.
  if (::renameat(temp.dirFd, temp.name.c_str(), target.dirFd, target.name.c_str()) != 0) {
    return fail(errno, "rename " + temp.shown + " to " + target.shown);
  }
  if (durable) {
    return fsyncFd(target.dirFd, "the directory of " + target.shown);
  }
  return {};
}

SysResult<void> writeFileAtomic(const std::string& path, std::string_view data, const AtomicWrite& how) {
  const std::filesystem::path p(path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  auto dirFd = UniqueFd::open(dir, O_RDONLY | O_DIRECTORY);
  if (!dirFd) {
    return std::unexpected(dirFd.error());
  }
  const std::string name = p.filename().string();
  const std::string tmpName = name + (how.tmpSuffix.empty() ? ".tmp." + std::to_string(::getpid()) : how.tmpSuffix);
  return writeFileAtomicAt({dirFd->get(), tmpName, dir + "/" + tmpName}, {dirFd->get(), name, path}, data,
                           how.durable);
}

}  // namespace ibcni::os
