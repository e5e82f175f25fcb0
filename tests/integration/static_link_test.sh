#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# static_link_test.sh <ibcni binary>
# The plugin is copied onto nodes that may lack every build dependency: `ldd` must list only
# glibc's own libraries (the vDSO, the loader, libc, and libm/libpthread/libdl/librt) and,
# should it appear, libmnl. Anything else (libstdc++, libgcc_s, libnl, libfmt, libspdlog, ...)
# fails. A fully static binary passes.
set -u
bin=${1:?usage: static_link_test.sh <ibcni binary>}
if [[ ! -x $bin ]]; then
  echo "FAIL: $bin is not an executable file (build the ibcni target first)"
  exit 1
fi
out=$(LC_ALL=C ldd "$bin" 2>&1)
rc=$?
if ((rc != 0)); then
  if grep -qE 'not a dynamic executable|statically linked' <<<"$out"; then
    echo "PASS: $bin is statically linked"
    exit 0
  fi
  echo "FAIL: ldd $bin exited $rc:"
  echo "$out"
  exit 1
fi
echo "ldd $bin:"
echo "$out"
allowed='^(linux-vdso\.so\.[0-9]+|linux-gate\.so\.[0-9]+|ld-linux[-a-z0-9_.]*\.so\.[0-9]+|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libmnl\.so\.0)$'
bad=0
while read -r first rest; do
  [[ -z $first ]] && continue
  name=${first##*/}  # "/lib64/ld-linux-x86-64.so.2 (0x...)" names the loader by path
  if [[ $rest == *"not found"* ]]; then
    echo "FAIL: $name is not found"
    bad=1
  elif [[ ! $name =~ $allowed ]]; then
    echo "FAIL: $bin needs $name at run time (only glibc's libraries are allowed)"
    bad=1
  fi
done <<<"$out"
if ((bad)); then
  exit 1
fi
echo "PASS: $bin needs only glibc's libraries"
