#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# setup.sh DIR: makes DIR the working copy of this directory's tooling (helm, validate.mjs):
# copies package.json, package-lock.json and the *.mjs scripts there and runs `npm ci` in DIR
# unless DIR/node_modules was installed from the same package-lock.json. Quiet when nothing is
# to do; npm's output goes to DIR/npm-ci.log (shown when it fails). Needs node and npm in PATH.
# Then: DIR/node_modules/.bin/helm, and `node DIR/validate.mjs FILE...`.
set -uo pipefail
src=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
dir=${1:?usage: setup.sh DIR}
mkdir -p "$dir" || exit 1
dir=$(cd "$dir" && pwd -P)
for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "setup.sh: $tool is not in PATH (Debian: apt-get install nodejs npm)" >&2
    exit 1
  fi
done
# One setup at a time per DIR: tests that share DIR run at once under ctest -j, and two `npm ci`
# in one directory fail (ENOTEMPTY). The second waits, then finds the stamp and does nothing.
exec 9>"$dir/.setup.lock" || exit 1
flock 9 || exit 1
stamp=$dir/node_modules/.ibcni-package-lock.json
if ! cmp -s "$src/package-lock.json" "$stamp" || [[ ! -x $dir/node_modules/.bin/helm ]]; then
  cp "$src/package.json" "$src/package-lock.json" "$dir/" || exit 1
  if ! (cd "$dir" && npm ci --no-audit --no-fund) >"$dir/npm-ci.log" 2>&1; then
    echo "setup.sh: npm ci failed in $dir:" >&2
    cat "$dir/npm-ci.log" >&2
    exit 1
  fi
  cp "$src/package-lock.json" "$stamp" || exit 1
fi
cp "$src"/*.mjs "$dir/"
