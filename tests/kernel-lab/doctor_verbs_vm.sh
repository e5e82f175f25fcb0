#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# doctor_vm_check.sh, then verbs_check_vm.sh, both against the same ibcni (each refuses to run
# outside the VM); the second part of ctest's kernel_lab boot (kernel_lab.sh, see README.md).
# Exits non-zero when either fails. By hand, from the repository root:
#   ../shared/kernel-lab/run.sh --nics 4 -- bash tests/kernel-lab/doctor_verbs_vm.sh build/ibcni
set -u
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
ibcni=${1:?usage: $0 <ibcni>}
bash "$here/doctor_vm_check.sh" "$ibcni"
doctor=$?
bash "$here/verbs_check_vm.sh" "$ibcni"
verbs=$?
echo "doctor_vm_check.sh: exit $doctor; verbs_check_vm.sh: exit $verbs"
exit $((doctor || verbs))
