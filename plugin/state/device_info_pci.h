// SPDX-License-Identifier: Apache-2.0
// The PCI address a device-info file names, for ADD and CHECK (plugin/commands/device_info.cpp):
// read when a verb needs it, never by the configuration's parse.
#pragma once

#include <optional>
#include <string>

#include "ibcni/cni/error.h"
#include "ibcni/net/ip.h"

namespace ibcni::state {

/// Multus' device-info file (k8snetworkplumbingwg device-info-spec): {"type": "pci", "pci":
/// {"pci-address": "0000:af:06.1", ...}} at `path` (runtimeConfig.CNIDeviceInfoFile). A regular
/// file only: a FIFO would block the verb, and a device node may act when opened.
/// @param required  nothing else names the device: a file that cannot be read or names no PCI
///                  address is an error; otherwise the file only cross-checks and may be missing.
/// @return the address, none when the file is missing or names none (not required), or error 7
///         naming runtimeConfig.CNIDeviceInfoFile, the path and what is wrong.
[[nodiscard]] cni::Result<std::optional<net::PciAddress>> readDeviceInfoPci(const std::string& path, bool required);

}  // namespace ibcni::state
