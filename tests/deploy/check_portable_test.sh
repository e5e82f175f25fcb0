#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# check_portable_test.sh IBCNI IBCNI_IPAM
# The built plugins pass deploy/check-portable.sh (glibc floor 2.34, only glibc, libgcc_s and
# libmnl needed; ibcni-ipam not even libmnl), and the check refuses what would break on older nodes:
# a program binding GLIBC_2.36 (arc4random), one needing libstdc++.so.6, a non-x86_64 ELF, a file
# that is no ELF; and an ibcni or ibcni-ipam that could not dlopen safely (statically linked) or an
# ibcni-ipam needing libmnl.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$repo/tests/support/check.sh"
checker=$repo/deploy/check-portable.sh
ibcni=${1:?usage: check_portable_test.sh IBCNI IBCNI_IPAM}
ipam=${2:?usage: check_portable_test.sh IBCNI IBCNI_IPAM}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

check "ibcni and ibcni-ipam pass" "$checker" "$ibcni" "$ipam"
check "ibcni-ipam is dynamic and needs only glibc and libgcc_s" \
  bash -c 'out=$("$1" "$2") && [[ $out == *"needs "* && $out != *libmnl* ]] || { echo "    $out"; false; }' _ "$checker" "$ipam"

# refused PROGRAM REASON: check-portable exits 1 and names REASON.
refused() {
  local out
  out=$("$checker" "$1" 2>&1)
  local rc=$?
  sed "s/^/    check-portable: /" <<<"$out"
  [[ $rc -eq 1 && $out == *"$2"* ]]
}

printf '#include <stdlib.h>\nint main(void) { return (int)(arc4random() & 1); }\n' >"$work/new.c"
cc -O1 -o "$work/new" "$work/new.c"
check "a program binding GLIBC_2.36 (arc4random) is refused" refused "$work/new" "binds GLIBC_2.36 (> glibc 2.34 floor) for: arc4random"
check "... but passes with --glibc-floor 2.36" "$checker" --glibc-floor 2.36 "$work/new"

printf '#include <string>\nint main(int c, char**) { return static_cast<int>(std::to_string(c).size()); }\n' >"$work/cxx.cpp"
c++ -O1 -o "$work/cxx" "$work/cxx.cpp"
check "a program needing libstdc++.so.6 is refused" refused "$work/cxx" "needs libstdc++.so.6"

# The rules by file name: ibcni's image named ibcni-ipam needs libmnl; a static program named ibcni
# or ibcni-ipam could not dlopen libcurl or libibverbs safely (a static program of another name passes).
mkdir "$work/named"
cp "$ibcni" "$work/named/ibcni-ipam"
check "an ibcni-ipam needing libmnl.so.0 is refused" refused "$work/named/ibcni-ipam" "needs libmnl.so.0"
printf 'int main(void) { return 0; }\n' >"$work/empty.c"
cc -O1 -static -o "$work/empty" "$work/empty.c"
check "a static program passes" "$checker" "$work/empty"
cp "$work/empty" "$work/named/ibcni-ipam"
check "a static ibcni-ipam is refused" refused "$work/named/ibcni-ipam" "statically linked, but ibcni-ipam dlopens the node's libcurl"
cp "$work/empty" "$work/named/ibcni"
check "a static ibcni is refused" refused "$work/named/ibcni" "statically linked, but ibcni dlopens the node's libibverbs and libcurl"

printf 'not an ELF\n' >"$work/text"
check "a file that is no ELF is refused" refused "$work/text" "not an ELF file"

# An ELF header for another machine: ibcni's own header with e_machine (offset 18) set to AArch64.
head -c 64 "$ibcni" >"$work/arm"
printf '\xb7\x00' | dd of="$work/arm" bs=1 seek=18 conv=notrunc status=none
check "an ELF for another machine is refused" refused "$work/arm" "not x86_64"

finish_checks
