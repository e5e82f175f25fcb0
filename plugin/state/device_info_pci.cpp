// SPDX-License-Identifier: Apache-2.0
#include "plugin/state/device_info_pci.h"

#include <nlohmann/json.hpp>

#include "ibcni/os/safe_path.h"
#include "lib/json/json_fields.h"
#include "lib/result/json_codec.h"

namespace ibcni::state {

using config::fields::invalid;
using config::fields::pciField;
using nlohmann::json;

cni::Result<std::optional<net::PciAddress>> readDeviceInfoPci(const std::string& path, bool required) {
  const std::string field = "runtimeConfig.CNIDeviceInfoFile";
  if (auto problem = os::pathSpellingProblem(path); !problem.empty()) {
    return invalid(field, path, problem, 256);
  }
  // A regular file only: a FIFO would block ADD, and a device node may act when opened.
  auto text = os::readRegularFile(path, 1 << 16);
  if (!text) {
    if (!required && !os::isRefusal(text.error())) {
      return std::optional<net::PciAddress>{};
    }
    return invalid(field, path,
                   "cannot read the device-info file (" + text.error().describe() +
                       "); it is a regular file written by the device plugin for Multus",
                   256);
  }
  json info = json::parse(*text, nullptr, false);
  if (!info.is_object()) {
    return invalid(field, path, "the device-info file is not a JSON object", 256);
  }
  auto pci = info.find("pci");
  if (pci == info.end() || !pci->is_object()) {
    if (!required) {
      return std::optional<net::PciAddress>{};
    }
    const auto type = info.find("type");
    return invalid(field, path,
                   "the device-info file has no \"pci\" object (type " +
                       (type != info.end() ? result::shortDump(*type) : std::string("none")) +
                       "); ibcni attaches PCI functions",
                   256);
  }
  auto addr = pciField(*pci, "pci-address", field + " pci.pci-address");
  if (!addr) {
    return std::unexpected(addr.error());
  }
  if (!*addr && required) {
    return invalid(field, path, "the device-info file has no pci.pci-address", 256);
  }
  return *addr;
}

}  // namespace ibcni::state
