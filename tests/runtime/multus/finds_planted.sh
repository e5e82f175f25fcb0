#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# finds_planted.sh PLANT PATTERN BUILD_DIR: multus_e2e_test.sh with MULTUS_E2E_PLANT=PLANT must fail,
# and one of its FAIL lines must match PATTERN (an extended regex): the check that finds the fault.
# 77 when that test skips.
set -u
here=$(cd "$(dirname "$0")" && pwd)
plant=${1:?usage: finds_planted.sh PLANT PATTERN BUILD_DIR} pattern=${2:?} build=${3:?}
out=$(MULTUS_E2E_PLANT=$plant bash "$here/multus_e2e_test.sh" "$build" 2>&1)
rc=$?
printf '%s\n' "$out"
((rc == 77)) && exit 77
if ((rc == 0)); then
  echo "FAIL: the planted fault ($plant) was not found: every check passed"
  exit 1
fi
if ! grep -Eq "^FAIL .*($pattern)" <<<"$out"; then
  echo "FAIL: the planted fault ($plant) failed the test, but no FAIL line matches '$pattern'"
  exit 1
fi
echo "the planted fault ($plant) was found: $(grep -Ec '^FAIL ' <<<"$out") check(s) failed, among them '$pattern'"
