// SPDX-License-Identifier: Apache-2.0
// The VFs' settings kept by their PFs, as a JSON file, for ibcni-dra-faulty on a machine without
// SR-IOV: {"<pf>/<vf>": {"node": "GUID", "port": "GUID", "linkState": N, "rebinds": N}}. A file, so
// that what a killed driver set is still there for the next one, and for the test to compare.
// Each call reads and writes the whole file (the driver holds its checkpoint's lock meanwhile).
#pragma once

#include <cerrno>
#include <string>

#include <nlohmann/json.hpp>

#include "ibcni/netlink/netlink.h"
#include "ibcni/os/file_io.h"
#include "ibcni/os/sys_error.h"
#include "plugin/dra/claim_effects.h"

namespace ibcni::fault {

class FileVfTable {
 public:
  explicit FileVfTable(std::string path) : path_(std::move(path)) {}

  [[nodiscard]] static std::string key(const dra::VfRef& vf) { return vf.pfName + "/" + std::to_string(vf.vf); }

  /// ENOENT for a VF the table does not list, as a PF without that VF answers.
  [[nodiscard]] os::SysResult<nl::VfInfo> info(const dra::VfRef& vf) const {
    auto table = readListing(vf, ENOENT);
    if (!table) {
      return std::unexpected(table.error());
    }
    const nlohmann::json& v = (*table)[key(vf)];
    nl::VfInfo out;
    out.vf = vf.vf;
    out.nodeGuid = net::Guid::parse(v.value("node", ""));
    out.portGuid = net::Guid::parse(v.value("port", ""));
    out.linkState = static_cast<nl::VfLinkState>(v.value("linkState", 0U));
    return out;
  }
  [[nodiscard]] os::SysResult<void> setGuids(const dra::VfRef& vf, const net::Guid& node, const net::Guid& port) {
    return change(vf, [&](nlohmann::json& v) {
      v["node"] = node.toString();
      v["port"] = port.toString();
    });
  }
  [[nodiscard]] os::SysResult<void> setLinkState(const dra::VfRef& vf, nl::VfLinkState state) {
    return change(vf, [&](nlohmann::json& v) { v["linkState"] = static_cast<std::uint32_t>(state); });
  }
  /// Counts the rebind of the VF whose "pci" is `pci`.
  [[nodiscard]] os::SysResult<void> rebind(const net::PciAddress& pci) {
    auto table = read();
    if (!table) {
      return std::unexpected(table.error());
    }
    for (auto& [k, v] : table->items()) {
      if (v.value("pci", "") == pci.text) {
        v["rebinds"] = v.value("rebinds", 0U) + 1;
        return os::writeFileAtomic(path_, table->dump(2) + "\n");
      }
    }
    return os::sysFail(ENODEV, "no VF with PCI address " + pci.text + " in " + path_);
  }

 private:
  [[nodiscard]] os::SysResult<nlohmann::json> read() const {
    auto text = os::readFile(path_, 1U << 20U);
    if (!text) {
      return std::unexpected(text.error());
    }
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_object()) {
      return os::sysFail(EINVAL, path_ + " is not a VF table");
    }
    return j;
  }
  /// The table, which lists `vf`; else the error `missing` names it with.
  [[nodiscard]] os::SysResult<nlohmann::json> readListing(const dra::VfRef& vf, int missing) const {
    auto table = read();
    if (table && !table->contains(key(vf))) {
      return os::sysFail(missing, "VF " + key(vf) + " is not in " + path_);
    }
    return table;
  }
  template <class F>
  [[nodiscard]] os::SysResult<void> change(const dra::VfRef& vf, F&& edit) {
    auto table = readListing(vf, EINVAL);
    if (!table) {
      return std::unexpected(table.error());
    }
    edit((*table)[key(vf)]);
    return os::writeFileAtomic(path_, table->dump(2) + "\n");
  }

  std::string path_;
};

}  // namespace ibcni::fault
