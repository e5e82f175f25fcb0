// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "plugin/cli/command_line.h"

namespace ibcni::plugin {

// `ibcni pools`'s flags.
inline constexpr Flag kPoolsJsonFlag{
    "--json", "",
    "print {\"network\", \"ipam\", \"guidPool\", \"guids\"}: each report, or null when the network has none"};
inline constexpr Flag kPoolsFlags[] = {kPoolsJsonFlag};

/// `ibcni pools CONFIG_FILE [--json]`: the cluster pools of an ibcni network (its ipam.cluster
/// address pool and its guidPool's GUID blocks) as the backend lists them, and the GUIDs this node
/// hands out with their holders. Changes nothing.
/// @param line  parsed against plugin_main.cpp's row: one operand, CONFIG_FILE
/// @return 0 listed; 1 a backend or a store could not be read (a CNI error); 2 usage, an unreadable
///         CONFIG_FILE, or a network with no pool to list
[[nodiscard]] int runPools(const CommandLine& line);

}  // namespace ibcni::plugin
