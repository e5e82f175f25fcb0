// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/safe_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <vector>

#include "ibcni/os/file_io.h"

namespace ibcni::os {

namespace {

// The most symbolic links one path may go through (the kernel's own limit, MAXSYMLINKS).
constexpr int kMaxLinks = 40;

std::unexpected<SysError> refused(std::string why) { return sysFail(kPathRefused, std::move(why)); }

std::vector<std::string> components(std::string_view path) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < path.size()) {
    auto end = path.find('/', pos);
    if (end == std::string_view::npos) {
      end = path.size();
    }
    // Empty and "." components name the same directory; a ".." is kept (a link target may use it).
    if (end > pos && path.substr(pos, end - pos) != ".") {
      out.emplace_back(path.substr(pos, end - pos));
    }
    pos = end + 1;
  }
  return out;
}

// Root, or the user ibcni runs as (root in production; the test user in unit tests).
bool trustedOwner(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

std::string octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

const char* kindOf(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFDIR:
      return "directory";
    case S_IFLNK:
      return "symbolic link";
    case S_IFIFO:
      return "FIFO";
    case S_IFSOCK:
      return "socket";
    case S_IFCHR:
      return "character device";
    case S_IFBLK:
      return "block device";
    default:
      return "regular file";
  }
}

// A directory ibcni walks through (or ends in) under DirPolicy::trustedOwners: owned by a trusted
// user, and writable by no one else unless sticky (then only the owner of an entry may rename or
// remove it, and the entry's own owner is checked next); the final directory not at all.
SysResult<void> checkDirectory(const struct stat& st, const std::string& shown, bool final) {
  if (!trustedOwner(st.st_uid)) {
    return refused(shown + " is owned by uid " + std::to_string(st.st_uid) +
                   ": ibcni keeps its files only in directories owned by root");
  }
  const bool othersWrite = (st.st_mode & S_IWOTH) != 0 || ((st.st_mode & S_IWGRP) != 0 && st.st_gid != 0);
  if (othersWrite && (final || (st.st_mode & S_ISVTX) == 0)) {
    return refused(shown + " is writable by group or others (mode " + octal(st.st_mode) +
                   "): ibcni keeps its files only in directories no one but root can change");
  }
  return {};
}

std::string joined(const std::string& base, const std::string& name) {
  return base == "/" ? "/" + name : base + "/" + name;
}

std::string parentOf(const std::string& shown) {
  auto slash = shown.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : shown.substr(0, slash);
}

/// openDirectory's walk: the directory reached so far (an O_PATH descriptor, and its path as
/// messages show it) and the components still to go, a symbolic link's target put in front.
class DirectoryWalk {
 public:
  DirectoryWalk(const std::string& path, const DirPolicy& policy) : path_(path), policy_(policy) {
    auto parts = components(path);
    todo_.assign(parts.begin(), parts.end());
  }

  /// Starts at "/", checked like every directory the walk enters.
  SysResult<void> start() {
    if (auto r = openRoot(); !r) {
      return r;
    }
    return checkReached();
  }

  [[nodiscard]] bool done() const { return todo_.empty(); }

  /// Goes through the next component: into a directory (created if the policy says so), or
  /// through a symbolic link.
  SysResult<void> step() {
    const std::string name = todo_.front();
    todo_.pop_front();
    if (name == ".") {
      return {};
    }
    // ".." only comes from the target of a (trusted) symbolic link.
    const std::string here = name == ".." ? parentOf(shown_) : joined(shown_, name);
    // O_PATH|O_NOFOLLOW opens what the name is now (a symbolic link itself, never its target)
    // without acting on it; every check below looks at what was opened.
    auto entry = openOrCreate(name, here);
    if (!entry) {
      return std::unexpected(entry.error());
    }
    struct stat st {};
    if (::fstat(entry->get(), &st) != 0) {
      return sysFail(errno, "stat " + here);
    }
    if (S_ISLNK(st.st_mode)) {
      return followLink(entry->get(), here, st);
    }
    if (!S_ISDIR(st.st_mode)) {
      return sysFail(ENOTDIR, here + " is a " + std::string(kindOf(st.st_mode)) + ", not a directory");
    }
    cur_ = std::move(*entry);
    shown_ = here;
    return checkReached(st);
  }

  /// The directory the walk ended in, opened for reading.
  SysResult<UniqueFd> openReached() const {
    const int raw = ::openat(cur_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (raw < 0) {
      return sysFail(errno, "open " + shown_);
    }
    return UniqueFd(raw);
  }

 private:
  SysResult<void> openRoot() {
    const int raw = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (raw < 0) {
      return sysFail(errno, "open /");
    }
    cur_.reset(raw);
    shown_ = "/";
    return {};
  }

  SysResult<void> checkReached() const {
    if (!policy_.trustedOwners) {
      return {};
    }
    struct stat st {};
    if (::fstat(cur_.get(), &st) != 0) {
      return sysFail(errno, "stat " + shown_);
    }
    return checkReached(st);
  }

  SysResult<void> checkReached(const struct stat& st) const {
    if (!policy_.trustedOwners) {
      return {};
    }
    return checkDirectory(st, shown_, todo_.empty());
  }

  /// Opens `name` (O_PATH, not following it); a missing one is created first when the policy says
  /// so (with the policy's mode when it is the last component).
  SysResult<UniqueFd> openOrCreate(const std::string& name, const std::string& here) const {
    for (bool created = false;; created = true) {
      const int raw = ::openat(cur_.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (raw >= 0) {
        return UniqueFd(raw);
      }
      if (errno != ENOENT || !policy_.create || created) {
        return sysFail(errno, "stat " + here);
      }
      if (::mkdirat(cur_.get(), name.c_str(), todo_.empty() ? policy_.mode : 0755) != 0 && errno != EEXIST) {
        return sysFail(errno, "create directory " + here);
      }
    }
  }

  /// A trusted link's target goes in front of what is left; an absolute one starts over at "/".
  SysResult<void> followLink(int link, const std::string& here, const struct stat& st) {
    if (!trustedOwner(st.st_uid)) {
      return refused(here + " is a symbolic link owned by uid " + std::to_string(st.st_uid) +
                     ": ibcni follows only root's symbolic links");
    }
    if (++links_ > kMaxLinks) {
      return sysFail(ELOOP, "resolve " + path_);
    }
    char target[PATH_MAX];
    // The link opened with O_PATH, read through its descriptor (an empty name).
    ssize_t n = ::readlinkat(link, "", target, sizeof target);
    if (n < 0) {
      return sysFail(errno, "read symbolic link " + here);
    }
    if (static_cast<std::size_t>(n) >= sizeof target) {
      return sysFail(ENAMETOOLONG, "read symbolic link " + here);
    }
    std::string_view t(target, static_cast<std::size_t>(n));
    auto more = components(t);
    todo_.insert(todo_.begin(), more.begin(), more.end());
    if (!t.empty() && t.front() == '/') {
      return openRoot();
    }
    return {};
  }

  const std::string& path_;
  const DirPolicy& policy_;
  UniqueFd cur_;
  std::string shown_ = "/";
  std::deque<std::string> todo_;
  int links_ = 0;
};

}  // namespace

std::string pathSpellingProblem(std::string_view path) {
  if (path.empty() || path.front() != '/') {
    return "must be an absolute path";
  }
  if (path.size() > kMaxConfigPath) {
    return "is longer than " + std::to_string(kMaxConfigPath) + " bytes";
  }
  for (char c : path) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return "holds a control character";
    }
  }
  for (std::string_view rest = path; !rest.empty();) {
    auto slash = rest.find('/');
    auto c = rest.substr(0, slash);
    if (c == "." || c == "..") {
      return "has a \"" + std::string(c) + "\" component: spell the path without \".\" and \"..\"";
    }
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  return "";
}

std::string logFileSpellingProblem(std::string_view path) {
  if (auto p = pathSpellingProblem(path); !p.empty()) {
    return p;
  }
  auto name = path.substr(path.rfind('/') + 1);
  if (name.size() <= 4 || !name.ends_with(".log")) {
    return "must name a file ending in \".log\" (e.g. /var/log/ibcni.log)";
  }
  return "";
}

SysResult<UniqueFd> openDirectory(const std::string& path, const DirPolicy& policy) {
  if (auto p = pathSpellingProblem(path); !p.empty()) {
    return refused(path + " " + p);
  }
  DirectoryWalk walk(path, policy);
  if (auto r = walk.start(); !r) {
    return std::unexpected(r.error());
  }
  while (!walk.done()) {
    if (auto r = walk.step(); !r) {
      return std::unexpected(r.error());
    }
  }
  return walk.openReached();
}

SysResult<UniqueFd> openLogFile(const std::string& path) {
  if (auto p = logFileSpellingProblem(path); !p.empty()) {
    return refused(path + " " + p);
  }
  const auto slash = path.rfind('/');
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = path.substr(slash + 1);
  auto dirFd = openDirectory(dir, DirPolicy{.trustedOwners = false, .create = false});
  if (!dirFd) {
    return std::unexpected(dirFd.error());
  }
  auto suitable = [&path](const struct stat& st) -> SysResult<void> {
    if (S_ISLNK(st.st_mode)) {
      return refused(path + " is a symbolic link: ibcni never follows one to write");
    }
    if (!S_ISREG(st.st_mode)) {
      return refused(path + " is a " + std::string(kindOf(st.st_mode)) + ", not a regular file");
    }
    if (st.st_nlink > 1) {
      return refused(path + " has " + std::to_string(st.st_nlink) +
                     " hard links: ibcni appends only to a file no other name reaches");
    }
    return {};
  };
  // Look before opening: a FIFO or a device node is refused without being opened.
  struct stat st {};
  if (::fstatat(dirFd->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (auto r = suitable(st); !r) {
      return std::unexpected(r.error());
    }
  } else if (errno != ENOENT) {
    return sysFail(errno, "stat " + path);
  }
  int fd = ::openat(dirFd->get(), name.c_str(),
                    O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC, 0640);
  if (fd < 0) {
    if (errno == ELOOP) {
      return refused(path + " is a symbolic link: ibcni never follows one to write");
    }
    return sysFail(errno, "open " + path);
  }
  UniqueFd owned(fd);
  if (::fstat(fd, &st) != 0) {
    return sysFail(errno, "stat " + path);
  }
  if (auto r = suitable(st); !r) {
    return std::unexpected(r.error());
  }
  return owned;
}

SysResult<std::string> readRegularFile(const std::string& path, std::size_t maxBytes) {
  // O_PATH opens nothing: the type is checked before the file is opened for reading.
  auto probe = UniqueFd::open(path, O_PATH);
  if (!probe) {
    return std::unexpected(probe.error());
  }
  struct stat st {};
  if (::fstat(probe->get(), &st) != 0) {
    return sysFail(errno, "stat " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    return refused(path + " is a " + std::string(kindOf(st.st_mode)) + ", not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > maxBytes) {
    return sysFail(EFBIG, "read " + path + ": larger than " + std::to_string(maxBytes) + " bytes");
  }
  auto fd = UniqueFd::open("/proc/self/fd/" + std::to_string(probe->get()), O_RDONLY | O_NOCTTY);
  if (!fd) {
    return sysFail(fd.error().err, "open " + path);
  }
  return readAllFd(fd->get(), maxBytes, path);
}

}  // namespace ibcni::os
