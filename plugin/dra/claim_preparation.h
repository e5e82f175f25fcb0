// SPDX-License-Identifier: Apache-2.0
// ibcni-dra's Prepare and Unprepare: for a claim the kubelet names, the devices the scheduler
// allocated to this driver on this node, checked against sysfs, recorded ahead in the checkpoint,
// then their CDI spec written; undone by Unprepare from the record alone (the claim may be gone).
#pragma once

#include <expected>
#include <string>
#include <vector>

#include "ibcni/sysfs/devices.h"
#include "ibcni/sysfs/ib_inventory.h"
#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/claim_effects.h"
#include "plugin/dra/claim_preparer.h"
#include "plugin/dra/kube_claim_api.h"

namespace ibcni::dra {

struct PreparationOptions {
  std::string driver;    ///< the driver's name: results of other drivers are not ours
  std::string nodeName;  ///< the pool of this node's devices
};

class ClaimPreparation final : public ClaimPreparer {
 public:
  ClaimPreparation(ClaimApi& claims, sysfs::Devices& devices, sysfs::IbInventory& inventory, ClaimEffects& effects,
                   PreparationOptions options);

  /// The claim read (its uid must be the kubelet's), its results for this driver and node matched
  /// to the devices sysfs shows, the record written ahead, the CDI spec of its VFs written, the
  /// record marked prepared. A claim prepared already answers from its record, without a call.
  [[nodiscard]] PrepareOutcome prepare(const ClaimRef& claim) override;
  /// The CDI spec removed and the record dropped; no record is success.
  [[nodiscard]] std::string unprepare(const ClaimRef& claim) override;

  /// One allocation result of a claim for this driver and node.
  struct Allocated {
    std::string request;
    std::string device;
  };

 private:
  /// What Prepare will write for `allocated`: each device's answer and the VFs' CDI devices.
  struct Plan {
    std::vector<PreparedDevice> devices;
    std::vector<CdiDevice> cdi;
  };

  [[nodiscard]] PrepareOutcome prepareLocked(const ClaimRef& claim, ClaimRecords& records);
  /// The allocated devices matched to those sysfs shows now; an error names a device that is gone,
  /// or a VF without a GUID.
  [[nodiscard]] std::expected<Plan, std::string> planDevices(const ClaimRef& claim,
                                                            const std::vector<Allocated>& allocated);

  ClaimApi& claims_;
  sysfs::Devices& devices_;
  sysfs::IbInventory& inventory_;
  ClaimEffects& effects_;
  PreparationOptions options_;
};

}  // namespace ibcni::dra
