// SPDX-License-Identifier: Apache-2.0
#pragma once

namespace ibcni::plugin {

/// `ibcni pools CONFIG_FILE [--json]`: the cluster pools of an ibcni network (its ipam.cluster
/// address pool and its guidPool's GUID blocks) as the backend lists them, and the GUIDs this node
/// hands out with their holders. Changes nothing.
/// @param argc, argv  main()'s, argv[1] being "pools"
/// @return 0 listed; 1 a backend or a store could not be read (a CNI error); 2 usage, an unreadable
///         CONFIG_FILE, or a network with no pool to list
[[nodiscard]] int runPools(int argc, char** argv);

}  // namespace ibcni::plugin
