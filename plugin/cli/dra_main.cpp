// SPDX-License-Identifier: Apache-2.0
// ibcni-dra: the kubelet's DRA driver for InfiniBand VFs and IPoIB ports (dra_daemon.h). An
// executable of its own, linked with gRPC, so that the CNI plugin never loads it.
#include "plugin/cli/dra_daemon.h"

int main(int argc, char** argv) {
  return ibcni::plugin::runDraDaemon(argc, argv, "ibcni-dra", [](ibcni::dra::ClaimEffects& real) -> auto& { return real; });
}
