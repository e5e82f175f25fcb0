// SPDX-License-Identifier: Apache-2.0
// The device-info file (runtimeConfig.CNIDeviceInfoFile): ADD and CHECK read the device it names
// (the parse reads no file); ADD writes one for the pod (device-info spec v1.1.0, section 5.1.2)
// when the runtime names one and no file is there yet; DEL removes only a file ADD wrote (the
// record's deviceInfoFile).
#pragma once

#include <optional>
#include <type_traits>
#include <utility>

#include "plugin/deps.h"
#include "ibcni/cni/error.h"
#include "ibcni/os/rollback.h"
#include "ibcni/state/attachment_store.h"
#include "plugin/invocation.h"

namespace ibcni::plugin {

/// ADD and CHECK: the deviceID the device-info file names, when there is a file and it names one
/// `inv` lacks; nullopt when the file changes nothing. The file must name the device only when
/// nothing else does (sriov mode without deviceID or device; ipoib mode makes its device);
/// otherwise a file naming a PCI address only cross-checks deviceID.
/// @return error 7 naming runtimeConfig.CNIDeviceInfoFile (unreadable or no PCI address when
///         required, a special file), the file and deviceID disagreeing, or the file naming a
///         device beside `device`.
[[nodiscard]] cni::Result<std::optional<net::PciAddress>> deviceIdFromInfoFile(const Invocation& inv);

/// ADD and CHECK: runs `verb` on `inv` with the device its device-info file names
/// (deviceIdFromInfoFile). `inv` is copied only when the file adds a deviceID; otherwise `verb`
/// gets `inv` itself.
template <class Verb>
[[nodiscard]] std::invoke_result_t<Verb&, const Invocation&> withDeviceFromInfoFile(const Invocation& inv,
                                                                                   Verb&& verb) {
  auto deviceId = deviceIdFromInfoFile(inv);
  if (!deviceId) {
    return std::unexpected(deviceId.error());
  }
  if (!*deviceId) {
    return verb(inv);
  }
  Invocation withDevice = inv;
  withDevice.conf.deviceId = std::move(**deviceId);
  return verb(withDevice);
}

/// Before any change: whether this ADD is to write the device-info file (a path is given, ibcni
/// can write one, and nothing is there). Looks only.
/// @return error 7 naming runtimeConfig.CNIDeviceInfoFile when the path breaks the path rules
///         of docs/security.md (outside the device-info tree, a symbolic link, a FIFO, an untrusted directory);
///         106 when it cannot be looked at.
[[nodiscard]] cni::Result<bool> deviceInfoToWrite(const Invocation& inv, Deps& deps);

/// Writes the device-info file for the attachment `record` describes (the PCI function in the
/// pod, or the IPoIB parent's; its PF; the RDMA device as the pod sees it), records its path in
/// `record` and registers its removal on `rollback`. A file that appeared meanwhile is left alone.
/// @return error 7 as deviceInfoToWrite; 106 when it cannot be written.
[[nodiscard]] cni::Result<void> writeDeviceInfo(const Invocation& inv, Deps& deps, state::AttachmentRecord& record,
                                                os::Rollback& rollback);

/// Removes the device-info file ADD wrote for `record`, if any. A file already gone is success;
/// a failure is logged only (Multus removes the file on DEL too: spec section 4.2.1).
void removeDeviceInfo(Deps& deps, const state::AttachmentRecord& record);

}  // namespace ibcni::plugin
