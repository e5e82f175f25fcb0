#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs each libFuzzer target of BUILD_DIR (a sanitized clang tree: IBCNI_SANITIZE=ON, clang) for
# SECONDS from a copy of its seed corpus (tests/fuzz/corpus/<target>). When BUILD_DIR has no build
# yet, it is configured as one; the targets are brought up to date (nothing to do when the tree is
# built, as under ctest). Exit 1 when any target crashed, leaked, timed out or ran out of memory:
# the crash input's path and the sanitizer report are printed. Inputs the run found stay in
# BUILD_DIR/fuzz-run/<target>/corpus.
#   tests/fuzz/run_fuzzers.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]
# Environment: FUZZ_CXX (the compiler of a tree it configures, default clang++-16: clang 14 cannot
# compile libstdc++ 12's <expected>), JOBS (build parallelism, default 2), FUZZ_RSS_MB (default
# 2048), FUZZ_TIMEOUT (seconds one input may take, default 10), FUZZ_SEED (libFuzzer's -seed, default
# a random one; printed either way). A failure prints the crash input itself (base64), so that a
# CI log alone reproduces it: base64 -d > crash; BUILD_DIR/tests/fuzz/<target> crash.
set -euo pipefail

if (($# < 2)); then
  echo "usage: $0 BUILD_DIR SECONDS_PER_TARGET [TARGET...]" >&2
  exit 2
fi
build=$1
seconds=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
all_targets=(net_conf_fuzz cni_args_fuzz prev_result_fuzz ipam_store_fuzz rdma_reply_fuzz)
targets=("${@:-${all_targets[@]}}")
cxx=${FUZZ_CXX:-clang++-16}
jobs=${JOBS:-2}
rss_mb=${FUZZ_RSS_MB:-2048}
timeout_s=${FUZZ_TIMEOUT:-10}
seed=${FUZZ_SEED:-$((1 + SRANDOM % 2147483646))}

mkdir -p "$build"
build=$(cd "$build" && pwd)
start=$SECONDS
if [[ ! -f $build/CMakeCache.txt ]]; then
  if ! command -v "$cxx" >/dev/null; then
    echo "run_fuzzers: $cxx not found (scripts/install-deps.sh installs clang-16 and libclang-rt-16-dev)" >&2
    exit 1
  fi
  echo "== configure a sanitized build ($cxx) in $build"
  if ! cmake -S "$src" -B "$build" -DIBCNI_SANITIZE=ON -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_CXX_COMPILER="$cxx" >"$build/fuzz-configure.log" 2>&1; then
    cat "$build/fuzz-configure.log" >&2
    exit 1
  fi
elif ! grep -q '^IBCNI_SANITIZE:BOOL=ON$' "$build/CMakeCache.txt" ||
     ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang[^/]*$' "$build/CMakeCache.txt"; then
  echo "run_fuzzers: $build is not a sanitized clang build; the fuzz targets live in one" \
       "(make build-sanitize makes build-sanitize/, or name an empty directory)" >&2
  exit 1
fi
if ! cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$build/fuzz-build.log" 2>&1; then
  tail -n 60 "$build/fuzz-build.log" >&2
  exit 1
fi
echo "== targets up to date ($((SECONDS - start)) s)"

failed=()
for t in "${targets[@]}"; do
  run=$build/fuzz-run/$t
  rm -rf "$run"
  mkdir -p "$run/corpus" "$run/artifacts" "$run/tmp"
  if [[ -d $here/corpus/$t ]]; then
    cp -r "$here/corpus/$t/." "$run/corpus/"
  fi
  opts=()
  [[ -f $here/dict/$t.dict ]] && opts+=("-dict=$here/dict/$t.dict")
  echo "== $t: ${seconds} s from $(find "$run/corpus" -type f | wc -l) seeds (FUZZ_SEED=$seed)"
  rc=0
  # stdin is /dev/null: a config may name a file to read (CNIDeviceInfoFile), and /dev/stdin of
  # a terminal would block. The store target writes under TMPDIR.
  TMPDIR=$run/tmp \
  ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:allocator_may_return_null=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$build/tests/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb="$rss_mb" -timeout="$timeout_s" \
      -artifact_prefix="$run/artifacts/" -print_final_stats=1 -seed="$seed" "${opts[@]}" "$run/corpus" \
      </dev/null >"$run/log" 2>&1 || rc=$?
  stats=$(grep -E '^#[0-9]+.*DONE' "$run/log" | tail -n 1 || true)
  if ((rc != 0)) || compgen -G "$run/artifacts/*" >/dev/null; then
    echo "FAIL $t (exit $rc)"
    for a in "$run/artifacts"/*; do
      [[ -e $a ]] || continue
      echo "   crash input: $a ($(stat -c %s "$a") bytes; base64, first 8 KiB):"
      head -c 8192 "$a" | base64 -w 76 | sed 's/^/     /'
    done
    echo "   log: $run/log; the report:"
    # The sanitizer's or libFuzzer's report, from its first line.
    report=$(awk '/^==[0-9]+== ?ERROR|runtime error:|fuzz property broken|ALARM|out-of-memory/ {p=1} p' \
      "$run/log" | head -n 80)
    [[ -n $report ]] || report=$(tail -n 40 "$run/log")
    sed 's/^/   /' <<<"$report"
    failed+=("$t")
  else
    echo "ok   $t: $stats"
  fi
  rm -rf "$run/tmp"
done

echo "== fuzz_smoke: ${#targets[@]} targets, $((${#targets[@]} - ${#failed[@]})) passed, ${#failed[@]} failed ($((SECONDS - start)) s)"
if ((${#failed[@]})); then
  echo "failed: ${failed[*]}"
  echo "Fix the bug, then add the crash input to tests/fuzz/corpus/<target>/ as a regression seed."
  exit 1
fi
