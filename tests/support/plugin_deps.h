// SPDX-License-Identifier: Apache-2.0
// What the in-process drivers of plugin::dispatch give plugin::Deps besides their fakes: the real
// attachment store under the stateDir and a fixed clock.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "plugin/state/file_attachment_store.h"

namespace ibcni::testing {

/// Deps::makeStore: the real file store under each stateDir.
inline std::function<std::unique_ptr<state::AttachmentStore>(const std::string&)> fileAttachmentStores() {
  return [](const std::string& dir) -> std::unique_ptr<state::AttachmentStore> {
    return std::make_unique<state::FileAttachmentStore>(dir);
  };
}

/// Deps::now: the time every record of a test says.
inline std::string fixedNow() { return "2026-11-21T00:00:00Z"; }

}  // namespace ibcni::testing
