#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds the e2e libcni driver (e2e/cnitool, upstream cnitool's command line) offline against
# Debian's libcni v1.1.2 in GOPATH mode.
#
#   e2e/build-driver.sh [OUTPUT]        default OUTPUT: build/e2e/cnitool (relative to the repo)
#
# Needs: apt-get install -y golang-go golang-github-appc-cni-dev
# Env:   GO (default: go), CNI_GOPATH (default: /usr/share/gocode, where Debian puts the source)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
out=${1:-$repo/build/e2e/cnitool}
go=${GO:-go}
gopath=${CNI_GOPATH:-/usr/share/gocode}

if ! command -v "$go" >/dev/null 2>&1; then
  echo "build-driver: '$go' not found (apt-get install -y golang-go)" >&2
  exit 1
fi
if [[ ! -d $gopath/src/github.com/containernetworking/cni/libcni ]]; then
  echo "build-driver: libcni source not under $gopath (apt-get install -y golang-github-appc-cni-dev)" >&2
  exit 1
fi

case $out in /*) ;; *) out=$PWD/$out ;; esac
mkdir -p "$(dirname "$out")"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ibcni-driver.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Go's build cache is the machine's test cache (tests/support/machine_cache.sh; Go keys it by
# content): a toolchain without a precompiled standard library compiles it once per machine, not
# once per driver built.
source "$repo/tests/support/machine_cache.sh"
gocache=$(machine_cache_dir go-build) || gocache=$tmp/cache

# GOPATH mode: a main package outside GOPATH builds as a local package and resolves its imports
# from GOPATH. Everything that could make go reach for the network or a module cache is off.
# No -trimpath / CGO_ENABLED=0: either would recompile the standard library (~15 s instead of
# ~1 s) because Debian's precompiled one was built without them.
(
  cd "$here/cnitool"
  env GO111MODULE=off GOPATH="$gopath" GOCACHE="$gocache" GOFLAGS= GOPROXY=off GOTMPDIR="$tmp" \
    "$go" build -o "$out" .
)
echo "build-driver: built $out" >&2
