// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <utility>

#include "ibcni/verbs/verbs_probe.h"

namespace ibcni::verbs {

/// verbs::VerbsProbe for production: every probe() forks a child that joins the pod's network
/// namespace, loads libibverbs with dlopen and answers through a pipe (probe_codec.h).
///
/// Why a child: setns(CLONE_NEWNET) and libibverbs' process-wide state (loaded providers, the
/// cached device list, open contexts) stay out of the plugin's process, a provider that hangs or
/// crashes costs only the child, and the timeout is enforced with SIGKILL.
/// Why dlopen: the plugin does not link libibverbs, so that it starts on hosts without rdma-core
/// (the probe then reports available=false with dlerror()'s text) and uses the host's rdma-core
/// and providers where they exist.
///
/// Choices beyond the interface comments:
///  * The parent opens request.netnsPath (close-on-exec) before forking, so a missing path is the
///    open's error (ENOENT) and no child is made; setns failing in the child (EINVAL for a file
///    that is not a network namespace) comes back as that error, op "setns ...".
///  * The child's standard output is /dev/null (the plugin's stdout carries the CNI result);
///    standard error is inherited (libibverbs' warnings about providers stay visible). The child
///    gets SIGKILL if the parent dies (PR_SET_PDEATHSIG).
///  * An empty request.device picks the only device listed; with none or several, nothing is
///    opened (opened=false, openError empty) and `devices` lists what there is.
///  * ibv_get_device_list failing (ENOSYS without ib_uverbs in the kernel) is reported as no
///    devices, with "ibv_get_device_list: <strerror>" in openError.
///  * GID types come from _ibv_query_gid_ex when libibverbs exports it (rdma-core >= 32), else
///    from sysfs gid_attrs/types/<index>; IBV_GID_TYPE_IB and _ROCE_V1 are both written the
///    kernel's way, "IB/RoCE v1".
///  * The QP probe: PD, a one-entry CQ, a UD QP (one send and one receive WR), modified to INIT
///    (pkey index 0, the port, qkey 0x11111111), RTR and RTS; qpProbeError names the step that
///    failed and its errno ("ibv_modify_qp RTR: Invalid argument (EINVAL)"). Everything made is
///    destroyed before the answer is written.
///  * A child that exits without a well-formed answer (a provider crashed) is EPROTO, with op
///    naming how it ended. Every child is reaped with waitpid before probe() returns.
class DlopenVerbsProbe final : public VerbsProbe {
 public:
  /// @param library what the child dlopens. Only tests pass anything but the default (a library
  ///        that does not exist, or one whose constructor never returns).
  explicit DlopenVerbsProbe(std::string library = "libibverbs.so.1") : library_(std::move(library)) {}

  [[nodiscard]] os::SysResult<ProbeResult> probe(const ProbeRequest& request) override;

 private:
  std::string library_;
};

}  // namespace ibcni::verbs
