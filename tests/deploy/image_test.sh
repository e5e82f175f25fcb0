#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# image_test.sh BUILD_DIR
# Builds deploy/Dockerfile for real, with podman (daemonless; --isolation chroot, so no OCI runtime
# or cgroups are needed) on a Debian 12 base image made here with mmdebstrap from Debian's mirror,
# since no container registry is reachable. Then checks the image and runs its entrypoint the way
# the DaemonSet does: the image's root with a fake node root bind-mounted at /host.
#   - both stages build; the build stage's check-portable passes (else the build fails);
#   - the image holds ibcni, ibcni-ipam and the installer as ENTRYPOINT, the tools the installer
#     runs (chroot, cmp, stat, sync), and ibcni-agent, which the installer starts and which runs there
#     and takes each option the installer gives it; its binaries pass deploy/check-portable.sh here too;
#   - the image holds ibcni-dra, which runs there (gRPC and protobuf-lite linked in, libcurl-gnutls copied in)
#     and takes each flag the chart's dra DaemonSet gives it; the build stage's Go is the machine's
#     own (/usr/local/go, imported as the GO_IMAGE) and fetches k8s.io/kubelet from the module proxy;
#   - the entrypoint installs both binaries into the node's /opt/cni/bin, and they run there;
#   - against a node without libmnl.so.0 it refuses and leaves the node's binary alone;
#   - linux/arm64: the same Dockerfile for the other platform (podman build --platform linux/arm64,
#     the plugins cross-compiled in the build stage on this machine's platform; the runtime stage on
#     an arm64 Debian 12 base made with mmdebstrap, its one RUN step under qemu-user binfmt); one
#     manifest list holds both images; the arm64 image's binaries are aarch64 and pass
#     check-portable --arch aarch64; its ibcni prints the same version line under emulation, and
#     its entrypoint installs both binaries into an arm64 node root, where they run; it has no
#     ibcni-dra (the cross build has no gRPC).
# The base trees are kept in the machine's test cache (tests/support/machine_cache.sh: made once a
# week per machine, not per build tree); the container store is the test's own, in
# BUILD_DIR/deploy-image, and is removed at the end.
# Needs root, podman, mmdebstrap and qemu-user-static (scripts/install-deps.sh);
# 77 = skip when not root.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$repo/tests/support/check.sh"
source "$here/node_root.sh"
source "$repo/tests/support/machine_cache.sh"
build=$(cd "${1:?usage: image_test.sh BUILD_DIR}" && pwd)

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root"
  exit 77
fi
check "podman and mmdebstrap are installed" command -v podman mmdebstrap >/dev/null || finish_checks

cache=$build/deploy-image
base=localhost/ibcni-test-base/debian:bookworm
image=localhost/ibcni-test/ibcni:test
# A container store of its own (deleted at the end): the test neither sees nor leaves images in
# the machine's store, and two runs never share one.
mkdir -p "$cache"
work=$(mktemp -d "$cache/run.XXXXXX")
runroot=$(mktemp -d /tmp/ibcni-podman.XXXXXX)  # podman refuses a runroot longer than 50 characters
podman() { command podman --root "$work/storage" --runroot "$runroot" "$@"; }
cleanup() {
  podman rmi -af >/dev/null 2>&1
  command podman --root "$work/storage" --runroot "$runroot" system reset -f >/dev/null 2>&1
  rm -rf "$work" "$runroot"
}
trap cleanup EXIT

# --- the base image: Debian 12 minbase from Debian's mirror (cached tarball)
# debian_base ARCH LOG PATH: a Debian 12 minbase tarball for ARCH at PATH (mmdebstrap; for arm64 its
# maintainer scripts run under qemu-user). Kept in the machine's test cache for 7 days
# (tests/support/machine_cache.sh): made from Debian's packages, nothing of this repository's.
debian_base() {
  mmdebstrap --variant=minbase --arch="$1" --format=tar bookworm "$3.tar" >"$2" 2>&1 && mv "$3.tar" "$3" ||
    { tail -20 "$2"; return 1; }
}
base_tar=$(machine_cache_file deploy-image/bookworm-amd64.tar 7 debian_base amd64 "$cache/mmdebstrap.log")
check "a Debian 12 base (mmdebstrap, or the machine's cached one: $base_tar)" test -s "$base_tar" || finish_checks
check "base image imported" podman import "$base_tar" "$base" >/dev/null || finish_checks

# The compiler cache of the release and arm64 trees (IBCNI_CCACHE_DIR: the CMake cache's, given by
# tests/deploy/CMakeLists.txt; cmake/IbcniCcache.cmake), mounted into the build stage as the
# Dockerfile's IBCNI_CCACHE_DIR says: the stage compiles the same files with the same compiler, so
# it links what those trees compiled. Empty: the stage compiles everything itself.
ccache_args=()
if [[ -n ${IBCNI_CCACHE_DIR:-} ]]; then
  check "the trees' compiler cache is a directory ($IBCNI_CCACHE_DIR)" test -d "$IBCNI_CCACHE_DIR" || finish_checks
  ccache_args=(--volume "$IBCNI_CCACHE_DIR:/ccache" --build-arg IBCNI_CCACHE_DIR=/ccache)
fi
# ccache_counts: "HITS MISSES" of the cache so far (0 0 without one)
ccache_counts() {
  [[ -n ${IBCNI_CCACHE_DIR:-} ]] || { echo "0 0"; return; }
  CCACHE_DIR=$IBCNI_CCACHE_DIR ccache --print-stats |
    awk '$1 ~ /^(direct|preprocessed)_cache_hit$/ {h += $2} $1 == "cache_miss" {m = $2} END {print h + 0, m + 0}'
}

# build_image WHAT LOG TAG [PODMAN-BUILD-ARG...]: deploy/Dockerfile as it is, built into TAG (the
# log in LOG, its tail shown and the test ended when it fails), timed, with the compiler cache's
# hits and misses; prints check-portable's lines.
build_image() {
  local what=$1 log=$2 tag=$3 started before after
  shift 3
  started=$(date +%s)
  read -ra before < <(ccache_counts)
  check "deploy/Dockerfile builds $what" \
    podman build --isolation chroot --network host --layers=false "${ccache_args[@]}" "$@" \
      -f "$repo/deploy/Dockerfile" -t "$tag" "$repo" >"$log" 2>&1 ||
    { tail -40 "$log"; finish_checks; }
  read -ra after < <(ccache_counts)
  echo "image ($what) built in $(($(date +%s) - started)) s;" \
    "compiler cache: $((after[0] - before[0])) hits, $((after[1] - before[1])) misses"
  grep -E '^(ok|FAIL) ' "$log"
}

# --- the Go toolchain of the build stage (ibcni-dra's protos): the machine's, as an image
go_image=localhost/ibcni-test-go/go:local
check "the machine's Go (/usr/local/go) imported as the build's GO_IMAGE" \
  bash -c 'tar -C / -cf "$1" usr/local/go && command podman --root "$2" --runroot "$3" import "$1" "$4" >/dev/null &&
    rm -f "$1"' _ "$work/go.tar" "$work/storage" "$runroot" "$go_image" || finish_checks

# The build stage's module proxy: the machine's Go module cache, as a file proxy (scripts/build-upstream.sh
# has put k8s.io/kubelet there), so that the build needs neither the network's proxy nor its certificates.
go_bin=$(command -v go 2>/dev/null || echo /usr/local/go/bin/go)
[[ -x /usr/local/go/bin/go ]] && go_bin=/usr/local/go/bin/go
modcache=$("$go_bin" env GOMODCACHE)
check "k8s.io/kubelet is in the machine's Go module cache ($modcache)" \
  bash -c 'ls "$1"/cache/download/k8s.io/kubelet/@v/*.zip' _ "$modcache" || finish_checks

# --- the image, from deploy/Dockerfile as it is
build_image "(both stages)" "$work/build.log" "$image" \
  --build-arg BUILD_IMAGE="$base" --build-arg RUNTIME_IMAGE="$base" --build-arg GO_IMAGE="$go_image" \
  --volume "$modcache/cache/download:/goproxy:ro" --build-arg GOPROXY=file:///goproxy
check "the build stage ran check-portable on both binaries" \
  test "$(grep -cE '^ok +build/ibcni(-ipam)?:' "$work/build.log")" -eq 2

entrypoint=$(podman image inspect --format '{{json .Config.Entrypoint}}' "$image")
check "ENTRYPOINT is the installer" test "$entrypoint" = '["/usr/local/bin/ibcni-install"]'

rootfs=$work/rootfs
mkdir -p "$rootfs"
cid=$(podman create "$image")
# To a file: podman 4.3 may write nothing to a pipe (exit 0), depending on how stdout was set up.
podman export -o "$work/rootfs.tar" "$cid" && tar -C "$rootfs" -xf "$work/rootfs.tar" && rm -f "$work/rootfs.tar"
podman rm -f "$cid" >/dev/null
check "image holds /opt/ibcni/bin/ibcni and ibcni-ipam" test -x "$rootfs/opt/ibcni/bin/ibcni" -a -x "$rootfs/opt/ibcni/bin/ibcni-ipam"
check "image holds the installer" test -x "$rootfs/usr/local/bin/ibcni-install"
check "image holds what the installer runs (chroot, cmp, stat, sync)" \
  chroot "$rootfs" sh -c 'command -v chroot && command -v cmp && command -v stat && command -v sync' >/dev/null
check "image holds ibcni-agent, which runs there (its libraries are in the image)" \
  chroot "$rootfs" /opt/ibcni/bin/ibcni-agent version
# agent_takes: the image's agent's usage names each option deploy/installer/ibcni-install gives it
agent_takes() {
  local usage opt status=0
  usage=$(chroot "$rootfs" /opt/ibcni/bin/ibcni-agent --help 2>&1) || return 1  # help goes to stderr
  for opt in --host-root --interval --metrics-listen --state-dir --ipam-data-dir --http-relay-socket; do
    grep -q -- "$opt" "$repo/deploy/installer/ibcni-install" || { echo "    the installer no longer gives $opt"; status=1; }
    grep -q -- "$opt" <<<"$usage" || { echo "    the agent does not take $opt"; status=1; }
  done
  return $status
}
check "the image's ibcni-agent takes the options the installer gives it" agent_takes
check "image holds ibcni-dra, which runs there (gRPC and protobuf-lite linked in)" \
  chroot "$rootfs" /opt/ibcni/bin/ibcni-dra version
# dra_takes: the image's ibcni-dra's usage names each flag the chart's dra DaemonSet gives it
dra_takes() {
  local usage opt status=0
  usage=$(chroot "$rootfs" /opt/ibcni/bin/ibcni-dra --help 2>&1)
  for opt in --registry-dir --plugins-dir --cdi-dir --sysfs --interval; do
    grep -q -- "- $opt\$" "$repo/deploy/helm/ibcni/templates/dra-daemonset.yaml" || { echo "    the chart no longer gives $opt"; status=1; }
    grep -q -- "$opt" <<<"$usage" || { echo "    ibcni-dra does not take $opt"; status=1; }
  done
  return $status
}
check "the image's ibcni-dra takes the flags the chart gives it" dra_takes
check "the image holds the libcurl ibcni-dra loads (GnuTLS's build) with every library it needs" \
  bash -c 'chroot "$1" sh -c "ldd /usr/lib/*/libcurl-gnutls.so.4" >"$2" && ! grep -q "not found" "$2"' _ "$rootfs" "$work/curl-ldd"
check "image's binaries pass check-portable" "$repo/deploy/check-portable.sh" "$rootfs/opt/ibcni/bin/ibcni" "$rootfs/opt/ibcni/bin/ibcni-ipam"
expected=$(chroot "$rootfs" /opt/ibcni/bin/ibcni version)
check "image's ibcni runs in the image: $expected" test -n "$expected"

# run_entrypoint NODE_ROOT LOG: the pod's view: the node's / read-only at /host and its
# /opt/cni/bin read-write on top, as deploy/helm's DaemonSet mounts them, and the securityContext
# installing needs: uid 0 with every capability dropped but SYS_CHROOT, no privilege escalation
# (the DaemonSet adds the agent's capabilities, which --no-sleep never uses).
run_entrypoint() {
  unshare -m bash -c '
    set -e
    mount --make-rprivate /
    mount --bind "$1" "$2/host" && mount -o remount,bind,ro "$2/host"
    mount --bind "$1/opt/cni/bin" "$2/host/opt/cni/bin"
    exec setpriv --no-new-privs --bounding-set -all,+sys_chroot \
      chroot "$2" /usr/local/bin/ibcni-install --no-sleep' _ "$1" "$rootfs" >"$2" 2>&1
}

node=$work/node
make_node_root "$node" "$rootfs/opt/ibcni/bin/ibcni"
check "entrypoint installs into the node" run_entrypoint "$node" "$work/install.log" || cat "$work/install.log"
check "node's ibcni is the image's" cmp -s "$rootfs/opt/ibcni/bin/ibcni" "$node/opt/cni/bin/ibcni"
check "node's ibcni-ipam is the image's" cmp -s "$rootfs/opt/ibcni/bin/ibcni-ipam" "$node/opt/cni/bin/ibcni-ipam"
check "node's ibcni runs on the node" test "$(chroot "$node" /opt/cni/bin/ibcni version)" = "$expected"
check "the read-only host root was not written" test ! -e "$node/host"

nomnl=$work/nomnl
make_node_root "$nomnl" "$rootfs/opt/ibcni/bin/ibcni" libmnl.so.0
printf 'previous' >"$nomnl/opt/cni/bin/ibcni"
run_entrypoint "$nomnl" "$work/nomnl.log"
check "node without libmnl: entrypoint fails" test $? -ne 0
check "node without libmnl: its ibcni is left alone" test "$(cat "$nomnl/opt/cni/bin/ibcni")" = previous
check "node without libmnl: the reason is logged" grep -q "libmnl.so.0" "$work/nomnl.log"

# --- linux/arm64, and one manifest list for both platforms
check "arm64 programs run here (qemu-user-static through binfmt_misc)" bash "$repo/tests/support/binfmt_arm64.sh" ||
  finish_checks
base_arm64=localhost/ibcni-test-base/debian:bookworm-arm64
image_arm64=localhost/ibcni-test/ibcni:test-arm64
list=localhost/ibcni-test/ibcni:test-list
base_tar_arm64=$(machine_cache_file deploy-image/bookworm-arm64.tar 7 debian_base arm64 "$cache/mmdebstrap-arm64.log")
check "an arm64 Debian 12 base (mmdebstrap, or the machine's cached one)" test -s "$base_tar_arm64" || finish_checks
check "arm64 base image imported" podman import --arch arm64 "$base_tar_arm64" "$base_arm64" >/dev/null ||
  finish_checks
# GO_IMAGE: the cross build builds no ibcni-dra and needs no Go; podman 4.3 would also try to pull an
# image that only the build platform's stage names, where it finds the base's.
build_image "for linux/arm64 (cross-compiled; only the version check runs emulated)" \
  "$work/build-arm64.log" "$image_arm64" --platform linux/arm64 \
  --build-arg BUILDPLATFORM=linux/amd64 --build-arg TARGETARCH=arm64 \
  --build-arg BUILD_IMAGE="$base" --build-arg RUNTIME_IMAGE="$base_arm64" --build-arg GO_IMAGE="$base"
check "the arm64 build stage ran check-portable for aarch64 on both binaries" \
  test "$(grep -cE '^ok +build/ibcni(-ipam)?: aarch64,' "$work/build-arm64.log")" -eq 2
check "the arm64 build stage cross-compiled (its compiler ran natively, not emulated)" \
  grep -q 'aarch64-linux-gnu-g++' "$work/build-arm64.log"

podman manifest create "$list" >/dev/null &&
  podman manifest add "$list" "containers-storage:$image" >/dev/null &&
  podman manifest add "$list" "containers-storage:$image_arm64" >/dev/null
platforms=$(podman manifest inspect "$list" | jq -r '[.manifests[].platform | "\(.os)/\(.architecture)"] | sort | join(",")')
check "one manifest list holds linux/amd64 and linux/arm64 ($platforms)" test "$platforms" = "linux/amd64,linux/arm64"
arch_of() { podman image inspect --format '{{.Os}}/{{.Architecture}}' "$1"; }
check "the images say their platforms ($(arch_of "$image"), $(arch_of "$image_arm64"))" \
  test "$(arch_of "$image") $(arch_of "$image_arm64")" = "linux/amd64 linux/arm64"

rootfs_amd64=$rootfs
rootfs=$work/rootfs-arm64
mkdir -p "$rootfs"
cid=$(podman create --platform linux/arm64 "$image_arm64")
podman export -o "$work/rootfs-arm64.tar" "$cid" && tar -C "$rootfs" -xf "$work/rootfs-arm64.tar" && rm -f "$work/rootfs-arm64.tar"
podman rm -f "$cid" >/dev/null
machine() { readelf -h "$1" | sed -n 's/^ *Machine: *//p'; }
check "the arm64 image's ibcni and ibcni-ipam are aarch64 ELF" \
  test "$(machine "$rootfs/opt/ibcni/bin/ibcni")/$(machine "$rootfs/opt/ibcni/bin/ibcni-ipam")" = "AArch64/AArch64"
check "the amd64 image's are x86_64 ELF" \
  test "$(machine "$rootfs_amd64/opt/ibcni/bin/ibcni")" = "Advanced Micro Devices X86-64"
check "the arm64 image has no ibcni-dra (the cross build has no gRPC); the amd64 image's is x86_64 ELF" \
  test ! -e "$rootfs/opt/ibcni/bin/ibcni-dra" -a "$(machine "$rootfs_amd64/opt/ibcni/bin/ibcni-dra")" = "Advanced Micro Devices X86-64"
check "the arm64 image's binaries pass check-portable --arch aarch64" \
  "$repo/deploy/check-portable.sh" --arch aarch64 "$rootfs/opt/ibcni/bin/ibcni" "$rootfs/opt/ibcni/bin/ibcni-ipam"
check "the arm64 image is an arm64 Debian (its own shell runs, emulated)" \
  test "$(chroot "$rootfs" dpkg --print-architecture)" = arm64
got=$(chroot "$rootfs" /opt/ibcni/bin/ibcni version)
check "the arm64 image's ibcni prints its version under emulation: $got" test "$got" = "$expected"
check "the arm64 image's ibcni-ipam too" chroot "$rootfs" /opt/ibcni/bin/ibcni-ipam version

node=$work/node-arm64
make_node_root_arm64 "$node" "$rootfs/opt/ibcni/bin/ibcni"
check "arm64 entrypoint installs into an arm64 node" run_entrypoint "$node" "$work/install-arm64.log" ||
  cat "$work/install-arm64.log"
check "arm64 node's ibcni is the arm64 image's" cmp -s "$rootfs/opt/ibcni/bin/ibcni" "$node/opt/cni/bin/ibcni"
check "arm64 node's ibcni-ipam is the arm64 image's" cmp -s "$rootfs/opt/ibcni/bin/ibcni-ipam" "$node/opt/cni/bin/ibcni-ipam"
check "arm64 node's ibcni runs on the node" test "$(chroot "$node" /opt/cni/bin/ibcni version)" = "$expected"

finish_checks
