#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GoogleTest binaries of the unit and netns tiers run on the VM's own kernel and user space (part
# `native` of kernel_lab.sh in the arm64 VM), where the arm64 build's unit tier under qemu-user
# cannot prove them:
#   - the golden-byte tests: the netlink requests ibcni builds (VF GUID, link state and MAC, the
#     IPoIB child: tests/unit/netlink/{vf,ipoib}_messages_test.cpp) compared byte for byte with what
#     iproute2 of the same architecture sends (captured with strace); x86_64 runs them in its netns
#     tier;
#   - tests whose kernel calls qemu-user does not pass on (the namespace ioctls: SystemNetnsChecker).
# Nothing may be skipped.
#
#   native_gtests_vm.sh BINARY[:GTEST_FILTER]...
# Prints one PASS/FAIL line per check, ends with "N passed, M failed", exits non-zero on any failure.
set -u
(($#)) || { echo "usage: $0 BINARY[:GTEST_FILTER]..."; exit 2; }
if [[ ${KERNEL_LAB:-} != 1 ]]; then
  echo "FAIL: this script runs inside the kernel-lab VM (KERNEL_LAB=1)"
  exit 1
fi

source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../support/check.sh"

log=$(mktemp -d /tmp/ibcni-native.XXXXXX)
trap 'rm -rf "$log"' EXIT
check "running on $(uname -m), iproute2 $(ip -V 2>&1 | sed 's/.*iproute2-//'), strace present" command -v strace
for arg in "$@"; do
  t=${arg%%:*}
  filter=
  [[ $arg == *:* ]] && filter=${arg#*:}
  name=$(basename "$t")${filter:+ ($filter)}
  "$t" ${filter:+"--gtest_filter=$filter"} >"$log/$name.log" 2>&1
  rc=$?
  sed 's/^/  | /' "$log/$name.log"
  check "$name exits 0" test "$rc" -eq 0
  check "$name ran tests and skipped none" \
    bash -c "grep -q '^\[  PASSED  \] [1-9]' '$log/$name.log' && ! grep -q '^\[  SKIPPED \] [A-Za-z]' '$log/$name.log'"
done
finish_checks
