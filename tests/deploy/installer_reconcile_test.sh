#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# installer_reconcile_test.sh
# How deploy/installer/ibcni-install runs the node agent (the image's ibcni-agent, `ibcni agent`)
# after installing, with a fake ibcni-agent that records its arguments and the signals it gets, and
# does the real one's first check: PID 1's / is the --host-root directory, else exit 1.
# The whole test runs in PID, mount and network namespaces of its own (unshare), where it is PID 1:
# it stands for the node's init. Each installer runs in a mount and network namespace of its own
# below it (as in a pod).
# Covers: the agent started right after installing with --host-root, --interval, --metrics-listen and
# the state and IPAM data directories (options, or the environment as the chart sets it); started
# for --reconcile-interval > 0, for --metrics-listen, for --agent, and not otherwise (interval 0:
# sleep; --no-sleep: exit); its lines in the installer's log; SIGTERM and SIGINT passed on to it as
# SIGTERM and the installer exiting 0 once it stopped (and waiting while it finishes); an agent that
# exits on its own (status 1, or 0) or with an error after SIGTERM makes the installer exit
# non-zero; a pod without hostPID: the agent refuses and the installer says why; --reconcile-timeout
# accepted with a warning; an image without ibcni-agent; bad options refused.
# With IBCNI_AGENT (the built ibcni-agent) the installer also runs the real one: it takes the
# installer's arguments, passes its --host-root check (the test is PID 1, with / as its root), serves
# /healthz and /metrics, stops on SIGTERM with the installer exiting 0; a second one on the same
# port fails and that installer exits 1.
# What the agent itself does is tested with the plugin (tests/unit, tests/integration), not here.
# Usage: installer_reconcile_test.sh [IBCNI_AGENT]. Needs root (77 = skip).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
installer=$repo/deploy/installer/ibcni-install

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root (unshare)"
  exit 77
fi
real_agent=
if [[ -n ${1:-} && $1 != --inside ]]; then
  real_agent=$(readlink -f "$1")
fi
if [[ ${2:-${1:-}} != --inside ]]; then
  exec unshare --pid --fork --mount-proc --mount --net --propagation private -- bash "$0" "${real_agent:-}" --inside
fi
real_agent=${1#--inside}
ip link set lo up
source "$repo/tests/support/check.sh"
(($$ == 1)) || { echo "FAIL not PID 1 of a PID namespace of its own"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ibcni-installer-agent.XXXXXX")
bg_pids=()
cleanup() {
  for p in "${bg_pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  [[ ! -e $work/agent.pid ]] || kill -KILL "$(cat "$work/agent.pid")" 2>/dev/null
  wait 2>/dev/null
  umount -R "$work/otherroot/usr" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The fake image: ibcni and ibcni-ipam print a version; ibcni-agent writes its arguments, one a
# line, to $work/agent.argv, its PID to $work/agent.pid, checks PID 1's / as the real one does,
# then runs until SIGTERM or SIGINT, each appended to $work/agent.signals.
# $work/control/exit: exit at once with that status (e.g. a port in use); control/stop-delay: that
# many seconds from the signal to the exit; control/stop-status: the status after a signal (0).
image=$work/image
mkdir -p "$image" "$work/control"
printf '#!/bin/sh\necho "ibcni 0.0.0-fake (CNI spec 1.1.0)"\n' >"$image/ibcni"
printf '#!/bin/sh\necho "ibcni-ipam 0.0.0-fake"\n' >"$image/ibcni-ipam"
cat >"$image/ibcni-agent" <<EOF
#!/bin/sh
w=$work
printf '%s\n' "\$@" >"\$w/agent.argv"
echo \$\$ >"\$w/agent.pid"
host_root=
while [ \$# -gt 0 ]; do
  case \$1 in --host-root) host_root=\$2; shift ;; esac
  shift
done
if [ "\$(stat -c %d:%i "\$host_root/")" != "\$(stat -L -c %d:%i /proc/1/root/ 2>/dev/null)" ]; then
  echo "fake-agent: PID 1's / is not the node's root (\$host_root): the pod needs hostPID: true" >&2
  exit 1
fi
if [ -e "\$w/control/exit" ]; then
  echo "fake-agent: cannot listen" >&2
  exit "\$(cat "\$w/control/exit")"
fi
stop() {
  echo "\$1" >>"\$w/agent.signals"
  [ ! -e "\$w/control/stop-delay" ] || sleep "\$(cat "\$w/control/stop-delay")"
  echo "fake-agent: stopped" >&2
  exit "\$(cat "\$w/control/stop-status" 2>/dev/null || echo 0)"
}
trap 'stop TERM' TERM
trap 'stop INT' INT
echo "fake-agent: serving /metrics" >&2
while :; do sleep 1 & wait \$!; done
EOF
chmod 0755 "$image/ibcni" "$image/ibcni-ipam" "$image/ibcni-agent"
bin=$work/node/opt/cni/bin   # the CNI bin dir, a node path (the node's root is / here)

# start_installer NAME [VAR=VALUE...] [-- ARGS...]: an installer in a mount and network namespace
# of its own, with the node's root at / (PID 1's root: the agent's check holds); its log is
# $work/NAME.log and its PID (that of unshare, which execs it) $work/NAME.pid. SIGINT is restored
# to its default (bash starts background jobs with it ignored, and a shell cannot trap a signal
# ignored on entry; a container's first process has it at its default).
start_installer() {
  local name=$1 vars=()
  shift
  while (($#)) && [[ $1 != -- ]]; do vars+=("$1"); shift; done
  (($#)) && shift
  rm -f "$work/agent.argv" "$work/agent.pid" "$work/agent.signals"
  unshare --mount --net --propagation private -- env --default-signal=INT IBCNI_SOURCE_DIR="$image" \
    IBCNI_HOST_ROOT=/ IBCNI_CNI_BIN_DIR="$bin" "${vars[@]}" "$installer" "$@" >"$work/$name.log" 2>&1 &
  bg_pids+=($!)
  echo $! >"$work/$name.pid"
}
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
logged() { grep -q -- "$2" "$work/$1.log" || { echo "--- $1.log:"; cat "$work/$1.log"; return 1; }; }
has_line() { grep -q -- "$2" "$work/$1.log"; }   # quiet, for polling
running() { kill -0 "$(cat "$work/$1.pid")" 2>/dev/null; }
agent_started() { [[ -s $work/agent.pid ]]; }
agent_gone() { ! kill -0 "$(cat "$work/agent.pid")" 2>/dev/null; }
# argv_is WORD...: the agent's arguments, exactly
argv_is() {
  local want got
  want=$(printf '%s\n' "$@")
  got=$(cat "$work/agent.argv")
  [[ $got == "$want" ]] || { echo "    agent ran with: $(echo $got)"; echo "    wanted:         $*"; return 1; }
}
# ends NAME STATUS [SECONDS]: NAME exits within SECONDS (5) with STATUS
ends() {
  local pid rc
  pid=$(cat "$work/$1.pid")
  wait_for "${3:-5}" bash -c '! kill -0 "$1" 2>/dev/null' _ "$pid" || { echo "    still running"; return 1; }
  wait "$pid"
  rc=$?
  ((rc == $2)) || { echo "    exit status $rc, not $2"; cat "$work/$1.log"; return 1; }
}
# stops NAME [SIGNAL]: SIGNAL (TERM) to it; it then exits within 5 s with status 0
stops() {
  kill -"${2:-TERM}" "$(cat "$work/$1.pid")" || return 1
  ends "$1" 0
}
signals() { cat "$work/agent.signals" 2>/dev/null | tr '\n' ' '; }

# --- options: interval, state and IPAM data directories ------------------------------------------
start_installer opts -- --reconcile-interval 1 --state-dir /run/ibcni --state-dir /var/lib/ibcni-state \
  --ipam-data-dir /run/ibcni-ipam
check "interval 1: installs the image's ibcni" wait_for 10 cmp -s "$image/ibcni" "$bin/ibcni"
check "interval 1: starts the agent after installing" wait_for 10 agent_started
check "interval 1: the agent's arguments: --host-root, --interval, loopback metrics, the directories" \
  argv_is --host-root / --interval 1 --metrics-listen 127.0.0.1:9464 --state-dir /run/ibcni \
  --state-dir /var/lib/ibcni-state --ipam-data-dir /run/ibcni-ipam
check "interval 1: logged the agent, its interval and directories" \
  logged opts "starting the node agent: a reconcile pass every 1 s .*(state: /run/ibcni:/var/lib/ibcni-state; IPAM data: /run/ibcni-ipam), /metrics and /healthz on 127.0.0.1:9464"
check "interval 1: the agent's own lines are in the installer's log" wait_for 3 has_line opts "fake-agent: serving /metrics"
sleep 0.5
check "interval 1: the installer and the agent keep running" bash -c 'kill -0 "$1" && kill -0 "$2"' _ \
  "$(cat "$work/opts.pid")" "$(cat "$work/agent.pid")"
check "interval 1: SIGTERM stops it with status 0" stops opts
check "interval 1: the agent got SIGTERM, once" test "$(signals)" = "TERM "
check "interval 1: the agent is gone" agent_gone
check "interval 1: logged that the agent stopped" logged opts "stopping: the node agent stopped"

# --- the environment, as the chart sets it; SIGINT -----------------------------------------------
start_installer env IBCNI_RECONCILE_INTERVAL=60 IBCNI_METRICS_LISTEN=:9464 IBCNI_STATE_DIRS=/run/ibcni:/data/ibcni \
  IBCNI_IPAM_DATA_DIRS=/run/a:/run/b
check "environment: starts the agent" wait_for 10 agent_started
check "environment: IBCNI_RECONCILE_INTERVAL, IBCNI_METRICS_LISTEN, IBCNI_STATE_DIRS, IBCNI_IPAM_DATA_DIRS" \
  argv_is --host-root / --interval 60 --metrics-listen :9464 --state-dir /run/ibcni --state-dir /data/ibcni \
  --ipam-data-dir /run/a --ipam-data-dir /run/b
wait_for 3 has_line env "fake-agent: serving"
check "environment: SIGINT stops it with status 0" stops env INT
check "environment: passed on to the agent as SIGTERM" test "$(signals)" = "TERM "

# --- metrics only, and --agent --------------------------------------------------------------------
start_installer metrics -- --reconcile-interval 0 --metrics-listen '[::1]:9555'
check "--metrics-listen with interval 0: starts the agent without passes" wait_for 10 agent_started
check "--metrics-listen with interval 0: --interval 0 and the address" \
  argv_is --host-root / --interval 0 --metrics-listen '[::1]:9555' --state-dir /run/ibcni --ipam-data-dir /run/ibcni-ipam
check "--metrics-listen with interval 0: logged without passes" logged metrics "starting the node agent: no reconcile passes"
wait_for 3 has_line metrics "fake-agent: serving"
check "--metrics-listen with interval 0: SIGTERM stops it with status 0" stops metrics
start_installer agentenv IBCNI_AGENT=true
check "IBCNI_AGENT=true alone: starts the agent, no passes, loopback metrics" \
  wait_for 10 agent_started
check "IBCNI_AGENT=true alone: its arguments" \
  argv_is --host-root / --interval 0 --metrics-listen 127.0.0.1:9464 --state-dir /run/ibcni --ipam-data-dir /run/ibcni-ipam
wait_for 3 has_line agentenv "fake-agent: serving"
check "IBCNI_AGENT=true alone: SIGTERM stops it with status 0" stops agentenv
start_installer agentopt -- --agent
check "--agent: starts the agent" wait_for 10 agent_started
wait_for 3 has_line agentopt "fake-agent: serving"
check "--agent: SIGTERM stops it with status 0" stops agentopt

# --- --reconcile-timeout of older manifests: accepted, ignored, said -----------------------------
start_installer timeout IBCNI_RECONCILE_TIMEOUT=300 -- --reconcile-interval 5
check "--reconcile-timeout (IBCNI_RECONCILE_TIMEOUT=300): the agent starts anyway" wait_for 10 agent_started
check "--reconcile-timeout: not passed to the agent" \
  argv_is --host-root / --interval 5 --metrics-listen 127.0.0.1:9464 --state-dir /run/ibcni --ipam-data-dir /run/ibcni-ipam
check "--reconcile-timeout: a warning says it is ignored" \
  logged timeout "warning: --reconcile-timeout (IBCNI_RECONCILE_TIMEOUT) '300' is ignored"
wait_for 3 has_line timeout "fake-agent: serving"
check "--reconcile-timeout: SIGTERM stops it with status 0" stops timeout

# --- SIGTERM while the agent finishes a pass: the installer waits for it --------------------------
echo 2 >"$work/control/stop-delay"
start_installer slow -- --reconcile-interval 1
wait_for 10 agent_started && wait_for 3 has_line slow "fake-agent: serving"
kill -TERM "$(cat "$work/slow.pid")"
sleep 1
check "SIGTERM while the agent finishes: the installer waits for it" running slow
check "SIGTERM while the agent finishes: then exits with status 0" ends slow 0
check "SIGTERM while the agent finishes: the agent got one SIGTERM" test "$(signals)" = "TERM "
rm -f "$work/control/stop-delay"

# --- an agent that fails: the installer exits non-zero (the pod restarts) -------------------------
echo 1 >"$work/control/exit"
start_installer fails -- --reconcile-interval 1 --metrics-listen :9464
check "an agent that exits 1 (a port in use): the installer exits 1" ends fails 1 10
check "an agent that exits 1: its line and the installer's are logged" \
  logged fails "fake-agent: cannot listen" && logged fails "error: the node agent exited with status 1"
echo 0 >"$work/control/exit"
start_installer zero-exit -- --reconcile-interval 1
check "an agent that exits 0 by itself (no signal): the installer exits non-zero (1)" ends zero-exit 1 10
check "an agent that exits 0 by itself: logged" logged zero-exit "the node agent exited with status 0"
rm -f "$work/control/exit"
echo 3 >"$work/control/stop-status"
start_installer badstop -- --reconcile-interval 1
wait_for 10 agent_started && wait_for 3 has_line badstop "fake-agent: serving"
kill -TERM "$(cat "$work/badstop.pid")"
check "an agent that exits 3 after SIGTERM: the installer exits 3" ends badstop 3
check "an agent that exits 3 after SIGTERM: logged" logged badstop "the node agent exited with status 3 after SIGTERM"
rm -f "$work/control/stop-status"

# --- an image without ibcni-agent ---------------------------------------------------------------
mkdir -p "$work/oldimage"
cp "$image/ibcni" "$image/ibcni-ipam" "$work/oldimage/"
start_installer noagent IBCNI_SOURCE_DIR="$work/oldimage" -- --reconcile-interval 1
check "an image without ibcni-agent: exits 1" ends noagent 1 10
check "an image without ibcni-agent: says so" logged noagent "image has no executable $work/oldimage/ibcni-agent"

# --- a pod without hostPID: the agent refuses, the installer says why -------------------------------
# The installer is PID 1 of a PID namespace of its own, and the node's root is mounted elsewhere
# (otherroot: /usr and its links, enough for chroot to run the fake binaries).
mkdir -p "$work/otherroot/usr" "$work/otherroot/tmp"
mount --bind -o ro /usr "$work/otherroot/usr"
for l in bin lib lib64 sbin; do [[ -L /$l ]] && ln -s "$(readlink "/$l")" "$work/otherroot/$l"; done
rm -f "$work/agent.argv" "$work/agent.pid"
unshare --pid --fork --mount-proc --mount --net --propagation private -- env IBCNI_SOURCE_DIR="$image" \
  IBCNI_HOST_ROOT="$work/otherroot" "$installer" --cni-bin-dir /opt/cni/bin --reconcile-interval 1 \
  >"$work/nohostpid.log" 2>&1 &
bg_pids+=($!)
echo $! >"$work/nohostpid.pid"
check "without hostPID: installs into the node's root" wait_for 10 cmp -s "$image/ibcni" "$work/otherroot/opt/cni/bin/ibcni"
check "without hostPID: the agent is given the node's root as --host-root" \
  wait_for 10 bash -c 'grep -Fxq -- "$1" "$2"' _ "$work/otherroot" "$work/agent.argv"
check "without hostPID: the installer exits 1" ends nohostpid 1 10
check "without hostPID: the agent's reason and the installer's exit are logged" \
  logged nohostpid "fake-agent: PID 1's / is not the node's root .* hostPID: true" &&
  logged nohostpid "error: the node agent exited with status 1"
umount "$work/otherroot/usr"

# --- no agent: interval 0, no interval, --no-sleep ------------------------------------------------
start_installer zero -- --reconcile-interval 0
check "interval 0: sleeps after installing" wait_for 10 has_line zero "done; sleeping until the pod is stopped"
check "interval 0: no agent" bash -c '! test -e "$1"' _ "$work/agent.argv"
check "interval 0: SIGTERM stops it with status 0" stops zero
start_installer default
check "no interval given (default 0): sleeps after installing" wait_for 10 has_line default "done; sleeping until the pod is stopped"
check "no interval given: no agent" bash -c '! test -e "$1"' _ "$work/agent.argv"
check "no interval given: SIGTERM stops it with status 0" stops default
start_installer nosleep -- --reconcile-interval 1 --metrics-listen :9464 --no-sleep
check "--no-sleep with an interval and metrics: exits 0 after installing" ends nosleep 0 10
check "--no-sleep with an interval and metrics: no agent" bash -c '! test -e "$1"' _ "$work/agent.argv"

# --- the real ibcni-agent ----------------------------------------------------------------------
# start_real NAME: an installer in a mount namespace of its own (the test's network namespace, where
# curl reaches the listener) with the built agent in its image, metrics on 127.0.0.1:19464
start_real() {
  unshare --mount --propagation private -- env --default-signal=INT IBCNI_SOURCE_DIR="$work/realimage" \
    IBCNI_HOST_ROOT=/ IBCNI_CNI_BIN_DIR="$bin" "$installer" --reconcile-interval 1 --metrics-listen 127.0.0.1:19464 \
    --state-dir "$work/state" --ipam-data-dir "$work/ipam-data" --http-relay-socket "$work/relay/http-relay.sock" \
    >"$work/$1.log" 2>&1 &
  bg_pids+=($!)
  echo $! >"$work/$1.pid"
}
metrics_has() { curl -fsS http://127.0.0.1:19464/metrics 2>/dev/null | grep -q -- "$1"; }
if [[ -x $real_agent ]]; then
  mkdir -p "$work/realimage" "$work/state" "$work/ipam-data"
  cp "$image/ibcni" "$image/ibcni-ipam" "$work/realimage/"
  cp "$real_agent" "$work/realimage/ibcni-agent"
  start_real real
  check "real agent: /healthz answers ok" \
    wait_for 10 bash -c '[[ $(curl -fsS http://127.0.0.1:19464/healthz 2>/dev/null) == ok ]]'
  check "real agent: a pass counted on /metrics" \
    wait_for 5 metrics_has 'ibcni_reconcile_runs_total{result="success"} [1-9]'
  check "real agent: the installer and the agent keep running" running real
  check "real agent: serves the plugins' relay socket on --http-relay-socket, mode 0600" \
    wait_for 5 bash -c '[[ -S $1 && $(stat -c %a "$1") == 600 ]]' _ "$work/relay/http-relay.sock"
  start_real second
  check "real agent: a second one on the same port makes its installer exit 1" ends second 1 10
  check "real agent: that one says the port cannot be listened on" logged second "127.0.0.1:19464: cannot listen there"
  check "real agent: SIGTERM stops the first one's installer with status 0" stops real
  check "real agent: it logged its stop" logged real "ibcni agent: stopped"
  check "real agent: its relay socket is gone with it" bash -c '! test -e "$1"' _ "$work/relay/http-relay.sock"
else
  echo "SKIP the real ibcni-agent: not given (installer_reconcile_test.sh IBCNI_AGENT)"
fi

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
check "refused: --metrics-listen 9464 (no address part)" refused "is not ADDRESS:PORT" -- --metrics-listen 9464
check "refused: --metrics-listen :0" refused "is not ADDRESS:PORT" -- --metrics-listen :0
check "refused: --metrics-listen :http" refused "is not ADDRESS:PORT" -- --metrics-listen :http
check "refused: IBCNI_METRICS_LISTEN=:70000" refused "the port is not from 1 to 65535" IBCNI_METRICS_LISTEN=:70000 --
check "refused: IBCNI_AGENT=yes" refused "IBCNI_AGENT 'yes' is not true or false" IBCNI_AGENT=yes --
check "refused: a relative --state-dir" refused "must be an absolute path" -- --state-dir run/ibcni
check "refused: a --state-dir with ':'" refused "contains ':'" -- --state-dir /run/a:b
check "refused: a relative entry in IBCNI_IPAM_DATA_DIRS" \
  refused "must be an absolute path" IBCNI_IPAM_DATA_DIRS=/run/ibcni-ipam:data --
check "refused: an empty entry in IBCNI_STATE_DIRS" refused "has an empty entry" IBCNI_STATE_DIRS=/run/ibcni:: --

finish_checks
