// SPDX-License-Identifier: Apache-2.0
// The device-info file of the k8snetworkplumbingwg device-info spec (v1.1.0): the runtime
// (Multus) passes its path as runtimeConfig.CNIDeviceInfoFile, normally
// /var/run/k8s.cni.cncf.io/devinfo/cni/<unique name> (section 4.2). When the device plugin's copy
// is there, ibcni only reads it; when nothing is, ibcni writes one (section 5.1.2) naming the PCI
// function, its PF and the RDMA device behind the pod's interface, which Multus copies into the
// pod's network-status annotation.
#pragma once

#include <string>
#include <vector>

#include "ibcni/net/ip.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::state {

/// The device-info spec version ibcni writes.
inline constexpr const char* kDeviceInfoVersion = "1.1.0";

/// Where device-info files live (spec sections 4.1 and 4.2); /var/run is a link to /run on most
/// nodes, so both spellings name the same tree.
inline const std::vector<std::string>& defaultDeviceInfoRoots() {
  static const std::vector<std::string> roots = {"/var/run/k8s.cni.cncf.io/devinfo/", "/run/k8s.cni.cncf.io/devinfo/"};
  return roots;
}

/// A "type": "pci" document: what the pod's interface is backed by. Empty fields are left out
/// (pci-address alone is required by the spec).
struct DeviceInfo {
  net::PciAddress pciAddress;                   ///< "pci-address": the function in the pod (the VF; ipoib: the parent's)
  std::optional<net::PciAddress> pfPciAddress;  ///< "pf-pci-address": its PF, when it is a VF
  std::string rdmaDevice;    ///< "rdma-device": the RDMA device as the pod sees it
};

/// Reads, writes and removes device-info files under the device-info tree. The path rules
/// (docs/security.md): the path is spelled as os::pathSpellingProblem wants and lies under one of
/// the roots; every directory on the way is root's (os::openDirectory with trusted owners); the
/// file is never reached through a symbolic link, and anything but a regular file is refused.
class DeviceInfoFiles {
 public:
  virtual ~DeviceInfoFiles() = default;

  enum class Presence {
    kAbsent,   ///< nothing at the path: ADD may write there
    kPresent,  ///< a regular file (the device plugin's copy): read it, never overwrite it
  };

  /// Looks at `path` without changing anything. A regular file outside the tree (reached through
  /// links) is kPresent: ibcni reads it and never writes there.
  /// @return os::kPathRefused naming the rule broken (outside the tree, symbolic link, FIFO, an
  ///         untrusted directory, ...); otherwise the errno of a failed call.
  [[nodiscard]] virtual os::SysResult<Presence> check(const std::string& path) = 0;

  /// Writes `info` at `path` atomically when nothing is there, creating the missing directories
  /// (spec 5.1.2). A file that appears meanwhile wins and is left alone.
  /// @return true when ibcni wrote the file, false when another one was there first.
  [[nodiscard]] virtual os::SysResult<bool> create(const std::string& path, const DeviceInfo& info) = 0;

  /// Removes the file at `path` (one ibcni wrote). A file or directory already gone is success.
  [[nodiscard]] virtual os::SysResult<void> remove(const std::string& path) = 0;
};

}  // namespace ibcni::state
