// SPDX-License-Identifier: Apache-2.0
// ibcni-dra's Prepare and Unprepare: for a claim the kubelet names, the devices the scheduler
// allocated to this driver on this node, checked against sysfs, recorded ahead in the checkpoint,
// then their CDI spec written; undone by Unprepare from the record alone (the claim may be gone).
#pragma once

#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/sysfs/devices.h"
#include "ibcni/sysfs/ib_inventory.h"
#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/claim_config.h"
#include "plugin/dra/claim_effects.h"
#include "plugin/dra/claim_vf_settings.h"
#include "plugin/dra/device_metadata.h"
#include "plugin/dra/ib_devices.h"
#include "plugin/dra/claim_preparer.h"
#include "plugin/dra/kube_claim_api.h"

namespace ibcni::dra {

struct PreparationOptions {
  std::string driver;    ///< the driver's name: results of other drivers are not ours
  std::string nodeName;  ///< the pool of this node's devices
  std::string bootId;    ///< this boot's (os::bootNow): a record of another boot has lost its VF changes
};

class ClaimPreparation final : public ClaimPreparer {
 public:
  ClaimPreparation(ClaimApi& claims, sysfs::Devices& devices, sysfs::IbInventory& inventory, ClaimEffects& effects,
                   PreparationOptions options);

  /// The claim read (its uid must be the kubelet's), its results for this driver and node matched
  /// to the devices sysfs shows, with their configuration; the record written ahead; the VFs'
  /// GUIDs and link state set (claim_vf_settings), their pkeys checked, the CDI spec of its VFs
  /// written; the record marked prepared. A claim prepared already answers from its record, without
  /// a call; one whose earlier Prepare was cut short is undone first, then prepared in full. A
  /// Prepare that fails undoes what it changed.
  [[nodiscard]] PrepareOutcome prepare(const ClaimRef& claim) override;
  /// The VFs' settings put back, pool GUIDs released, the CDI spec removed and the record dropped;
  /// no record is success. What could not be put back stays recorded, and the error says what.
  [[nodiscard]] std::string unprepare(const ClaimRef& claim) override;

  /// One allocation result of a claim for this driver and node.
  struct Allocated {
    std::string request;
    std::string device;
  };

 private:
  /// One allocated VF: as sysfs shows it, and what the claim's configuration asks of it.
  struct PlannedVf {
    std::string request;
    IbDevice device;
    VfSettings settings;
  };
  /// What Prepare will do for `allocated`: each device's answer, the VFs, and what they change.
  struct Plan {
    std::vector<PreparedDevice> devices;
    std::vector<IbDevice> found;    ///< devices[i] as sysfs showed it
    std::vector<PlannedVf> vfs;
    std::vector<VfChange> changes;  ///< one per VF, nothing changed yet
    std::optional<std::string> podClaimName;  ///< the claim's pod-claim-name annotation (from a template)
  };
  /// The VFs as sysfs shows them after Prepare's changes, and their CDI devices.
  struct VfsNow {
    std::vector<IbDevice> devices;
    std::vector<CdiDevice> cdi;
  };

  [[nodiscard]] PrepareOutcome prepareLocked(const ClaimRef& claim, ClaimRecords& records);
  /// The allocated devices matched to those sysfs shows now, with their settings; an error names a
  /// device that is gone, a configuration that is wrong, or a VF without a GUID that gets none.
  [[nodiscard]] std::expected<Plan, std::string> planDevices(const nlohmann::json& object,
                                                            const std::vector<Allocated>& allocated);
  /// "" when no VF of `plan` is in the record of a claim other than `uid` (one the kubelet has not
  /// unprepared yet, or that the sweep has not undone: its VFs keep that claim's settings until
  /// then), else which VF and claim.
  [[nodiscard]] static std::string heldByAnother(const std::string& uid, const Plan& plan, const ClaimRecords& records);
  /// The VFs' settings applied, each change written ahead; then the pkeys checked and the CDI spec
  /// written from the VFs as they are after any rebind. "" or the error.
  [[nodiscard]] std::string changeNode(const ClaimRef& claim, const Plan& plan, ClaimRecords& records);
  /// The CDI devices of the VFs as sysfs shows them now (a rebind may have renamed their RDMA
  /// devices and given new device numbers), their pkeys checked; or the error.
  [[nodiscard]] std::expected<VfsNow, std::string> vfsNow(const ClaimRef& claim, const std::vector<PlannedVf>& vfs);
  /// The device metadata of each request of `plan`, its VFs as `now` shows them and with the GUIDs
  /// the record says Prepare set.
  [[nodiscard]] std::vector<RequestMetadata> metadataOf(const Plan& plan, const VfsNow& now,
                                                        const std::vector<VfChange>& changes) const;
  /// "" when VF `d` (as sysfs shows it now) holds the pkey `vf` asks for (or none is asked), else why not.
  [[nodiscard]] std::string pkeyProblem(const IbDevice& d, const PlannedVf& vf);
  /// A record of claim `uid` made in another boot: its VFs' changes are void (the reboot reset
  /// them: nothing is put back on the VFs), what outlives a reboot (a pool GUID, the record) is
  /// undone by undo(). @return whether it was of another boot.
  bool forgetRebootedChanges(const std::string& uid, ClaimRecords& records) const;
  /// Undoes what claim `uid`'s record names (its VFs' changes, in reverse, then its CDI spec) and
  /// drops the record; a record whose undo failed stays, with what is left. "" or the errors.
  [[nodiscard]] std::string undo(const std::string& uid, ClaimRecords& records);

  ClaimApi& claims_;
  sysfs::Devices& devices_;
  sysfs::IbInventory& inventory_;
  ClaimEffects& effects_;
  PreparationOptions options_;
};

}  // namespace ibcni::dra
