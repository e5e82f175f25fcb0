#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# installer_test.sh IBCNI IBCNI_IPAM
# deploy/installer/ibcni-install against fake node roots (needs root for chroot; 77 = skip):
#   node   : the loader, libc, libgcc_s and libmnl the plugin needs, and nothing else
#   nomnl  : the same without libmnl.so.0: a node on which the new ibcni cannot run
# Covers: fresh install, nothing done the second time, upgrade by atomic rename, a binary that
# cannot run on the node never replaces a working one, a broken image changes nothing, leftovers of
# a killed run, no failed exec while binaries are replaced under a runtime's feet, sleep + SIGTERM,
# --uninstall leaving other plugins alone, bad options.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$repo/tests/support/check.sh"
source "$here/node_root.sh"
installer=$repo/deploy/installer/ibcni-install
ibcni=${1:?usage: installer_test.sh IBCNI IBCNI_IPAM}
ipam=${2:?usage: installer_test.sh IBCNI IBCNI_IPAM}

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root (chroot)"
  exit 77
fi

work=$(mktemp -d)
bg_pids=()
cleanup() {
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

make_root() { make_node_root "$1" "$ibcni" "${2:-}"; }

# image DIR: what the image carries in /opt/ibcni/bin.
make_image() {
  mkdir -p "$1"
  cp "$ibcni" "$1/ibcni"
  cp "$ipam" "$1/ibcni-ipam"
}

# run_installer ROOT IMAGE LOG [ARGS...]: one run that exits after installing.
run_installer() {
  local root=$1 image=$2 log=$3
  shift 3
  IBCNI_HOST_ROOT=$root IBCNI_SOURCE_DIR=$image "$installer" --no-sleep "$@" >"$log" 2>&1
}

inode() { stat -c %i "$1"; }
no_leftovers() { ! compgen -G "$1/opt/cni/bin/.*ibcni-install*" >/dev/null; }
logged() { grep -q -- "$2" "$1" || { echo "--- $1:"; cat "$1"; return 1; }; }

node=$work/node
nomnl=$work/nomnl
image=$work/image
make_root "$node"
make_root "$nomnl" libmnl.so.0
make_image "$image"
expected_ibcni=$("$ibcni" version)
expected_ipam=$("$ipam" version)

# --- fresh install
check "fresh install exits 0" run_installer "$node" "$image" "$work/fresh.log"
check "fresh install: ibcni is the image's binary" cmp -s "$ibcni" "$node/opt/cni/bin/ibcni"
check "fresh install: ibcni-ipam is the image's binary" cmp -s "$ipam" "$node/opt/cni/bin/ibcni-ipam"
check "fresh install: both are mode 755" test "$(stat -c %a "$node/opt/cni/bin/ibcni") $(stat -c %a "$node/opt/cni/bin/ibcni-ipam")" = "755 755"
check "fresh install: ibcni runs on the node" test "$(chroot "$node" /opt/cni/bin/ibcni version)" = "$expected_ibcni"
check "fresh install: logged what it installed" logged "$work/fresh.log" "installed /opt/cni/bin/ibcni: $expected_ibcni"
check "fresh install: no temporary file left" no_leftovers "$node"

# --- the second run changes nothing
before="$(inode "$node/opt/cni/bin/ibcni") $(inode "$node/opt/cni/bin/ibcni-ipam")"
check "second run exits 0" run_installer "$node" "$image" "$work/again.log"
check "second run: same files (inodes unchanged)" test "$(inode "$node/opt/cni/bin/ibcni") $(inode "$node/opt/cni/bin/ibcni-ipam")" = "$before"
check "second run: says nothing to do" logged "$work/again.log" "is already $expected_ibcni: nothing to do"

# --- upgrade: a different working binary is replaced by rename (new inode), never rewritten
cp "$ibcni" "$node/opt/cni/bin/ibcni" && printf 'older build' >>"$node/opt/cni/bin/ibcni"
old_inode=$(inode "$node/opt/cni/bin/ibcni")
check "upgrade exits 0" run_installer "$node" "$image" "$work/upgrade.log"
check "upgrade: ibcni is now the image's" cmp -s "$ibcni" "$node/opt/cni/bin/ibcni"
check "upgrade: by rename (new inode)" test "$(inode "$node/opt/cni/bin/ibcni")" != "$old_inode"
check "upgrade: logged old -> new" logged "$work/upgrade.log" "upgraded /opt/cni/bin/ibcni: $expected_ibcni -> $expected_ibcni"
check "upgrade: no temporary file left" no_leftovers "$node"

# --- a node the new binary cannot run on keeps its working binary
cp "$ipam" "$nomnl/opt/cni/bin/ibcni"   # a working program in ibcni's place (ibcni-ipam needs no libmnl)
cp "$nomnl/opt/cni/bin/ibcni" "$work/kept"
run_installer "$nomnl" "$image" "$work/nomnl.log"
rc=$?
check "unrunnable binary: installer exits 1" test "$rc" -eq 1
check "unrunnable binary: the working ibcni was kept" cmp -s "$work/kept" "$nomnl/opt/cni/bin/ibcni"
check "unrunnable binary: the loader's reason is logged" logged "$work/nomnl.log" "libmnl.so.0"
check "unrunnable binary: says it was not replaced" logged "$work/nomnl.log" "cannot run on this node, so /opt/cni/bin/ibcni was not replaced"
check "unrunnable binary: no temporary file left" no_leftovers "$nomnl"
check "unrunnable binary: ibcni-ipam (no libmnl needed) still installed" cmp -s "$ipam" "$nomnl/opt/cni/bin/ibcni-ipam"

# --- a broken image (truncated binary) touches nothing
broken=$work/broken-image
make_image "$broken"
head -c 4096 "$ibcni" >"$broken/ibcni"
rm -rf "$work/node2" && make_root "$work/node2" && make_image "$work/node2/opt/cni/bin"
printf 'older build' >>"$work/node2/opt/cni/bin/ibcni"
cp "$work/node2/opt/cni/bin/ibcni" "$work/kept2"
run_installer "$work/node2" "$broken" "$work/broken.log"
rc=$?
check "broken image: installer exits 1" test "$rc" -eq 1
check "broken image: node's ibcni untouched" cmp -s "$work/kept2" "$work/node2/opt/cni/bin/ibcni"
check "broken image: says the image is broken" logged "$work/broken.log" "does not run"

# --- leftovers of a killed run are removed
touch "$node/opt/cni/bin/.ibcni.ibcni-install.AbC123"
check "leftover: run exits 0" run_installer "$node" "$image" "$work/leftover.log"
check "leftover: removed" no_leftovers "$node"
check "leftover: logged" logged "$work/leftover.log" "removing leftover /opt/cni/bin/.ibcni.ibcni-install.AbC123"

# --- a runtime exec'ing the plugin while it is replaced never fails (no ETXTBSY, ENOENT, ENOEXEC)
alt=$work/alt-image
make_image "$alt"
printf 'another build' >>"$alt/ibcni"
(
  fails=0
  for _ in $(seq 400); do
    chroot "$node" /opt/cni/bin/ibcni version >/dev/null 2>&1 || fails=$((fails + 1))
  done
  echo "$fails" >"$work/exec-fails"
) &
runner=$!
bg_pids+=("$runner")
swaps=0
while kill -0 "$runner" 2>/dev/null && ((swaps < 60)); do
  src=$image
  ((swaps % 2)) && src=$alt
  run_installer "$node" "$src" "$work/swap.log" || { echo "--- swap $swaps:"; cat "$work/swap.log"; break; }
  swaps=$((swaps + 1))
done
wait "$runner"
echo "replaced ibcni $swaps times while it was being exec'd"
check "concurrent exec: at least 10 replacements happened" test "$swaps" -ge 10
check "concurrent exec: no exec failed" test "$(cat "$work/exec-fails")" -eq 0
check "concurrent exec: no temporary file left" no_leftovers "$node"

# --- default mode sleeps after installing and stops at once on SIGTERM
IBCNI_HOST_ROOT=$node IBCNI_SOURCE_DIR=$image "$installer" >"$work/sleep.log" 2>&1 &
sleeper=$!
bg_pids+=("$sleeper")
for _ in $(seq 100); do
  grep -q "sleeping" "$work/sleep.log" && break
  sleep 0.1
done
check "sleep mode: sleeps after installing" logged "$work/sleep.log" "done; sleeping until the pod is stopped"
check "sleep mode: still running" kill -0 "$sleeper"
kill -TERM "$sleeper"
stopped=1
for _ in $(seq 30); do
  kill -0 "$sleeper" 2>/dev/null || { stopped=0; break; }
  sleep 0.1
done
check "sleep mode: SIGTERM stops it within 3 s" test "$stopped" -eq 0
wait "$sleeper"
check "sleep mode: exit status 0 after SIGTERM" test $? -eq 0

# --- uninstall removes ibcni's binaries and nothing else
cp "$ipam" "$node/opt/cni/bin/host-local"
check "uninstall exits 0" run_installer "$node" "$image" "$work/uninstall.log" --uninstall
check "uninstall: ibcni removed" test ! -e "$node/opt/cni/bin/ibcni"
check "uninstall: ibcni-ipam removed" test ! -e "$node/opt/cni/bin/ibcni-ipam"
check "uninstall: another plugin left alone" test -e "$node/opt/cni/bin/host-local"
check "uninstall: logged" logged "$work/uninstall.log" "removed /opt/cni/bin/ibcni ($expected_ibcni)"
check "uninstall again: exits 0" run_installer "$node" "$image" "$work/uninstall2.log" --uninstall

# --- the CNI bin directory is created when missing; bad options are refused
rm -rf "$work/node3" && make_root "$work/node3" && rmdir "$work/node3/opt/cni/bin"
check "custom bin dir: created and filled" run_installer "$work/node3" "$image" "$work/custom.log" --cni-bin-dir /usr/libexec/cni
check "custom bin dir: ibcni runs from it" test "$(chroot "$work/node3" /usr/libexec/cni/ibcni version)" = "$expected_ibcni"
check "custom bin dir: ibcni-ipam runs from it" test "$(chroot "$work/node3" /usr/libexec/cni/ibcni-ipam version)" = "$expected_ipam"
run_installer "$node" "$image" "$work/bad1.log" --cni-bin-dir opt/cni/bin
check "relative --cni-bin-dir refused with status 2" test $? -eq 2
check "relative --cni-bin-dir: message names it" logged "$work/bad1.log" "must be an absolute path"
run_installer "$work/missing-root" "$image" "$work/bad2.log"
check "missing host root refused with status 2" test $? -eq 2
run_installer "$node" "$image" "$work/bad3.log" --log-level loud
check "bad --log-level refused with status 2" test $? -eq 2

finish_checks
