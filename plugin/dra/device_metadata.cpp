// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/device_metadata.h"

#include <filesystem>
#include <optional>
#include <system_error>

#include "ibcni/os/file_io.h"

namespace ibcni::dra {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kContainerDir = "/var/run/kubernetes.io/dra-device-attributes";
constexpr const char* kDriver = "ibcni.io";

std::string claimDir(const std::string& pluginDir, const ClaimRef& claim) {
  return pluginDir + "/dra-device-metadata/" + claim.ns + "_" + claim.name;
}

std::string containerPath(const ClaimRef& claim, const std::optional<std::string>& podClaimName,
                          const std::string& request) {
  const std::string where = podClaimName ? "/resourceclaimtemplates/" + *podClaimName : "/resourceclaims/" + claim.name;
  return std::string(kContainerDir) + where + "/" + request + "/" + kDriver + "-metadata.json";
}

/// The claim uid a metadata file names; none when it cannot be read as one.
std::optional<std::string> metadataUid(const fs::path& file) {
  auto text = os::readFile(file.string(), 1 << 20);
  if (!text) {
    return std::nullopt;
  }
  const json doc = json::parse(*text, nullptr, false);
  if (!doc.is_object() || !doc.contains("metadata") || !doc["metadata"].is_object() ||
      !doc["metadata"].contains("uid") || !doc["metadata"]["uid"].is_string()) {
    return std::nullopt;
  }
  return doc["metadata"]["uid"].get<std::string>();
}

json cdiSpec(const std::string& deviceName, const std::string& hostPath, const std::string& inContainer) {
  return {{"cdiVersion", "0.5.0"},
          {"kind", kMetadataCdiKind},
          {"devices", json::array({{{"name", deviceName},
                                    {"containerEdits",
                                     {{"mounts", json::array({{{"hostPath", hostPath},
                                                               {"containerPath", inContainer},
                                                               {"options", {"ro", "bind"}}}})}}}}})}};
}

}  // namespace

std::string metadataCdiId(const std::string& claimUid, const std::string& request) {
  return std::string(kMetadataCdiKind) + "=" + claimUid + "_" + request;
}

std::string metadataFilePath(const std::string& pluginDir, const ClaimRef& claim, const std::string& request) {
  return claimDir(pluginDir, claim) + "/" + request + "/metadata.json";
}

std::string metadataCdiPath(const std::string& cdiDir, const std::string& claimUid, const std::string& request) {
  return cdiDir + "/" + kDriver + "_metadata_" + claimUid + "_" + request + ".json";
}

json deviceMetadata(const ClaimRef& claim, const std::optional<std::string>& podClaimName, const RequestMetadata& m) {
  json out = {{"kind", "DeviceMetadata"},
              {"apiVersion", "metadata.resource.k8s.io/v1alpha1"},
              {"metadata", {{"name", claim.name}, {"namespace", claim.ns}, {"uid", claim.uid}, {"generation", 1}}},
              {"requests", json::array({{{"name", m.request}, {"devices", m.devices}}})}};
  if (podClaimName) {
    out["podClaimName"] = *podClaimName;
  }
  return out;
}

os::SysResult<void> writeDeviceMetadata(const MetadataPlace& at, const ClaimRef& claim,
                                        const std::optional<std::string>& podClaimName,
                                        const std::vector<RequestMetadata>& requests) {
  for (const auto& m : requests) {
    const std::string file = metadataFilePath(at.pluginDir, claim, m.request);
    std::error_code ec;
    fs::create_directories(fs::path(file).parent_path(), ec);
    if (ec) {
      return os::sysFail(ec.value(), "create the folder of " + file);
    }
    if (auto ok = os::writeFileAtomic(file, deviceMetadata(claim, podClaimName, m).dump() + "\n"); !ok) {
      return ok;
    }
    const json spec = cdiSpec(claim.uid + "_" + m.request, file, containerPath(claim, podClaimName, m.request));
    if (auto ok = os::writeFileAtomic(metadataCdiPath(at.cdiDir, claim.uid, m.request), spec.dump(2) + "\n"); !ok) {
      return ok;
    }
  }
  return {};
}

os::SysResult<void> removeDeviceMetadata(const MetadataPlace& at, const ClaimRef& claim) {
  std::error_code ec;
  const std::string prefix = std::string(kDriver) + "_metadata_" + claim.uid + "_";
  for (const auto& e : fs::directory_iterator(at.cdiDir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(prefix) && name.ends_with(".json")) {
      fs::remove(e.path(), ec);
      if (ec) {
        return os::sysFail(ec.value(), "remove " + e.path().string());
      }
    }
  }
  // The folder is named by the claim's namespace and name, which a claim made again under that name
  // shares: a request's folder whose file names another uid is that claim's, and stays.
  const std::string dir = claimDir(at.pluginDir, claim);
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto uid = metadataUid(e.path() / "metadata.json");
    if (!uid || *uid == claim.uid) {
      fs::remove_all(e.path(), ec);
      if (ec) {
        return os::sysFail(ec.value(), "remove " + e.path().string());
      }
    }
  }
  fs::remove(dir, ec);  // left when another claim's request folder is in it
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::directory_not_empty) {
    return os::sysFail(ec.value(), "remove " + dir);
  }
  return {};
}

}  // namespace ibcni::dra
