#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `ibcni doctor` on a host without RDMA (our dev and CI machines): valid JSON with no device and a
# "no RDMA devices" problem, exit 1; the text form; usage errors exit 2.
#   ibcni_doctor_test.sh IBCNI
set -uo pipefail
bin=$1
passed=0 failed=0
check() {
  local what=$1
  shift
  if "$@"; then
    echo "PASS $what"
    passed=$((passed + 1))
  else
    echo "FAIL $what"
    failed=$((failed + 1))
  fi
}
if [[ -e /dev/infiniband ]] || { [[ -d /sys/class/infiniband ]] && [[ -n $(ls -A /sys/class/infiniband) ]]; }; then
  echo "SKIP: this host has RDMA devices; the test expects none"
  exit 77
fi

out=$("$bin" doctor --json </dev/null)
rc=$?
echo "$out"
check "doctor --json exits 1 (problems found)" test "$rc" -eq 1
check "doctor --json prints valid JSON" jq -e 'type == "object"' <<<"$out" >/dev/null
check "no RDMA device is listed" jq -e '.devices == []' <<<"$out" >/dev/null
check "a \"no RDMA devices\" problem with a fix" \
  jq -e '[.problems[] | select(.what | test("no RDMA devices")) | select(.fix != "")] | length == 1' <<<"$out" >/dev/null
check "the report has every section" \
  jq -e 'has("rdmaNetnsMode") and has("libibverbs") and has("uverbsDevices") and has("ipoibLinks") and has("sriovPfs")' \
  <<<"$out" >/dev/null

text=$("$bin" doctor </dev/null)
rc=$?
check "doctor (text) exits 1" test "$rc" -eq 1
check "the text report lists the problem" grep -q "no RDMA devices" <<<"$text"
check "the text report says there is no device" grep -q "RDMA devices: none" <<<"$text"

"$bin" doctor --bogus >/dev/null 2>&1
check "an unknown option is a usage error (2)" test $? -eq 2
"$bin" doctor --json --json >/dev/null 2>&1
check "a repeated option is a usage error (2)" test $? -eq 2
msg=$("$bin" doctor extra 2>&1 >/dev/null)
check "the usage goes to stderr" grep -q "usage: ibcni doctor" <<<"$msg"

# Without arguments it is still the CNI plugin: VERSION answers on stdout.
version=$(CNI_COMMAND=VERSION "$bin" </dev/null)
check "without arguments ibcni is the CNI plugin" jq -e '.supportedVersions | length > 0' <<<"$version" >/dev/null

echo "$passed passed, $failed failed"
((failed == 0))
