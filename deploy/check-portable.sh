#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Checks that plugin binaries run on any Linux node of their architecture (x86_64 or aarch64: the
# same promise on both) with glibc >= the supported floor, so that a build on a newer distribution
# never ships binaries that fail on older nodes:
#   - it is built for x86_64 or aarch64, and with --arch, for that one;
#   - a dynamic binary may need only glibc (libc.so.6, libm.so.6, ld-linux), libgcc_s.so.1 and
#     libmnl.so.0; ibcni-ipam touches no link, so it may not need libmnl.so.0
#     (no libstdc++, libnl, fmt or spdlog: those are linked in or header-only);
#   - it may bind no glibc symbol version newer than the floor (GLIBC_2.34: Ubuntu 22.04,
#     Debian 12, RHEL/Rocky/Alma 9 and newer) and no libgcc_s version newer than GCC_4.8.0;
#   - its ELF interpreter is its architecture's standard one: /lib64/ld-linux-x86-64.so.2 on
#     x86_64, /lib/ld-linux-aarch64.so.1 on aarch64.
# A statically linked program may not load the node's libcurl or libibverbs (the library would
# bind the node's libc.so.6 beside the program's own static glibc): a static binary naming
# curl_easy_init or ibv_get_device_list (what such a program resolves with dlsym) is refused, and
# ibcni (by file name), which loads both, must be dynamic. ibcni-ipam is static and loads
# neither (its HTTP requests go through `ibcni http-relay`); any other fully static binary passes.
# Used by CI (tests/deploy) and by deploy/Dockerfile's build stage.
#
#   deploy/check-portable.sh [--glibc-floor 2.34] [--arch x86_64|aarch64] BINARY...
# Exit status 0 when every binary passes; 1 with one line per problem otherwise.
set -eu

floor=2.34
gcc_floor=4.8.0
want_arch=
while [ $# -gt 0 ]; do
  case $1 in
    --glibc-floor) floor=$2; shift 2 ;;
    --arch)
      case $2 in
        x86_64 | aarch64) want_arch=$2 ;;
        amd64) want_arch=x86_64 ;;
        arm64) want_arch=aarch64 ;;
        *) echo "check-portable: --arch $2: use x86_64 (amd64) or aarch64 (arm64)" >&2; exit 2 ;;
      esac
      shift 2
      ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "usage: check-portable.sh [--glibc-floor X.Y] [--arch x86_64|aarch64] BINARY..." >&2
  exit 2
fi
command -v readelf >/dev/null || { echo "check-portable: readelf (binutils) is needed" >&2; exit 2; }

# version_gt A B: true when dotted version A is newer than B.
version_gt() {
  [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -n 1)" = "$1" ]
}

status=0
for bin in "$@"; do
  if [ ! -f "$bin" ]; then
    echo "FAIL $bin: no such file"
    status=1
    continue
  fi
  if ! readelf -h "$bin" >/dev/null 2>&1; then
    echo "FAIL $bin: not an ELF file"
    status=1
    continue
  fi
  # Each architecture's own loader; the rest of glibc's sonames are the same on both.
  machine=$(readelf -h "$bin" | sed -n 's/^ *Machine: *//p')
  case $machine in
    "Advanced Micro Devices X86-64") arch=x86_64 loader=/lib64/ld-linux-x86-64.so.2 ;;
    AArch64) arch=aarch64 loader=/lib/ld-linux-aarch64.so.1 ;;
    *) arch= loader= ;;
  esac
  if [ -z "$arch" ]; then
    echo "FAIL $bin: built for '$machine', not x86_64 or aarch64"
    status=1
    continue
  fi
  if [ -n "$want_arch" ] && [ "$arch" != "$want_arch" ]; then
    echo "FAIL $bin: built for $arch, not $want_arch"
    status=1
    continue
  fi
  glibc_needed="libc.so.6 libm.so.6 ${loader##*/} libgcc_s.so.1"
  name=$(basename "$bin")
  case $name in
    ibcni-ipam) allowed_needed=$glibc_needed ;;
    *) allowed_needed="$glibc_needed libmnl.so.0" ;;
  esac
  needed=$(readelf -d -W "$bin" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  if [ -z "$needed" ]; then
    why=
    if [ "$name" = ibcni ]; then
      why="ibcni dlopens the node's libibverbs and libcurl"
    elif grep -aqE 'curl_easy_init|ibv_get_device_list' "$bin"; then
      why="it names curl_easy_init or ibv_get_device_list, so it would dlopen the node's libcurl or libibverbs"
    fi
    if [ -n "$why" ]; then
      echo "FAIL $bin: statically linked, but $why: link it dynamically against glibc"
      status=1
    else
      echo "ok   $bin: $arch, static, no shared library or glibc version needed"
    fi
    continue
  fi
  interp=$(readelf -l -W "$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
  if [ "$interp" != "$loader" ]; then
    echo "FAIL $bin: ELF interpreter '$interp', not $arch's $loader"
    status=1
  fi
  bad=0
  for lib in $needed; do
    case " $allowed_needed " in
      *" $lib "*) ;;
      *) echo "FAIL $bin: needs $lib, which a node may not have (link it statically)"; bad=1 ;;
    esac
  done
  # The version-needs section lists every symbol version the binary binds, library by library.
  versions=$(readelf -V -W "$bin" | sed -n 's/.*Name: \([A-Z_]*_[0-9.]*\) .*/\1/p' | sort -u)
  newest_glibc=0
  for v in $versions; do
    case $v in
      GLIBC_PRIVATE) ;;
      GLIBC_*)
        n=${v#GLIBC_}
        if version_gt "$n" "$floor"; then
          symbols=$(readelf --dyn-syms -W "$bin" | awk -v v="@$v" 'index($8, v) {sub(/@.*/, "", $8); print $8}' | sort -u | tr '\n' ' ')
          echo "FAIL $bin: binds $v (> glibc $floor floor) for: ${symbols% }"
          bad=1
        fi
        if version_gt "$n" "$newest_glibc"; then newest_glibc=$n; fi
        ;;
      GCC_*)
        if version_gt "${v#GCC_}" "$gcc_floor"; then
          echo "FAIL $bin: binds $v of libgcc_s (> GCC_$gcc_floor)"
          bad=1
        fi
        ;;
      GLIBCXX_* | CXXABI_*)
        echo "FAIL $bin: binds $v of libstdc++ (link it with -static-libstdc++)"
        bad=1
        ;;
    esac
  done
  if [ "$bad" -ne 0 ]; then
    status=1
  else
    echo "ok   $bin: $arch, needs $(echo $needed | tr ' ' ','), glibc >= $newest_glibc (floor $floor)"
  fi
done
exit $status
