// SPDX-License-Identifier: Apache-2.0
#pragma once

namespace ibcni::plugin {

/// `ibcni doctor [--json]`: collects the node report with the real implementations (libnl, sysfs at
/// /sys, RDMA netlink, the dlopen verbs probe), prints it on stdout as text or JSON.
/// @param argc, argv  main()'s, argv[1] being "doctor"
/// @return 0 when no problem was found, 1 when some were, 2 on a usage error
[[nodiscard]] int runDoctor(int argc, char** argv);

}  // namespace ibcni::plugin
