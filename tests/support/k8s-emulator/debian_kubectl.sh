#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# debian_kubectl.sh DIR: prints the path of Debian's kubectl (package kubernetes-client), unpacked
# under DIR from the .deb that `apt-get download` fetches (with `apt-get update` first when apt has
# no package lists yet). Cached: a kubectl already unpacked in DIR is reused; concurrent callers
# wait for each other (flock). It never installs the package: /usr/bin/kubectl may belong to
# another package (a different kubectl) that the Debian one cannot replace, and the tests must run
# Debian's. Exit status 77 when apt-get or dpkg-deb is not there (not a Debian system), 1 when the
# package cannot be fetched or unpacked.
set -uo pipefail
dir=${1:?usage: debian_kubectl.sh DIR}
for tool in apt-get dpkg-deb flock; do
  command -v "$tool" >/dev/null || { echo "debian_kubectl.sh: $tool is not installed (not a Debian system?)" >&2; exit 77; }
done
mkdir -p "$dir" || exit 1
dir=$(cd "$dir" && pwd -P)
kubectl=$dir/root/usr/bin/kubectl

usable() { [[ -x $kubectl ]] && "$kubectl" version --client >/dev/null 2>&1; }

exec {lock}>"$dir/.lock" || exit 1
flock "$lock" || exit 1
if ! usable; then
  rm -rf "$dir/download" "$dir/root.new"
  mkdir -p "$dir/download" || exit 1
  # apt-get download writes the .deb into the current directory.
  if ! (cd "$dir/download" && apt-get download kubernetes-client) >"$dir/apt.log" 2>&1; then
    if [[ $(id -u) == 0 ]] && apt-get update >>"$dir/apt.log" 2>&1 &&
      (cd "$dir/download" && apt-get download kubernetes-client) >>"$dir/apt.log" 2>&1; then
      :
    else
      echo "debian_kubectl.sh: apt-get download kubernetes-client failed:" >&2
      tail -n 20 "$dir/apt.log" >&2
      exit 1
    fi
  fi
  debs=("$dir"/download/kubernetes-client_*.deb)
  if [[ ! -f ${debs[0]} ]]; then
    echo "debian_kubectl.sh: no kubernetes-client .deb in $dir/download after apt-get download" >&2
    exit 1
  fi
  if ! mkdir -p "$dir/root.new" || ! dpkg-deb -x "${debs[0]}" "$dir/root.new"; then
    echo "debian_kubectl.sh: dpkg-deb -x ${debs[0]} failed" >&2
    exit 1
  fi
  rm -rf "$dir/root" && mv "$dir/root.new" "$dir/root" || exit 1
  rm -rf "$dir/download"
  usable || { echo "debian_kubectl.sh: $kubectl from ${debs[0]##*/} does not run" >&2; exit 1; }
fi
echo "$kubectl"
