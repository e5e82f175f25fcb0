// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "plugin/doctor/doctor.h"

namespace ibcni::doctor {

/// `ibcni doctor --json`: the report as one JSON object (two-space indented), keys in camelCase as
/// in DoctorReport: rdmaNetnsMode, libibverbs {available, reason}, uverbsDevices, gpuDirect, devices[] (name,
/// index, nodeGuid, ports[]), ipoibLinks[], sriovPfs[] (vfs[]), problems[] {what, fix,
/// informational}; with --config also config {file, name, mode, resourceName, works, ok[],
/// candidates[] {device, works, needsGuid, problem, warnings[]}, problems[]}. Unknown strings
/// are null, pkeys are "0xffff" strings.
[[nodiscard]] std::string printDoctorReport(const doctor::DoctorReport& report);

}  // namespace ibcni::doctor
