#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/check-lengths.sh fails, naming the function or file, on each way of breaking the length
# limits: a function over 80 lines (its signature on one line or several, a member function defined
# in its class, a function indented inside a namespace), a file over 600, a listed one that grew, a
# listed one back within its limit; passes a tree within them; and refuses to run without Universal
# Ctags.
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
# member_of NAME BODY_LINES: NAME defined inside its class, indented (BODY_LINES + 3 lines: a return too).
member_of() {
  printf 'class Mode {\n public:\n  int %s(int a) {\n' "$1"
  for ((i = 0; i < $2; i++)); do printf '    a += %d;\n' "$i"; done
  printf '    return a;\n  }\n};\n\n'
}
# indented_of NAME BODY_LINES: NAME indented inside a namespace, its "}" not at column 0.
indented_of() {
  printf 'namespace ns {\n  int %s(int a) {\n' "$1"
  for ((i = 0; i < $2; i++)); do printf '    a += %d;\n' "$i"; done
  printf '  }\n}  // namespace ns\n\n'
}
{ function_of short 10; function_of inClass 5; } >"$work/plugin/modes/mode.cpp"
run
[[ $rc -eq 0 ]] && pass "a tree within the limits passes" || fail "a clean tree failed: $out"

function_of tooLong 80 >>"$work/plugin/modes/mode.cpp"  # 82 lines
run
[[ $rc -eq 1 ]] && grep -q '^plugin/modes/mode.cpp: function tooLong is 82 lines, over the limit of 80' <<<"$out" &&
  pass "a function over 80 lines fails, named" || fail "a long function was not reported (rc $rc): $out"

{ function_of short 10; function_of inClass 5; } >"$work/plugin/modes/mode.cpp"  # within the limits again
{ function_of short 10; member_of shortMember 10; member_of longMember 79; } >"$work/plugin/modes/mode.h"  # 82 lines
run
[[ $rc -eq 1 ]] && grep -q '^plugin/modes/mode.h: function Mode::longMember is 82 lines, over the limit' <<<"$out" &&
  ! grep -q shortMember <<<"$out" && pass "a long member function defined in its class fails, named Class::name" ||
  fail "a long member was missed (rc $rc): $out"
rm "$work/plugin/modes/mode.h"

{ indented_of shortIndented 10; indented_of longIndented 80; } >"$work/lib/indented.cpp"  # 82 lines
run
[[ $rc -eq 1 ]] && grep -q '^lib/indented.cpp: function longIndented is 82 lines' <<<"$out" &&
  ! grep -q shortIndented <<<"$out" &&
  pass "a long function not at column 0 fails" || fail "an indented long function was missed (rc $rc): $out"
rm "$work/lib/indented.cpp"

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

rm "$work/ipam/big.cpp"

# Without Universal Ctags the check refuses to run (exit 2) rather than pass what it cannot read.
out=$(CTAGS=$work/no-such-ctags "$check" "$work" 2>&1); rc=$?
[[ $rc -eq 2 ]] && grep -q 'needs Universal Ctags' <<<"$out" &&
  pass "a missing ctags fails, saying what to install" || fail "a missing ctags was not refused (rc $rc): $out"
printf '#!/bin/sh\necho "Exuberant Ctags 5.9~svn20110310, Copyright (C) 1996-2009 Darren Hiebert"\n' >"$work/exuberant"
chmod +x "$work/exuberant"
out=$(CTAGS=$work/exuberant "$check" "$work" 2>&1); rc=$?
[[ $rc -eq 2 ]] && grep -q 'needs Universal Ctags.*found: Exuberant Ctags' <<<"$out" &&
  pass "another ctags (Exuberant) is refused" || fail "Exuberant Ctags was not refused (rc $rc): $out"

echo "$passes passed, $fails failed"
[[ $fails -eq 0 && $passes -eq 11 ]]
