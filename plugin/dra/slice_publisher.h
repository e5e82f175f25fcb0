// SPDX-License-Identifier: Apache-2.0
// Keeps the server's ResourceSlices of one node and driver equal to the node's devices: slices
// created, updated and deleted as the devices change, the pool's generation raised with every
// change (consumers take only the newest generation), nothing written while nothing changed.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plugin/dra/ib_devices.h"
#include "plugin/dra/kube_api.h"
#include "plugin/dra/resource_slices.h"

namespace ibcni::dra {

/// The calls the publisher makes on resource.k8s.io/v1 ResourceSlices.
class SliceApi {
 public:
  virtual ~SliceApi() = default;
  /// The slices of `driver` for node `nodeName` (field selector spec.nodeName and spec.driver).
  [[nodiscard]] virtual ApiResult<std::vector<nlohmann::json>> list(const std::string& driver,
                                                                    const std::string& nodeName) = 0;
  /// POST of a new slice.
  [[nodiscard]] virtual ApiResult<void> create(const nlohmann::json& slice) = 0;
  /// PUT of `slice` (its metadata.resourceVersion is the one replaced: kConflict when it changed).
  [[nodiscard]] virtual ApiResult<void> update(const nlohmann::json& slice) = 0;
  /// DELETE of slice `name` with precondition `uid`; gone already is success.
  [[nodiscard]] virtual ApiResult<void> remove(const std::string& name, const std::string& uid) = 0;
};

/// What one publish() did.
struct PublishReport {
  std::int64_t generation = 0;  ///< the pool's generation now
  std::size_t created = 0;
  std::size_t updated = 0;
  std::size_t deleted = 0;

  [[nodiscard]] bool changed() const { return created + updated + deleted > 0; }
};

class SlicePublisher {
 public:
  /// `options`: the node, driver and GUID pool setting; its generation is ignored (publish() takes
  /// the server's).
  SlicePublisher(SliceApi& api, SliceOptions options);

  /// Makes the server's slices those of `devices`: unchanged when they already say it; otherwise
  /// every slice written at a generation above any the server holds (updated where one of that
  /// name exists, else created), then the slices no longer needed deleted. A conflict (someone
  /// wrote meanwhile) ends the pass with kConflict: the next pass reads again.
  [[nodiscard]] ApiResult<PublishReport> publish(const std::vector<IbDevice>& devices);

 private:
  SliceApi& api_;
  SliceOptions options_;
};

}  // namespace ibcni::dra
