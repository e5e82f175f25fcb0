// SPDX-License-Identifier: Apache-2.0
// The device metadata of a prepared claim (KEP-5304, k8s.io/dynamic-resource-allocation's
// kubeletplugin/metadata.go and api/metadata, whose layout this reproduces): per request of the
// claim, one DeviceMetadata object (metadata.resource.k8s.io/v1alpha1: the claim, the request, its
// devices with driver, pool, name and attributes: PCI address, RDMA device, netdev, GUID) in
// <plugin dir>/dra-device-metadata/<namespace>_<claim>/<request>/metadata.json, and a CDI spec of
// kind ibcni.io/metadata that bind-mounts it read-only into the container at
// /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/ibcni.io-metadata.json
// (resourceclaimtemplates/<pod claim name>/... for a claim made from a template). The pod, and
// KubeVirt, learn from it which VF and RDMA device they got: the DRA successor of Multus's
// device-info file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ibcni/os/sys_error.h"
#include "plugin/dra/claim_preparer.h"

namespace ibcni::dra {

inline constexpr const char* kMetadataCdiKind = "ibcni.io/metadata";

/// One request's metadata: its devices as DeviceMetadata lists them ({driver, pool, name, attributes}).
struct RequestMetadata {
  std::string request;  ///< the base request ("req" of "req/subreq")
  std::vector<nlohmann::json> devices;
};

/// Where a claim's metadata is written.
struct MetadataPlace {
  std::string pluginDir;  ///< the driver's plugin folder (<kubelet>/plugins/ibcni.io)
  std::string cdiDir;
};

/// "ibcni.io/metadata=<claim uid>_<request>": what the kubelet hands the runtime for the request.
[[nodiscard]] std::string metadataCdiId(const std::string& claimUid, const std::string& request);

/// The DeviceMetadata object of `m` for claim `claim` (`podClaimName`: the claim's
/// resource.kubernetes.io/pod-claim-name annotation, when it was made from a template).
[[nodiscard]] nlohmann::json deviceMetadata(const ClaimRef& claim, const std::optional<std::string>& podClaimName,
                                            const RequestMetadata& m);

/// Writes the metadata file and its CDI spec of each of `requests` (each file in one step).
[[nodiscard]] os::SysResult<void> writeDeviceMetadata(const MetadataPlace& at, const ClaimRef& claim,
                                                      const std::optional<std::string>& podClaimName,
                                                      const std::vector<RequestMetadata>& requests);

/// Removes claim `claim`'s metadata files and CDI specs; none is success.
[[nodiscard]] os::SysResult<void> removeDeviceMetadata(const MetadataPlace& at, const ClaimRef& claim);

/// <pluginDir>/dra-device-metadata/<namespace>_<claim>/<request>/metadata.json
[[nodiscard]] std::string metadataFilePath(const std::string& pluginDir, const ClaimRef& claim,
                                           const std::string& request);
/// <cdiDir>/ibcni.io_metadata_<claim uid>_<request>.json
[[nodiscard]] std::string metadataCdiPath(const std::string& cdiDir, const std::string& claimUid,
                                          const std::string& request);

}  // namespace ibcni::dra
