// SPDX-License-Identifier: Apache-2.0
// Device-info files (include/ibcni/state/device_info_file.h). A file is written as a temporary
// file in the same directory, then link(2)ed to its name: link never replaces, so a file that
// appeared meanwhile (the device plugin's copy, written by Multus) wins, and a reader never sees
// a partial document.
#include "plugin/state/file_device_info.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "ibcni/os/file_io.h"
#include "ibcni/os/random.h"
#include "ibcni/os/safe_path.h"
#include "ibcni/os/text.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::state {

namespace {

using nlohmann::ordered_json;

std::unexpected<os::SysError> refused(const std::string& why) { return os::sysFail(os::kPathRefused, why); }

struct Place {
  std::string dir;
  std::string name;
};

Place split(const std::string& path) {
  const auto slash = path.rfind('/');
  return Place{slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

const char* kindOf(mode_t mode) {
  if (S_ISLNK(mode)) {
    return "symbolic link";
  }
  if (S_ISFIFO(mode)) {
    return "FIFO";
  }
  if (S_ISSOCK(mode)) {
    return "socket";
  }
  if (S_ISCHR(mode) || S_ISBLK(mode)) {
    return "device node";
  }
  if (S_ISDIR(mode)) {
    return "directory";
  }
  return "special file";
}

// What is at `name` in `dirFd`, without following a symbolic link.
os::SysResult<DeviceInfoFiles::Presence> presenceAt(int dirFd, const std::string& name, const std::string& path) {
  struct stat st {};
  if (::fstatat(dirFd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return DeviceInfoFiles::Presence::kAbsent;
    }
    return os::sysFail(errno, "stat " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    return refused(path + " is a " + kindOf(st.st_mode) + ", not a regular file");
  }
  return DeviceInfoFiles::Presence::kPresent;
}

}  // namespace

std::string FileDeviceInfoFiles::encode(const DeviceInfo& info) {
  ordered_json pci = ordered_json::object();
  pci["pci-address"] = info.pciAddress.text;
  if (info.pfPciAddress) {
    pci["pf-pci-address"] = info.pfPciAddress->text;
  }
  if (!info.rdmaDevice.empty()) {
    pci["rdma-device"] = info.rdmaDevice;
  }
  ordered_json doc = ordered_json::object();
  doc["type"] = "pci";
  doc["version"] = kDeviceInfoVersion;
  doc["pci"] = pci;
  return doc.dump() + "\n";
}

std::string FileDeviceInfoFiles::placeProblem(const std::string& path) const {
  if (auto p = os::pathSpellingProblem(path); !p.empty()) {
    return path + " " + p;
  }
  for (const auto& root : roots_) {
    if (path.size() > root.size() && path.starts_with(root)) {
      return "";
    }
  }
  std::string list;
  for (const auto& root : roots_) {
    list += (list.empty() ? "" : " or ") + root;
  }
  return path + " is outside the device-info tree: ibcni writes device-info files only under " + list;
}

os::SysResult<DeviceInfoFiles::Presence> FileDeviceInfoFiles::check(const std::string& path) {
  if (auto p = placeProblem(path); !p.empty()) {
    // A file that is there is read wherever it is (config/ already read it, following links, a
    // regular file only); only a place where ibcni would write must be in the tree.
    struct stat st {};
    if (os::pathSpellingProblem(path).empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      return Presence::kPresent;
    }
    return refused(p);
  }
  const Place at = split(path);
  auto dir = os::openDirectory(at.dir, os::DirPolicy{.trustedOwners = true, .create = false});
  if (!dir) {
    // A directory still missing is created by create(); every directory that exists on the way
    // was checked before the missing one was found.
    if (dir.error().err == ENOENT) {
      return Presence::kAbsent;
    }
    return std::unexpected(dir.error());
  }
  return presenceAt(dir->get(), at.name, path);
}

os::SysResult<bool> FileDeviceInfoFiles::create(const std::string& path, const DeviceInfo& info) {
  if (auto p = placeProblem(path); !p.empty()) {
    return refused(p);
  }
  const Place at = split(path);
  auto dir = os::openDirectory(at.dir, os::DirPolicy{.trustedOwners = true, .create = true, .mode = 0700});
  if (!dir) {
    return std::unexpected(dir.error());
  }
  auto before = presenceAt(dir->get(), at.name, path);
  if (!before) {
    return std::unexpected(before.error());
  }
  if (*before == Presence::kPresent) {
    return false;
  }
  const std::string tmp = "." + at.name.substr(0, 200) + ".ibcni-" + os::hex64(os::randomBits()) + ".tmp";
  int raw = ::openat(dir->get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (raw < 0) {
    return os::sysFail(errno, "create " + at.dir + "/" + tmp);
  }
  os::UniqueFd fd(raw);
  auto discard = [&] { ::unlinkat(dir->get(), tmp.c_str(), 0); };
  if (auto w = os::writeAll(fd.get(), encode(info), at.dir + "/" + tmp); !w) {
    discard();
    return std::unexpected(w.error());
  }
  // The file's mode does not depend on the umask the runtime gave ibcni.
  if (::fchmod(fd.get(), 0444) != 0) {
    int err = errno;
    discard();
    return os::sysFail(err, "chmod " + at.dir + "/" + tmp);
  }
  if (auto c = fd.close(); !c) {
    discard();
    return std::unexpected(c.error());
  }
  if (::linkat(dir->get(), tmp.c_str(), dir->get(), at.name.c_str(), 0) != 0) {
    int err = errno;
    discard();
    if (err == EEXIST) {
      return false;  // another writer was first: its file stays
    }
    return os::sysFail(err, "link " + at.dir + "/" + tmp + " to " + path);
  }
  discard();
  return true;
}

os::SysResult<void> FileDeviceInfoFiles::remove(const std::string& path) {
  if (auto p = placeProblem(path); !p.empty()) {
    return refused(p);
  }
  const Place at = split(path);
  auto dir = os::openDirectory(at.dir, os::DirPolicy{.trustedOwners = true, .create = false});
  if (!dir) {
    if (dir.error().err == ENOENT) {
      return {};
    }
    return std::unexpected(dir.error());
  }
  auto now = presenceAt(dir->get(), at.name, path);
  if (!now) {
    return std::unexpected(now.error());
  }
  if (*now == Presence::kAbsent) {
    return {};
  }
  if (::unlinkat(dir->get(), at.name.c_str(), 0) != 0 && errno != ENOENT) {
    return os::sysFail(errno, "remove " + path);
  }
  return {};
}

}  // namespace ibcni::state
