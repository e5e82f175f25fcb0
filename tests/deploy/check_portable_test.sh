#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# check_portable_test.sh IBCNI IBCNI_IPAM
# The built plugins pass deploy/check-portable.sh (glibc floor 2.34, only glibc, libgcc_s and
# libmnl needed; ibcni-ipam not even libmnl), and the check refuses what would break on older nodes:
# a program binding GLIBC_2.36 (arc4random), one needing libstdc++.so.6, an ELF for neither x86_64
# nor aarch64, a file that is no ELF; and an ibcni or ibcni-ipam that could not dlopen safely
# (statically linked) or an ibcni-ipam needing libmnl. The same rules hold for aarch64 (Grace nodes):
# programs built by Debian's aarch64 cross compiler pass or are refused alike, each checked against
# its own architecture's loader, and --arch refuses the other architecture.
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
check "ibcni-ipam is static and loads no library (its HTTP goes through ibcni)" \
  bash -c 'out=$("$1" "$2") && [[ $out == *"static, no shared library"* ]] || { echo "    $out"; false; }' _ "$checker" "$ipam"

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
# could not dlopen libcurl or libibverbs safely, nor could any static program that names what it
# would resolve in them (a static program that loads nothing passes, whatever its name).
mkdir "$work/named"
cp "$ibcni" "$work/named/ibcni-ipam"
check "an ibcni-ipam needing libmnl.so.0 is refused" refused "$work/named/ibcni-ipam" "needs libmnl.so.0"
printf 'int main(void) { return 0; }\n' >"$work/empty.c"
cc -O1 -static -o "$work/empty" "$work/empty.c"
check "a static program passes" "$checker" "$work/empty"
cp "$work/empty" "$work/named/ibcni-ipam"
check "a static ibcni-ipam that loads nothing passes" "$checker" "$work/named/ibcni-ipam"
printf '#include <dlfcn.h>\nint main(void) { return dlsym(RTLD_DEFAULT, "curl_easy_init") != 0; }\n' >"$work/curl.c"
cc -O1 -static -o "$work/named/ibcni-ipam" "$work/curl.c" 2>/dev/null
check "a static ibcni-ipam resolving curl_easy_init is refused" refused "$work/named/ibcni-ipam" \
  "statically linked, but it names curl_easy_init or ibv_get_device_list"
cp "$work/empty" "$work/named/ibcni"
check "a static ibcni is refused" refused "$work/named/ibcni" "statically linked, but ibcni dlopens the node's libibverbs and libcurl"

printf 'not an ELF\n' >"$work/text"
check "a file that is no ELF is refused" refused "$work/text" "not an ELF file"

# An ELF header for another machine: ibcni's own header with e_machine (offset 18) set to 32-bit ARM.
head -c 64 "$ibcni" >"$work/arm"
printf '\x28\x00' | dd of="$work/arm" bs=1 seek=18 conv=notrunc status=none
check "an ELF for another machine is refused" refused "$work/arm" "not x86_64 or aarch64"

# aarch64: the same promise, against aarch64's loader (/lib/ld-linux-aarch64.so.1).
check "the aarch64 cross compiler is installed (scripts/install-deps.sh)" command -v aarch64-linux-gnu-gcc
aarch64-linux-gnu-gcc -O1 -o "$work/a64" "$work/empty.c"
check "an aarch64 program needing only glibc passes" \
  bash -c 'out=$("$1" "$2") && [[ $out == *"aarch64, needs libc.so.6,"* ]] || { echo "    $out"; false; }' \
  _ "$checker" "$work/a64"
aarch64-linux-gnu-gcc -O1 -Wl,--dynamic-linker=/lib64/ld-linux-x86-64.so.2 -o "$work/a64interp" "$work/empty.c"
check "an aarch64 program asking for x86_64's loader is refused" \
  refused "$work/a64interp" "ELF interpreter '/lib64/ld-linux-x86-64.so.2', not aarch64's /lib/ld-linux-aarch64.so.1"
check "... and with --arch aarch64 (arm64)" "$checker" --arch arm64 "$work/a64"
check "an aarch64 program is refused with --arch x86_64" \
  bash -c 'out=$("$1" --arch x86_64 "$2"); [[ $? -eq 1 && $out == *"built for aarch64, not x86_64"* ]]' _ "$checker" "$work/a64"
check "ibcni is refused with --arch aarch64" \
  bash -c 'out=$("$1" --arch aarch64 "$2"); [[ $? -eq 1 && $out == *"built for x86_64, not aarch64"* ]]' _ "$checker" "$ibcni"
aarch64-linux-gnu-gcc -O1 -o "$work/a64new" "$work/new.c"
check "an aarch64 program binding GLIBC_2.36 (arc4random) is refused" refused "$work/a64new" "binds GLIBC_2.36 (> glibc 2.34 floor) for: arc4random"
aarch64-linux-gnu-g++ -O1 -o "$work/a64cxx" "$work/cxx.cpp"
check "an aarch64 program needing libstdc++.so.6 is refused" refused "$work/a64cxx" "needs libstdc++.so.6"
aarch64-linux-gnu-gcc -O1 -static -o "$work/named/ibcni-ipam" "$work/curl.c" 2>/dev/null
check "a static aarch64 ibcni-ipam resolving curl_easy_init is refused" refused "$work/named/ibcni-ipam" \
  "statically linked, but it names curl_easy_init or ibv_get_device_list"
check "an unknown --arch is a usage error" bash -c '"$1" --arch riscv64 "$2" 2>/dev/null; [[ $? -eq 2 ]]' _ "$checker" "$ibcni"

finish_checks
