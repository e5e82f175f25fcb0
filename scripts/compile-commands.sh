#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A compilation database that names the real source files, for editors and clang-tidy.
# The build trees compile the product code in unity units (cmake/IbcniUnity.cmake), so their
# compile_commands.json names unity_*.cxx files, not lib/ipam/plugin's .cpp files. This configures
# a tree of its own with IBCNI_UNITY_BUILD=OFF (configure only, nothing is compiled: each .cpp with
# the flags the release tree gives it, the tests' too) and links its database to LINK.
#   scripts/compile-commands.sh [DIR [LINK]]
#     DIR   the tree to configure (default: build-compdb in the repository)
#     LINK  the link to make (default: compile_commands.json at the repository's root, git-ignored)
# Fails when a .cpp under lib/, ipam/ or plugin/ is missing from the database.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd -P)
dir=${1:-$repo/build-compdb}
link=${2:-$repo/compile_commands.json}

cmake -S "$repo" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DIBCNI_UNITY_BUILD=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  >/dev/null
db=$(cd "$dir" && pwd)/compile_commands.json

# Every production .cpp is a "file" of the database (the generator writes absolute paths).
listed=$(sed -n 's/^  "file": "\(.*\)",\{0,1\}$/\1/p' "$db" | sort -u)
missing=$(cd "$repo" && find lib ipam plugin -name '*.cpp' | sort | while read -r f; do
  grep -qxF "$repo/$f" <<<"$listed" || echo "$f"
done)
if [[ -n $missing ]]; then
  echo "compile-commands: $db lacks these sources:" >&2
  echo "$missing" >&2
  exit 1
fi
if grep -q 'unity_[0-9]*_cxx\.cxx' <<<"$listed"; then
  echo "compile-commands: $db names unity units" >&2
  exit 1
fi

ln -sfn "$db" "$link"
echo "compile-commands: $link -> $db ($(grep -c . <<<"$listed") files)"
