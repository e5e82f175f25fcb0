#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the upstream programs the tests run beside ibcni, from their own published Go modules as
# pinned in tests/upstream/<component>/go.mod (README.md there), into the machine's test cache
# (tests/support/machine_cache.sh: IBCNI_TEST_CACHE, default /var/cache/ibcni-test), one directory
# per component, version and pin set: a second clone, or a second run, pays nothing.
#   scripts/build-upstream.sh [COMPONENT...]   builds what is missing (default: every component);
#                                              one line per component: its version, where, and the
#                                              seconds the build took (or "cached")
#   scripts/build-upstream.sh --dir COMPONENT  prints the component's bin directory when it is built,
#                                              else fails naming the command that builds it
#   scripts/build-upstream.sh --version COMPONENT  prints the pinned version (v1.36.3)
# Needs Go 1.26 or newer (the machine's, first on PATH or in /usr/local/go/bin; never Debian's 1.19)
# and the Go module proxy; nothing else reaches the network.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pins=$repo/tests/upstream
source "$repo/tests/support/machine_cache.sh"

# component -> the packages built (each a main package; the binary takes its last path element,
# or the name after '=' where that would not say what it is).
declare -A packages=(
  [kubernetes]="k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
                k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl"
  [etcd]="etcd=go.etcd.io/etcd/server/v3 etcdctl=go.etcd.io/etcd/etcdctl/v3"
  [cnitool]="github.com/containernetworking/cni/cnitool"
  [multus]="gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus"
  [kubelet]="kubelet-checkpoint=ibcni.test/upstream/kubelet kubelet-dra=ibcni.test/upstream/kubelet/dra"
)
# component -> the module whose version names the build
declare -A main_module=([kubernetes]=k8s.io/kubernetes [etcd]=go.etcd.io/etcd/server/v3
                        [cnitool]=github.com/containernetworking/cni [multus]=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
                        [kubelet]=k8s.io/kubernetes)

die() { echo "build-upstream: $*" >&2; exit 1; }

find_go() {
  local go
  for go in "$(command -v go || true)" /usr/local/go/bin/go; do
    [[ -x $go ]] || continue
    # "go version go1.26.8 linux/amd64": 1.26 or newer
    if "$go" version | awk '{split(substr($3,3),v,"."); exit !(v[1]>1 || (v[1]==1 && v[2]>=26))}'; then
      echo "$go"
      return
    fi
  done
  die "needs Go 1.26 or newer (on PATH or in /usr/local/go/bin); found: $(go version 2>/dev/null || echo none)"
}

# The version of the component's main module, read from its go.mod (a require line).
pinned_version() {
  awk -v m="${main_module[$1]}" '($1 == m || $2 == m) && $NF ~ /^v[0-9]/ {print $NF; exit}' "$pins/$1/go.mod"
}

# How every program is built (as the projects' own release builds do: stripped, no cgo); part of
# the cache key with the component's linker flags (ldflags_for), so that changing either builds again.
recipe="go build -trimpath CGO_ENABLED=0"

# <cache>/upstream/<component>-<version>-<first 12 hex digits of the sha256 of go.mod, go.sum, the
# recipe, the linker flags, the component's packages and the folder's own Go files> (adding a
# program, or changing one of ours, builds into a new directory)
component_dir() {
  local version sum
  version=$(pinned_version "$1")
  [[ -n $version ]] || die "$pins/$1/go.mod names no version of ${main_module[$1]}"
  sum=$( (cat "$pins/$1/go.mod" "$pins/$1/go.sum"; echo "$recipe"; ldflags_for "$1" "$version"; echo ${packages[$1]}
          cd "$pins/$1" && find . -name '*.go' | LC_ALL=C sort | while read -r f; do echo "$f"; cat "$f"; done) |
    sha256sum | cut -c1-12)
  echo "$machine_cache_root/upstream/$1-$version-$sum"
}

# -s -w (no symbol table, no DWARF), as the release builds; Multus's stamps its version; and
# Kubernetes' own build stamps its
# version into every binary (hack/lib/version.sh): without it /version says v0.0.0-master and
# kubectl warns of a skew.
ldflags_for() {
  printf -- '-s -w '
  if [[ $1 == multus ]]; then  # as Multus's hack/build-go.sh: `multus --version` names the release
    printf -- '-X gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/multus.version=%s ' "$2"
    return 0
  fi
  [[ $1 == kubernetes ]] || return 0
  local v=$2 minor
  minor=$(cut -d. -f2 <<<"${v#v}")
  local f
  for f in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s -X %s.gitTreeState=clean ' \
      "$f" "$v" "$f" "$f" "$minor" "$f"
  done
}

# The name go build -o DIR/ gives a main package's program: its last path element, or the one
# before a major version suffix (go.etcd.io/etcd/server/v3 -> server).
go_binary_name() {
  local base
  base=$(basename "$1")
  [[ $base =~ ^v[0-9]+$ ]] && base=$(basename "$(dirname "$1")")
  echo "$base"
}

build_component() {
  local component=$1 dir version go gocache started tmp spec name
  dir=$(component_dir "$component")
  version=$(pinned_version "$component")
  if [[ -f $dir/built ]]; then
    echo "build-upstream: $component $version in $dir/bin (cached)"
    return
  fi
  go=$(find_go)
  gocache=$(machine_cache_dir go-build)
  mkdir -p "$(dirname "$dir")"
  exec 9>"$dir.lock"
  flock 9
  if [[ -f $dir/built ]]; then
    echo "build-upstream: $component $version in $dir/bin (built meanwhile by another run)"
    return
  fi
  started=$(date +%s)
  tmp=$dir.part
  rm -rf "$tmp"
  mkdir -p "$tmp/bin"
  local pkgs=() names=()
  for spec in ${packages[$component]}; do
    pkgs+=("${spec#*=}")
    if [[ $spec == *=* ]]; then names+=("${spec%%=*}"); else names+=("$(go_binary_name "$spec")"); fi
  done
  # One go build for all of a component's programs: their shared packages are compiled and
  # checked once, and the links run side by side.
  echo "build-upstream: building ${pkgs[*]} at $version with $("$go" version | awk '{print $3}')" >&2
  (cd "$pins/$component" && GOFLAGS=-mod=readonly GOCACHE=$gocache CGO_ENABLED=0 GOTOOLCHAIN=local \
     "$go" build -trimpath -ldflags "$(ldflags_for "$component" "$version")" -o "$tmp/bin/" "${pkgs[@]}") ||
    die "building ${pkgs[*]} at $version failed (its output is above)"
  local i
  for i in "${!pkgs[@]}"; do
    name=$(go_binary_name "${pkgs[$i]}")
    if [[ $name != "${names[$i]}" ]]; then
      mv "$tmp/bin/$name" "$tmp/bin/${names[$i]}"
    fi
  done
  echo "$component $version built in $(($(date +%s) - started)) s by $("$go" version | awk '{print $3}')" >"$tmp/built"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  echo "build-upstream: $component $version in $dir/bin (built in $(($(date +%s) - started)) s)"
}

if [[ ${1:-} == --version ]]; then
  component=${2:?usage: build-upstream.sh --version COMPONENT}
  [[ -n ${packages[$component]:-} ]] || die "no component '$component' (one of: ${!packages[*]})"
  pinned_version "$component"
  exit 0
fi
if [[ ${1:-} == --dir ]]; then
  component=${2:?usage: build-upstream.sh --dir COMPONENT}
  [[ -n ${packages[$component]:-} ]] || die "no component '$component' (one of: ${!packages[*]})"
  dir=$(component_dir "$component")
  [[ -f $dir/built ]] || die "$component $(pinned_version "$component") is not built on this machine: run scripts/build-upstream.sh $component"
  echo "$dir/bin"
  exit 0
fi

components=("$@")
((${#components[@]})) || components=(etcd kubernetes cnitool multus kubelet)
for c in "${components[@]}"; do
  [[ -n ${packages[$c]:-} ]] || die "no component '$c' (one of: ${!packages[*]})"
  build_component "$c"
done
