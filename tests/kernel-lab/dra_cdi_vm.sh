#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ibcni-dra's CDI spec consumed by podman: runs cdi_podman_vm_test (rxe0 on eth0 standing in for a
# VF's RDMA device; the spec from vfCdiDevice/writeCdiSpec over SysfsInventory's character devices;
# Debian's podman 4.3 with --device ibcni.io/vf=<name>, and the device metadata file with
# --device ibcni.io/metadata=<claim>_<request>, in a private mount namespace), then checks
# that nothing of it is left in the VM: no /run/cdi or /etc/cdi, no temporary directory, no podman
# or conmon process, no cgroup podman made (removed when empty). The part dra_cdi of kernel_lab.sh
# (x86_64 only: the arm64 VM's root file system has no podman).
#
# Inside the VM only (KERNEL_LAB=1). By hand, from the repository root:
#   ../shared/kernel-lab/run.sh --nics 1 -- bash tests/kernel-lab/dra_cdi_vm.sh build/tests/kernel-lab/cdi_podman_vm_test
#
# Prints one PASS/FAIL line per check, ends with "N passed, M failed", exits non-zero on a failure.
set -u
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
gtest=$(readlink -f "${1:?usage: $0 <cdi_podman_vm_test>}")
if [[ ${KERNEL_LAB:-} != 1 ]]; then
  echo "FAIL: this script makes rxe0 and runs podman as root, only inside the kernel-lab VM (KERNEL_LAB=1):"
  echo "      ../shared/kernel-lab/run.sh --nics 1 -- bash $0 $gtest"
  exit 1
fi
source "$here/../support/check.sh"

cgroups() { find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | sort; }
# (files, not <(...): the VM's /dev has no /dev/fd)
cg=$(mktemp -d /tmp/dra-cdi-cgroups.XXXXXX)
cgroups >"$cg/before"
had_run_cdi=$([[ -e /run/cdi ]] && echo yes || echo no)
had_etc_cdi=$([[ -e /etc/cdi ]] && echo yes || echo no)

log=$(mktemp /tmp/dra-cdi-gtest.XXXXXX)
t0=$SECONDS
"$gtest" >"$log" 2>&1
rc=$?
sed 's/^/  | /' "$log"
check "cdi_podman_vm_test exits 0 ($((SECONDS - t0)) s)" test "$rc" -eq 0
check "cdi_podman_vm_test skipped nothing inside the VM" bash -c "! grep -q '^\[  SKIPPED \]' '$log'"
check "cdi_podman_vm_test ran its 5 tests" grep -q '^\[==========\] 5 tests from 1 test suite ran' "$log"
rm -f "$log"

check "no /run/cdi made in the VM (had one: $had_run_cdi)" test "$([[ -e /run/cdi ]] && echo yes || echo no)" = "$had_run_cdi"
check "no /etc/cdi made in the VM (had one: $had_etc_cdi)" test "$([[ -e /etc/cdi ]] && echo yes || echo no)" = "$had_etc_cdi"
left=$(compgen -G '/tmp/ibcni-cdi.*' | xargs)
check "no temporary directory left (${left:-none})" test -z "$left"
procs=$(pgrep -x -d, 'podman|conmon')
check "no podman or conmon process left (${procs:-none})" test -z "$procs"
# podman's cgroupfs manager leaves its parent cgroups (libpod_parent, ...): removed when empty,
# deepest first.
cgroups >"$cg/after"
made=$(comm -13 "$cg/before" "$cg/after")
for d in $(sort -r "$cg/after"); do grep -qxF "$d" "$cg/before" || rmdir "$d" 2>/dev/null; done
cgroups >"$cg/after"
left=$(comm -13 "$cg/before" "$cg/after" | xargs)
rm -rf "$cg"
check "no cgroup left (made: $(xargs <<<"$made" | sed 's|/sys/fs/cgroup/||g'); left: ${left:-none})" test -z "$left"
check "rxe0 deleted" bash -c '! rdma link show rxe0/1 >/dev/null 2>&1'
finish_checks
