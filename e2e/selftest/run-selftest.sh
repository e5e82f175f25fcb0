#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Validates the e2e harness itself (no ibcni needed), as root:
#   1. PLUGIN_TYPE=host-device: everything host-device can pass passes, the rest is skipped.
#   2. ... with E2E_RUN_KNOWN_FAILURES=1: exactly the scenarios host-device is known to fail
#      fail (proof that those checks detect the faults).
#   3. fake-host-device (host-device + rollback + tolerant DEL) with every scenario: all pass
#      (proof that the checks of scenarios c and d can pass).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
e2e=$(cd "$here/.." && pwd)
ref=${REF_PLUGIN_DIR:-/usr/lib/cni}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibcni-e2e-selftest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [[ -z ${CNITOOL:-} ]]; then
  "$e2e/build-driver.sh" "$tmp/cnitool" || exit 2
  export CNITOOL=$tmp/cnitool
fi

# A CNI_PATH dir with Debian's plugins, host-device replaced by the fake.
mkdir "$tmp/fakecni"
for p in "$ref"/*; do
  [[ $(basename "$p") == host-device ]] || ln -s "$p" "$tmp/fakecni/"
done
cp "$here/fake-host-device" "$tmp/fakecni/host-device"

bad=0
# expect LABEL WANT-RC WANT-SUMMARY WANT-FAILS -- ENV...
expect() {
  local label=$1 want_rc=$2 want_summary=$3 want_fails=$4 out rc fails line
  shift 5
  out=$(env "$@" PLUGIN_TYPE=host-device E2E_KEEP=0 "$e2e/run.sh" 2>&1)
  rc=$?
  fails=$(grep '^FAIL ' <<<"$out" | awk '{print $2}' | sed 's/:$//' | sort | tr '\n' ' ')
  if [[ $rc == "$want_rc" && $(tail -n1 <<<"$out") == "$want_summary" && $fails == "$want_fails" ]]; then
    echo "ok   $label: $(tail -n1 <<<"$out")"
  else
    bad=1
    echo "BAD  $label: rc=$rc (want $want_rc), fails='$fails' (want '$want_fails')"
    while IFS= read -r line; do echo "     | $line"; done <<<"$out"
  fi
}

expect "host-device, known failures skipped" 0 "7 passed, 0 failed" "" -- \
  REF_PLUGIN_DIR="$ref"
expect "host-device, known failures run" 1 "6 passed, 4 failed" \
  "a_chain_tuning c_del_netns_gone d_failed_add_exhausted d_failed_add_noipam " -- \
  REF_PLUGIN_DIR="$ref" E2E_RUN_KNOWN_FAILURES=1
expect "fake host-device (rollback + tolerant DEL), all scenarios" 0 "10 passed, 0 failed" "" -- \
  REF_PLUGIN_DIR="$tmp/fakecni" FAKE_REAL_PLUGIN_DIR="$ref" E2E_RUN_KNOWN_FAILURES=1

exit "$bad"
