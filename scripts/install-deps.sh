#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs everything ibcni needs to build and test, from Debian 12's packages (and the deploy
# tests' npm packages, which tests/deploy/k8s/setup.sh installs from its lock file). Idempotent: it
# only calls apt-get when a package is missing.
#   scripts/install-deps.sh            build + test dependencies, and the kernel lab's (both
#                                      architectures: x86_64 and the arm64 cross build's), and the
#                                      upstream programs the tests run (scripts/build-upstream.sh)
#   scripts/install-deps.sh --demo     only what `make demo` needs: its quick build (the two
#                                      plugins, no tests) and what scripts/demo.sh runs
#   scripts/install-deps.sh --build    only what building the plugin and its tests needs
#   scripts/install-deps.sh --arm64    only what cross-building it for arm64 needs (make build-arm64)
set -euo pipefail

# The libraries the two plugins (ibcni, ibcni-ipam) build against.
plugin_libs=(libnl-3-dev libnl-route-3-dev libmnl-dev libibverbs-dev libcurl4-openssl-dev nlohmann-json3-dev
             libspdlog-dev libyaml-dev zlib1g-dev libfmt-dev)
# `make demo`: its quick build (clang 16, which compiles it in about half the CPU time GCC takes: the
# Makefile's DEMO_CXX) and what scripts/demo.sh runs besides the plugins: ip, jq, unshare.
demo_pkgs=(cmake ninja-build make pkg-config clang-16 "${plugin_libs[@]}" iproute2 jq util-linux)
build_pkgs=(cmake ninja-build g++ make pkg-config "${plugin_libs[@]}"
            # the release and arm64 trees' compiler cache, which the image test's builds reuse (Makefile)
            ccache
            libgtest-dev libgmock-dev googletest
            # ibcni-agent's metrics (prometheus-cpp, shared libraries, with civetweb). Not in the arm64
            # cross build's list: prometheus-cpp-dev:arm64 does not install beside the amd64 one (apt
            # removes it and civetweb), so the cross build leaves ibcni-agent out; the image's build
            # stage installs the target's alone (deploy/Dockerfile).
            prometheus-cpp-dev
            # ibcni-dra: the kubelet's gRPC APIs (Debian's gRPC 1.51, protobuf 3.21), compiled from
            # the pinned k8s.io/kubelet module's protos (cmake/IbcniKubeletProtos.cmake); native only.
            # and the libcurl build it loads (GnuTLS's: without OpenSSL's libcrypto in its resident set).
            libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libcurl3-gnutls)
test_pkgs=(iproute2 jq util-linux coreutils findutils strace
           # tests/integration/policy_routing_netns_test: replies over each rail
           iputils-ping
           # scripts/check-lengths.sh reads functions with a parser
           universal-ctags
           # tests/unit/http: a local HTTP(S) server (python3's http.server and ssl) and its test PKI
           python3 openssl
           containernetworking-plugins golang-go golang-github-appc-cni-dev
           podman debootstrap
           # tests/runtime: containerd 1.6 (ctr run --cni), and runc for it and for podman, where crun
           # cannot run (crun 1.8 refuses hybrid cgroup v1/v2 hierarchies); their rootfs is
           # busybox-static's (lab_pkgs)
           containerd runc
           # tests/fuzz (libFuzzer): clang 16, as clang 14 cannot compile libstdc++ 12's <expected>;
           # the sanitized tree links with lld 16 (a tenth of ld.bfd's time for an ASan test binary)
           clang-16 libclang-rt-16-dev lld-16
           # cluster-wide IPAM tests: a real etcd 3.4 cluster on loopback (tests/support/etcd), and
           # curl to talk to its JSON gateway
           etcd-server etcd-client curl
           # tests/chaos: a simulated clock for the ibcni-ipam processes (libfaketime)
           faketime
           # ibcni-agent's metrics test: a real Prometheus server scrapes it, and promtool checks them
           prometheus
           # make soak: the load beside the repeated timing tests (tests/scripts/soak.sh)
           stress-ng)
# What ../shared/kernel-lab/run.sh boots: Debian's kernel in QEMU, with rdma-core inside.
lab_pkgs=(qemu-system-x86 linux-image-amd64 busybox-static kmod cpio
          rdma-core ibverbs-providers ibverbs-utils perftest iputils-ping)

# The arm64 cross build (cmake/toolchains/aarch64-linux-gnu.cmake): Debian's cross compiler and the
# arm64 libraries through multiarch (dpkg --add-architecture arm64), headers shared with amd64's.
arm64_build_pkgs=(g++-aarch64-linux-gnu binutils-aarch64-linux-gnu
                  libnl-3-dev:arm64 libnl-route-3-dev:arm64 libmnl-dev:arm64 libibverbs-dev:arm64
                  libcurl4-openssl-dev:arm64 libyaml-dev:arm64 zlib1g-dev:arm64 libspdlog-dev:arm64 libfmt-dev:arm64
                  libgtest-dev:arm64 libgmock-dev:arm64)
# Running it: the unit tests under qemu-user (and the arm64 image's programs through binfmt), and
# the arm64 kernel lab (tests/kernel-lab/run-arm64.sh: qemu-system-aarch64, its root file system
# made by mmdebstrap from Debian's arm64 packages).
arm64_test_pkgs=(qemu-user qemu-user-static qemu-system-arm mmdebstrap arch-test)

pkgs=("${build_pkgs[@]}")
case ${1:-} in
  --demo) pkgs=("${demo_pkgs[@]}") ;;
  --build) ;;
  --arm64) pkgs+=("${arm64_build_pkgs[@]}") ;;
  *) pkgs+=("${test_pkgs[@]}" "${lab_pkgs[@]}" "${arm64_build_pkgs[@]}" "${arm64_test_pkgs[@]}") ;;
esac
if [[ -z ${1:-} ]]; then
  # tests/deploy's Kubernetes tooling (helm, schema validator) comes from npm: Debian's Node.js
  # unless the machine already has one.
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    pkgs+=(nodejs npm)
  fi
fi

# The upstream programs the tests run (tests/upstream: kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd 3.6, cnitool, Multus), built from their Go modules into the machine's test
# cache by version (nothing to do when they are there). Their build needs only the machine's Go and
# the Go module proxy, so on a fresh machine it runs while apt installs the packages below.
upstream_pid=
if [[ -z ${1:-} ]]; then
  upstream_log=$(mktemp)
  "$(dirname "${BASH_SOURCE[0]}")/build-upstream.sh" >"$upstream_log" 2>&1 &
  upstream_pid=$!
  trap 'kill "$upstream_pid" 2>/dev/null; rm -f "$upstream_log"' EXIT
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: must run as root to install packages" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if [[ " ${missing[*]}" == *:arm64* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ -n $upstream_pid ]]; then
  upstream_rc=0
  wait "$upstream_pid" || upstream_rc=$?
  cat "$upstream_log"
  trap - EXIT
  rm -f "$upstream_log"
  if ((upstream_rc)); then
    echo "install-deps: building the upstream programs failed (scripts/build-upstream.sh, above)" >&2
    exit "$upstream_rc"
  fi
fi
