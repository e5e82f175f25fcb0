#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# installer_reconcile_test.sh
# The reconcile loop of deploy/installer/ibcni-install (the DaemonSet's node agent), with a fake
# ibcni that records how it was run: the installer installs the fake like any ibcni, then runs the
# installed copy's `reconcile` through nsenter into PID 1's mount and network namespaces.
# The whole test runs in PID, mount and network namespaces of its own (unshare), where it is PID 1:
# it stands for the node's init, so nsenter --target 1 enters the test's namespaces and never the
# machine's. Each installer runs in a mount and network namespace of its own below it (as in a pod),
# so a pass that did not enter PID 1's namespaces is told apart by the namespaces it recorded.
# Covers: a pass right after installing, then every --reconcile-interval seconds, with the state
# and IPAM data directories as arguments (options, or the environment as the chart sets it); run
# in PID 1's mount and network namespaces; ibcni's lines in the installer's log; a failing pass and
# a pass that outlives --reconcile-timeout are logged and the loop goes on; no pass when PID 1 is
# not the node's init (a pod without hostPID); interval 0 and --no-sleep run no pass; SIGTERM during
# a pass lets it finish, during the wait stops at once; bad options are refused.
# What `ibcni reconcile` itself undoes is tested with the plugin, not here. Needs root (77 = skip).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
installer=$repo/deploy/installer/ibcni-install

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root (unshare, nsenter)"
  exit 77
fi
if [[ ${1:-} != --inside ]]; then
  exec unshare --pid --fork --mount-proc --mount --net --propagation private -- bash "$0" --inside
fi
source "$repo/tests/support/check.sh"
(($$ == 1)) || { echo "FAIL not PID 1 of a PID namespace of its own"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ibcni-reconcile-loop.XXXXXX")
bg_pids=()
cleanup() {
  for p in "${bg_pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  umount -R "$work/otherroot/usr" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The fake image: ibcni and ibcni-ipam print a version; ibcni reconcile counts its runs in
# $work/runs, and appends one line per finished run to $work/calls:
#   "N|start|end|mount ns|net ns|marker|\$0|args joined by spaces"
# and writes a line to stderr as the real one does for each attachment it undoes.
# $work/control/fail-N makes run N exit 1; $work/control/slow-N makes it sleep that many seconds
# first ($work/running holds N meanwhile).
image=$work/image
mkdir -p "$image" "$work/control" "$work/marker"
cat >"$image/ibcni" <<EOF
#!/bin/sh
case \${1:-} in
  version) echo "ibcni 0.0.0-fake (CNI spec 1.1.0)"; exit 0 ;;
  reconcile) ;;
  *) echo "fake ibcni: unexpected \$*" >&2; exit 2 ;;
esac
echo run >>"$work/runs"
n=\$(wc -l <"$work/runs")
start=\$(date +%s.%N)
echo "\$n" >"$work/running"
[ ! -e "$work/control/slow-\$n" ] || sleep "\$(cat "$work/control/slow-\$n")"
printf '%s|%s|%s|%s|%s|%s|%s|%s\n' "\$n" "\$start" "\$(date +%s.%N)" "\$(readlink /proc/self/ns/mnt)" \\
  "\$(readlink /proc/self/ns/net)" "\$(cat "$work/marker/which" 2>/dev/null)" "\$0" "\$*" >>"$work/calls"
rm -f "$work/running"
echo "fake-ibcni [info] reconcile run \$n: undone network=ib-net containerID=dead\$n ifname=net1" >&2
if [ -e "$work/control/fail-\$n" ]; then
  echo "fake-ibcni [error] reconcile run \$n: cannot undo" >&2
  exit 1
fi
exit 0
EOF
printf '#!/bin/sh\necho "ibcni-ipam 0.0.0-fake"\n' >"$image/ibcni-ipam"
chmod 0755 "$image/ibcni" "$image/ibcni-ipam"

# PID 1's (this script's) mount namespace has "A" in $work/marker/which; every installer's own
# mount namespace mounts a tmpfs there with "B".
echo A >"$work/marker/which"
pid1_mnt=$(readlink /proc/1/ns/mnt)
pid1_net=$(readlink /proc/1/ns/net)
bin=$work/node/opt/cni/bin   # the CNI bin dir, a node path (the node's root is / here)

# start_installer NAME ARGS...: an installer in a mount and network namespace of its own, with the
# node's root at / (PID 1's root: the check before each pass holds); its log is $work/NAME.log and
# its PID (that of unshare, which execs it) $work/NAME.pid.
start_installer() {
  local name=$1
  shift
  rm -f "$work/calls" "$work/runs" "$work/running"
  unshare --mount --net --propagation private -- sh -c '
    mount -t tmpfs marker "$1/marker" && echo B >"$1/marker/which" || exit 99
    shift
    exec "$@"' _ "$work" env IBCNI_SOURCE_DIR="$image" IBCNI_HOST_ROOT=/ \
    "$installer" --cni-bin-dir "$bin" "$@" >"$work/$name.log" 2>&1 &
  bg_pids+=($!)
  echo $! >"$work/$name.pid"
}
calls() { [[ -e $work/calls ]] && wc -l <"$work/calls" || echo 0; }
# wait_for SECONDS CMD...: polls CMD every 0.1 s
wait_for() {
  local tries=$(($1 * 10))
  shift
  while ((tries-- > 0)); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}
at_least() { (($(calls) >= $1)); }
logged() { grep -q -- "$2" "$work/$1.log" || { echo "--- $1.log:"; cat "$work/$1.log"; return 1; }; }
logged_times() { (($(grep -c -- "$2" "$work/$1.log") >= $3)); }
running() { kill -0 "$(cat "$work/$1.pid")" 2>/dev/null; }
# stops NAME [--child]: SIGTERM to it (or to its child: unshare --fork does not pass SIGTERM on);
# true when it then exits within 5 s with status 0
stops() {
  local pid target rc
  pid=$(cat "$work/$1.pid")
  target=$pid
  [[ ${2:-} != --child ]] || target=$(cat "/proc/$pid/task/$pid/children")
  kill -TERM $target || return 1
  wait_for 5 bash -c '! kill -0 "$1" 2>/dev/null' _ "$pid" || { echo "    still running after 5 s"; return 1; }
  wait "$pid"
  rc=$?
  ((rc == 0)) || { echo "    exit status $rc"; return 1; }
}
# field N [LINE]: field N of every call (or of call LINE)
field() { cut -d'|' -f"$1" "$work/calls" | sed -n "${2:-1,\$}p"; }
runs() { [[ -e $work/runs ]] && wc -l <"$work/runs" || echo 0; }

# --- the loop: a pass right away, then one every interval; the arguments; PID 1's namespaces ------
start_installer loop --reconcile-interval 1 --state-dir /run/ibcni --state-dir /var/lib/ibcni-state \
  --ipam-data-dir /run/ibcni-ipam
check "interval 1: installs the image's ibcni" wait_for 10 cmp -s "$image/ibcni" "$bin/ibcni"
check "interval 1: four passes within 6 s" wait_for 6 at_least 4
check "interval 1: logged the interval and directories" \
  logged loop "running 'ibcni reconcile' every 1 s (state: /run/ibcni:/var/lib/ibcni-state; IPAM data: /run/ibcni-ipam)"
check "interval 1: every pass is 'reconcile' with both state directories and the IPAM data directory" \
  test "$(field 8 | sort -u)" = "reconcile --state-dir /run/ibcni --state-dir /var/lib/ibcni-state --ipam-data-dir /run/ibcni-ipam"
check "interval 1: every pass runs the node's installed copy" test "$(field 7 | sort -u)" = "$bin/ibcni"
check "interval 1: every pass runs in PID 1's mount namespace, not the installer's" \
  test "$(field 4 | sort -u)|$(field 6 | sort -u)" = "$pid1_mnt|A"
check "interval 1: every pass runs in PID 1's network namespace, not the installer's" \
  test "$(field 5 | sort -u)" = "$pid1_net"
# gaps: from the end of a pass to the start of the next one, about the interval
gaps_ok() {
  local lo=$1 hi=$2 gaps
  gaps=$(awk -F'|' 'NR > 1 {printf "%.2f\n", $2 - end} {end = $3}' "$work/calls")
  echo "    gaps between passes (s): $(echo $gaps)"
  awk -v lo="$lo" -v hi="$hi" '$1 < lo || $1 > hi {bad = 1} END {exit bad}' <<<"$gaps"
}
check "interval 1: the passes are 1 s apart (0.9 to 2.5 s)" gaps_ok 0.9 2.5
check "interval 1: ibcni's own lines are in the installer's log" \
  logged loop "fake-ibcni \[info\] reconcile run 2: undone network=ib-net containerID=dead2 ifname=net1"
check "interval 1: a pass that went well adds no installer line at info level" \
  bash -c '! grep -q "reconcile pass" "$1"' _ "$work/loop.log"
check "interval 1: SIGTERM while waiting stops it with status 0" stops loop
n=$(calls)
sleep 1.5
check "interval 1: no pass after it stopped" test "$(calls)" -eq "$n"

# --- the environment, as the chart sets it; interval 2 --------------------------------------------
rm -f "$work/calls" "$work/runs"
unshare --mount --net --propagation private -- env IBCNI_SOURCE_DIR="$image" IBCNI_HOST_ROOT=/ \
  IBCNI_CNI_BIN_DIR="$bin" IBCNI_RECONCILE_INTERVAL=2 IBCNI_STATE_DIRS=/run/ibcni:/data/ibcni \
  IBCNI_IPAM_DATA_DIRS=/run/a:/run/b "$installer" >"$work/env.log" 2>&1 &
bg_pids+=($!)
echo $! >"$work/env.pid"
check "environment: three passes within 7 s" wait_for 7 at_least 3
check "environment: the directories from IBCNI_STATE_DIRS and IBCNI_IPAM_DATA_DIRS" \
  test "$(field 8 | sort -u)" = "reconcile --state-dir /run/ibcni --state-dir /data/ibcni --ipam-data-dir /run/a --ipam-data-dir /run/b"
check "environment: IBCNI_RECONCILE_INTERVAL=2: the passes are 2 s apart (1.9 to 3.5 s)" gaps_ok 1.9 3.5
check "environment: SIGTERM stops it with status 0" stops env

# --- a failing pass and a pass that outlives the timeout: logged, and the loop goes on ------------
touch "$work/control/fail-1" "$work/control/fail-2"
echo 30 >"$work/control/slow-3"
start_installer fail --reconcile-interval 1 --reconcile-timeout 2
check "failing passes: passes 4 and 5 finish within 14 s (after two failures and a timeout)" \
  wait_for 14 at_least 4
check "failing passes: the first failure is logged with ibcni's status" \
  logged fail "ibcni-install error: reconcile pass 1 failed (status 1); next pass in 1 s"
check "failing passes: ibcni's own error line is in the log" logged fail "reconcile run 2: cannot undo"
check "failing passes: the pass over --reconcile-timeout is logged as stopped" \
  logged fail "ibcni-install error: reconcile pass 3: stopped after 2 s; next pass in 1 s"
check "failing passes: run 3 was stopped before it finished; runs 1, 2, 4, 5 finished" \
  test "$(field 1 | head -n 4 | tr '\n' ' ')" = "1 2 4 5 "
check "failing passes: the runs after it have the same arguments" \
  test "$(field 8 | sort -u)" = "reconcile --state-dir /run/ibcni --ipam-data-dir /run/ibcni-ipam"
check "failing passes: the installer is still running" running fail
check "failing passes: SIGTERM stops it with status 0" stops fail

# --- SIGTERM while waiting for the next pass stops at once ---------------------------------------
start_installer long --reconcile-interval 600
check "interval 600: the first pass runs right after installing" wait_for 10 at_least 1
sleep 0.5
long_pid=$(cat "$work/long.pid")
kill -TERM "$long_pid"
check "interval 600: SIGTERM while waiting stops it within 1 s" \
  wait_for 1 bash -c '! kill -0 "$1" 2>/dev/null' _ "$long_pid"
wait "$long_pid"
check "interval 600: with status 0, after that one pass" test "$? $(runs)" = "0 1"

# --- SIGTERM during a pass lets the pass finish --------------------------------------------------
rm -f "$work/control/"*
echo 2 >"$work/control/slow-2"
start_installer term --reconcile-interval 1
check "SIGTERM during a pass: the second pass is running" \
  wait_for 8 bash -c '[[ $(cat "$1" 2>/dev/null) == 2 ]]' _ "$work/running"
term_pid=$(cat "$work/term.pid")
kill -TERM "$term_pid"
sleep 0.5
check "SIGTERM during a pass: the installer waits for it" kill -0 "$term_pid"
check "SIGTERM during a pass: it then exits" wait_for 5 bash -c '! kill -0 "$1" 2>/dev/null' _ "$term_pid"
wait "$term_pid"
check "SIGTERM during a pass: with status 0" test $? -eq 0
check "SIGTERM during a pass: the pass finished (two recorded), no third" \
  test "$(calls) $(runs)" = "2 2"

# --- no pass when PID 1 is not the node's init (a pod without hostPID) -----------------------------
# The installer is PID 1 of a PID namespace of its own, and the node's root is mounted elsewhere
# (otherroot: /usr and its links, enough for chroot to run the fake binaries).
mkdir -p "$work/otherroot/usr" "$work/otherroot/tmp"
mount --bind -o ro /usr "$work/otherroot/usr"
for l in bin lib lib64 sbin; do [[ -L /$l ]] && ln -s "$(readlink "/$l")" "$work/otherroot/$l"; done
rm -f "$work/calls" "$work/runs"
unshare --pid --fork --mount-proc --mount --net --propagation private -- env IBCNI_SOURCE_DIR="$image" \
  IBCNI_HOST_ROOT="$work/otherroot" "$installer" --cni-bin-dir /opt/cni/bin --reconcile-interval 1 \
  >"$work/nohostpid.log" 2>&1 &
bg_pids+=($!)
echo $! >"$work/nohostpid.pid"
check "without hostPID: installs into the node's root" wait_for 10 cmp -s "$image/ibcni" "$work/otherroot/opt/cni/bin/ibcni"
check "without hostPID: each pass refused, saying why" \
  wait_for 6 logged_times nohostpid "reconcile pass not run: PID 1's / is not the node's root .* hostPID: true" 3
check "without hostPID: and counted as a failed pass" logged nohostpid "reconcile pass 3 failed (status 1)"
check "without hostPID: ibcni reconcile never ran" test "$(runs)" -eq 0
check "without hostPID: still running" running nohostpid
check "without hostPID: SIGTERM stops it with status 0" stops nohostpid --child
umount "$work/otherroot/usr"

# --- interval 0 and --no-sleep: no pass -----------------------------------------------------------
start_installer zero --reconcile-interval 0
check "interval 0: sleeps after installing" wait_for 10 grep -q "done; sleeping until the pod is stopped" "$work/zero.log"
sleep 1.5
check "interval 0: no pass" test "$(runs)" -eq 0
check "interval 0: SIGTERM stops it with status 0" stops zero
start_installer default
check "no interval given (default 0): sleeps after installing" wait_for 10 grep -q "done; sleeping until the pod is stopped" "$work/default.log"
sleep 1.5
check "no interval given: no pass" test "$(runs)" -eq 0
check "no interval given: SIGTERM stops it with status 0" stops default
start_installer nosleep --reconcile-interval 1 --no-sleep
nosleep_pid=$(cat "$work/nosleep.pid")
check "--no-sleep with an interval: exits after installing" wait_for 10 bash -c '! kill -0 "$1" 2>/dev/null' _ "$nosleep_pid"
wait "$nosleep_pid"
check "--no-sleep with an interval: status 0" test $? -eq 0
check "--no-sleep with an interval: no pass" test "$(runs)" -eq 0

# --- bad options are refused before anything is installed ---------------------------------------
# refused EXPECT [VAR=VALUE...] -- ARGS...: status 2, EXPECT in the log, nothing installed
refused() {
  local expect=$1 vars=() rc
  shift
  while [[ $1 != -- ]]; do vars+=("$1"); shift; done
  shift
  env IBCNI_SOURCE_DIR="$image" IBCNI_HOST_ROOT=/ "${vars[@]}" "$installer" --cni-bin-dir "$work/never" "$@" \
    >"$work/bad.log" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] || { echo "    status $rc, not 2"; cat "$work/bad.log"; return 1; }
  [[ ! -e $work/never ]] || { echo "    installed anyway"; return 1; }
  grep -q -- "$expect" "$work/bad.log" || { echo "    '$expect' not in:"; cat "$work/bad.log"; return 1; }
}
check "refused: --reconcile-interval -5" refused "is not a number of seconds" -- --reconcile-interval -5
check "refused: --reconcile-interval 1m" refused "is not a number of seconds" -- --reconcile-interval 1m
check "refused: IBCNI_RECONCILE_INTERVAL=ten" refused "is not a number of seconds" IBCNI_RECONCILE_INTERVAL=ten --
check "refused: --reconcile-timeout 0" refused "is not a positive number" -- --reconcile-timeout 0
check "refused: a relative --state-dir" refused "must be an absolute path" -- --state-dir run/ibcni
check "refused: a --state-dir with ':'" refused "contains ':'" -- --state-dir /run/a:b
check "refused: a relative entry in IBCNI_IPAM_DATA_DIRS" \
  refused "must be an absolute path" IBCNI_IPAM_DATA_DIRS=/run/ibcni-ipam:data --
check "refused: an empty entry in IBCNI_STATE_DIRS" refused "has an empty entry" IBCNI_STATE_DIRS=/run/ibcni:: --

finish_checks
