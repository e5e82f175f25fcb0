#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# soak.sh BUILD_DIR [REPEAT [CTEST_ARG...]]: runs every test of BUILD_DIR that starts servers or
# waits on time (label `timing`, set where each such test is registered) REPEAT times in a row
# (default 20; ctest --repeat until-fail), with `stress-ng` keeping every core busy the whole time,
# so that a test that passes only on an idle machine fails here. The load is started and stopped by
# this script (by PID) and runs at the tests' own priority. `make soak` runs it on the release and
# the sanitized trees, the latter with SANITIZE_CTEST_ARGS as CTEST_ARGs, so that each tree soaks
# what `make test` runs in it. Prints each test's count of runs and the ctest summary; exits
# non-zero when a run failed (the failing run's output is in BUILD_DIR/soak.log).
#   SOAK_JOBS (default: the number of cores) tests at once, SOAK_LOAD stress-ng workers (default:
#   the number of cores), SOAK_FILTER an extra ctest -R regex.
set -u
build=$(cd "${1:?usage: soak.sh BUILD_DIR [REPEAT [CTEST_ARG...]]}" && pwd)
repeat=${2:-20}
shift $(($# < 2 ? $# : 2))
cores=$(nproc)
jobs=${SOAK_JOBS:-$cores}
load=${SOAK_LOAD:-$cores}
command -v stress-ng >/dev/null || { echo "soak: stress-ng is not installed (scripts/install-deps.sh)" >&2; exit 1; }

stress-ng --cpu "$load" --cpu-method matrixprod --quiet &
stress_pid=$!
trap 'kill "$stress_pid" 2>/dev/null; wait "$stress_pid" 2>/dev/null' EXIT

echo "soak: label timing of $build, $repeat runs each, $jobs at once, beside stress-ng --cpu $load (pid $stress_pid)"
started=$(date +%s)
ctest --test-dir "$build" -L timing ${SOAK_FILTER:+-R "$SOAK_FILTER"} "$@" -j "$jobs" \
  --repeat "until-fail:$repeat" --output-on-failure --timeout 1800 >"$build/soak.log" 2>&1
rc=$?
grep -E '^ *[0-9]+/[0-9]+ Test|tests passed|Total Test time' "$build/soak.log" | tail -n 80
echo "soak: $(grep -E 'tests passed, [0-9]+ tests failed out of' "$build/soak.log" | tail -n 1)," \
  "each run $repeat times in a row until a failure, $(($(date +%s) - started)) s (exit $rc)"
exit $rc
