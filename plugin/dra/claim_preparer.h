// SPDX-License-Identifier: Apache-2.0
// What the kubelet asks of a DRA driver (the DRAPlugin service's NodePrepareResources and
// NodeUnprepareResources, any version), as plain values: the gRPC layer (dra/grpc/) translates its
// messages to these and back, and the driver's logic (claim_preparation) never sees protobuf.
#pragma once

#include <string>
#include <vector>

namespace ibcni::dra {

/// A claim the kubelet names: its namespace, name and the uid it saw.
struct ClaimRef {
  std::string ns;
  std::string uid;
  std::string name;
};

/// "claim <ns>/<name> (uid <uid>)", as messages name a claim.
[[nodiscard]] inline std::string claimText(const ClaimRef& c) {
  return "claim " + c.ns + "/" + c.name + " (uid " + c.uid + ")";
}

/// One allocated device, prepared.
struct PreparedDevice {
  std::vector<std::string> requestNames;  ///< the claim's requests it serves
  std::string poolName;
  std::string deviceName;
  std::vector<std::string> cdiDeviceIds;  ///< "ibcni.io/vf=<claim uid>-<device>"
  std::string pciAddress;                 ///< the device's PCI function (not part of the kubelet's answer)
};

/// The answer for one claim: its devices, or an error (then no devices).
struct PrepareOutcome {
  std::vector<PreparedDevice> devices;
  std::string error;
};

class ClaimPreparer {
 public:
  virtual ~ClaimPreparer() = default;
  /// Prepares `claim` on this node; a repeat answers as the first did.
  [[nodiscard]] virtual PrepareOutcome prepare(const ClaimRef& claim) = 0;
  /// Undoes what prepare did; a claim never prepared (or unprepared already) is success. "" or the
  /// error.
  [[nodiscard]] virtual std::string unprepare(const ClaimRef& claim) = 0;
};

}  // namespace ibcni::dra
