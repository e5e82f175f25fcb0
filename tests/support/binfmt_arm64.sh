#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Makes this machine run linux/arm64 programs through qemu-user (binfmt_misc), as a container build
# of the arm64 image and its tests need: Debian's qemu-user-static registration of qemu-aarch64
# (/usr/lib/binfmt.d/qemu-aarch64.conf, flag F: the interpreter is opened now, so that it works
# inside an arm64 root file system too). Mounts binfmt_misc when it is not, and registers only when
# no qemu-aarch64 entry exists (one left by systemd-binfmt or an earlier run is used as it is). The
# entry stays (it is the kernel's, for the whole machine): that is what qemu-user-static's own
# installation does on a machine with systemd.
#   binfmt_arm64.sh        exit 0 when an arm64 program runs, 1 with the reason otherwise
set -u
conf=/usr/lib/binfmt.d/qemu-aarch64.conf
dir=/proc/sys/fs/binfmt_misc

[[ -s $conf ]] || { echo "binfmt-arm64: $conf is missing (install qemu-user-static)"; exit 1; }
if [[ ! -e $dir/register ]]; then
  mount -t binfmt_misc binfmt_misc "$dir" 2>/dev/null ||
    { echo "binfmt-arm64: cannot mount binfmt_misc on $dir (needs root and the binfmt_misc module)"; exit 1; }
fi
if [[ ! -e $dir/qemu-aarch64 ]]; then
  grep -v '^#' "$conf" | head -n 1 >"$dir/register" 2>/dev/null ||
    { echo "binfmt-arm64: the kernel refused the qemu-aarch64 entry of $conf"; exit 1; }
fi
grep -qx enabled "$dir/qemu-aarch64" || { echo "binfmt-arm64: the qemu-aarch64 entry is disabled"; exit 1; }
exit 0
