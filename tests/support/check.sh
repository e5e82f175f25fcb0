# SPDX-License-Identifier: Apache-2.0
# PASS/FAIL bookkeeping for the shell tests (source it):
#   check WHAT CMD [ARG...]   runs CMD; prints "PASS WHAT" or "FAIL WHAT"; returns CMD's status, so
#                             `check ... || finish_checks` stops at a failure the rest depends on
#   finish_checks             prints "N passed, M failed" and exits 0 only when nothing failed
# Scripts that source it must not use `set -e` (a failed check would end them without the summary).
# The PASS/FAIL lines go to the stdout the script started with, so `check WHAT cmd >/dev/null`
# silences cmd only.
passed=0 failed=0
exec {check_out}>&1
check() {
  local what=$1
  shift
  if "$@"; then
    echo "PASS $what" >&"$check_out"
    passed=$((passed + 1))
  else
    echo "FAIL $what" >&"$check_out"
    failed=$((failed + 1))
    return 1
  fi
}
finish_checks() {
  echo "$passed passed, $failed failed"
  ((failed == 0))
  exit
}
