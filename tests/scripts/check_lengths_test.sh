#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/check-lengths.sh fails, naming the function or file, on each way of breaking the length
# limits: a function over 80 lines (its signature on one line or several), a file over 600, a
# listed one that grew, a listed one back within its limit; and passes a tree within them.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
check=$repo/scripts/check-lengths.sh
work=$(mktemp -d /tmp/ibcni-lengths.XXXXXX)
trap 'rm -rf "$work"' EXIT
passes=0 fails=0
pass() { echo "PASS $*"; passes=$((passes + 1)); }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
run() { out=$("$check" "$work" 2>&1); rc=$?; }

mkdir -p "$work"/{include,lib,ipam,plugin/modes,scripts}
: >"$work/scripts/length-debt.txt"
# function NAME BODY_LINES [SPLIT]: a definition whose body has BODY_LINES statements (2 more lines:
# the signature and the closing brace); SPLIT puts its parameters on a second line.
function_of() {
  if [[ -n ${3:-} ]]; then
    printf 'int %s(int a,\n       int b) {\n' "$1"
  else
    printf 'int %s(int a) {\n' "$1"
  fi
  for ((i = 0; i < $2; i++)); do printf '  a += %d;\n' "$i"; done
  printf '}\n\n'
}
{ function_of short 10; function_of inClass 5; } >"$work/plugin/modes/mode.cpp"
run
[[ $rc -eq 0 ]] && pass "a tree within the limits passes" || fail "a clean tree failed: $out"

function_of tooLong 80 >>"$work/plugin/modes/mode.cpp"  # 82 lines
run
[[ $rc -eq 1 ]] && grep -q '^plugin/modes/mode.cpp: function tooLong is 82 lines, over the limit of 80' <<<"$out" &&
  pass "a function over 80 lines fails, named" || fail "a long function was not reported (rc $rc): $out"

{ function_of short 10; function_of split 79 yes; } >"$work/plugin/modes/mode.cpp"  # 82 lines, two-line signature
run
[[ $rc -eq 1 ]] && grep -q 'function split is 82 lines' <<<"$out" &&
  pass "a long function whose signature runs over two lines fails" || fail "a split signature was missed (rc $rc): $out"

printf 'function\tplugin/modes/mode.cpp\tsplit\t82\n' >"$work/scripts/length-debt.txt"
run
[[ $rc -eq 0 ]] && pass "a listed function at its listed length passes" || fail "a listed function failed: $out"
{ function_of short 10; function_of split 85 yes; } >"$work/plugin/modes/mode.cpp"
run
[[ $rc -eq 1 ]] && grep -q 'function split grew to 88 lines (scripts/length-debt.txt lists 82' <<<"$out" &&
  pass "a listed function that grew fails" || fail "growth was not reported (rc $rc): $out"
{ function_of short 10; function_of split 40 yes; } >"$work/plugin/modes/mode.cpp"
run
[[ $rc -eq 1 ]] && grep -q 'function split is listed in scripts/length-debt.txt but is within its limit now' <<<"$out" &&
  pass "a listed function back within the limit fails until its line goes" || fail "a stale entry passed (rc $rc): $out"
: >"$work/scripts/length-debt.txt"

for ((f = 0; f < 60; f++)); do function_of "f$f" 8; done >"$work/ipam/big.cpp"  # 60 x 11 = 660 lines
run
[[ $rc -eq 1 ]] && grep -q '^ipam/big.cpp is 660 lines, over the limit of 600' <<<"$out" &&
  pass "a file over 600 lines fails" || fail "a long file was not reported (rc $rc): $out"

echo "$passes passed, $fails failed"
[[ $fails -eq 0 && $passes -eq 7 ]]
