# SPDX-License-Identifier: Apache-2.0
# What the tests download or derive from Debian's packages, kept once per machine rather than once
# per build tree, so that a second clone (or CI after a session) pays nothing for it: the Debian base
# images image_test makes with mmdebstrap, and Go's build cache for the libcni drivers (which the Go
# toolchain keys by content itself). Never anything compiled from this repository's sources.
# IBCNI_TEST_CACHE moves it (default /var/cache/ibcni-test); `rm -rf` of it is always safe.
#   source tests/support/machine_cache.sh
#   machine_cache_dir NAME               prints the directory NAME of the cache, made if absent
#   machine_cache_file NAME DAYS MAKER...: prints the path of NAME in the cache; when the file is
#                                          absent or older than DAYS, runs MAKER... PATH.part first
#                                          (under a lock, so two runs make it once) and renames it
#                                          into place; fails when MAKER fails
machine_cache_root=${IBCNI_TEST_CACHE:-/var/cache/ibcni-test}

machine_cache_dir() {
  mkdir -p "$machine_cache_root/$1" && echo "$machine_cache_root/$1"
}

machine_cache_file() {
  local name=$1 days=$2
  shift 2
  local path=$machine_cache_root/$name
  mkdir -p "$(dirname "$path")" || return 1
  (
    flock 9
    if [[ -s $path ]] && [[ -z $(find "$path" -mtime +"$days" 2>/dev/null) ]]; then
      exit 0
    fi
    rm -f "$path.part"
    "$@" "$path.part" && mv -f "$path.part" "$path"
  ) 9>"$path.lock" >&2 || return 1
  echo "$path"
}
