#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `ibcni agent` (ibcni-agent) scraped by a real Prometheus server (Debian's prometheus 2.x), on real
# namespaces (veth pairs standing in for VFs, the embedded ibcni-ipam), in a private network namespace:
#  - `ibcni agent` execs the ibcni-agent beside it; /healthz answers "ok";
#  - after 2 ADDs Prometheus sees ibcni_attachments = 2 and 2 used addresses in the pool, after a
#    DEL 1 and 1; ibcni_reconcile_runs_total{result="success"} increases;
#  - `promtool check metrics` passes on a scrape of /metrics;
#  - a second agent on the same port exits 1 naming it; a bad --interval exits 2 naming it;
#  - ibcni_cni_requests_total and ibcni_cni_request_duration_seconds count the ADDs and the DEL (and
#    an ADD that failed, under its code) from the plugin's call events;
#  - --host-root: a dry pass runs in PID 1's mount namespace (in a PID namespace of the test's, its
#    PID 1 sees pod b's netns path, the agent's own view does not), and naming another directory
#    than PID 1's / exits 1;
#  - SIGTERM: the agent exits 0. Its VmRSS/VmHWM after the scrapes are printed.
#   ibcni_agent_metrics_test.sh IBCNI IBCNI_AGENT
# Exit 77 (skip) only when prometheus or promtool is not installed.
set -uo pipefail
ibcni=$(readlink -f "$1")
agent=$(readlink -f "$2")
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  echo "SKIP: prometheus and promtool are not installed (scripts/install-deps.sh installs them)"
  exit 77
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "FAIL: needs root (creates network namespaces)"
  exit 1
fi
if [[ $(dirname "$ibcni") != $(dirname "$agent") ]]; then
  echo "FAIL: ibcni ($ibcni) and ibcni-agent ($agent) must be in the same directory"
  exit 1
fi
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
if [[ ${_IBCNI_AGENT_INNER:-} != 1 ]]; then
  exec env _IBCNI_AGENT_INNER=1 unshare --net --mount --propagation private "$0" "$ibcni" "$agent"
fi
work=$(mktemp -d /tmp/ibcni-agent-metrics.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  for ns in $(ip netns list | awk '{print $1}'); do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
source "$here/../support/check.sh"
if [[ -d /run/netns ]]; then mount -t tmpfs tmpfs /run/netns; else mount -t tmpfs tmpfs /run && mkdir /run/netns; fi
ip link set lo up

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
agent_port=$(free_port)
prom_port=$(free_port)
state=$work/state data=$work/ipam
mkdir -p "$state" "$data"

# --- the agent, started through `ibcni agent` ----------------------------------------------------
"$ibcni" agent --interval 1 --metrics-listen "127.0.0.1:$agent_port" --state-dir "$state" --ipam-data-dir "$data" \
  --pool-index-dir "" --http-relay-socket "$work/relay.sock" >"$work/agent.log" 2>&1 &
agent_pid=$!
pids+=("$agent_pid")
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$agent_port/healthz" >/dev/null && break
  sleep 0.1
done
check "/healthz answers ok" test "$(curl -s "http://127.0.0.1:$agent_port/healthz")" = ok || { cat "$work/agent.log"; finish_checks; }
check "the process is ibcni-agent (ibcni agent exec'd it)" test "$(readlink -f "/proc/$agent_pid/exe")" = "$agent"
check "it serves the plugins' relay socket on --http-relay-socket, mode 0600" \
  bash -c '[[ -S $1 && $(stat -c %a "$1") == 600 ]]' _ "$work/relay.sock"

# --- Prometheus scraping it every second -----------------------------------------------------------
cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ibcni-agent
    static_configs:
      - targets: ["127.0.0.1:$agent_port"]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
pids+=($!)
# query EXPR: the value of the instant query's first sample ("" when none)
query() {
  curl -s "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
    jq -r '.data.result[0].value[1] // ""' 2>/dev/null
}
# await EXPR VALUE: polls Prometheus until EXPR is VALUE (30 s at most)
await() {
  local v
  for _ in $(seq 150); do
    v=$(query "$1")
    [[ $v == "$2" ]] && return 0
    sleep 0.2
  done
  echo "  $1 = \"$v\", not $2" >&2
  return 1
}
check "Prometheus scrapes the agent (up = 1)" await 'up{job="ibcni-agent"}' 1 || { cat "$work/prometheus.log"; finish_checks; }

# --- two attachments, then one --------------------------------------------------------------------
conf() {  # conf DEVICE
  jq -n --arg dev "$1" --arg state "$state" --arg data "$data" '{cniVersion: "1.0.0", name: "agnet", type: "ibcni",
    mode: "sriov", device: $dev, stateDir: $state,
    ipam: {type: "ibcni-ipam", ranges: [[{subnet: "10.79.0.0/24"}]], dataDir: $data}}'
}
cni() {  # cni VERB CONTAINER NETNS_NAME DEVICE
  conf "$4" | CNI_COMMAND=$1 CNI_CONTAINERID=$2 CNI_NETNS=/run/netns/$3 CNI_IFNAME=net1 CNI_PATH=/nonexistent "$ibcni"
}
for p in a b; do
  ip link add "vf$p" type veth peer name "vf$p-peer" && ip link set "vf$p" up && ip netns add "$p"
  check "ADD of pod $p" cni ADD "$p" "$p" "vf$p" >/dev/null
done
check "ibcni_attachments is 2 after 2 ADDs" await 'sum(ibcni_attachments{network="agnet",mode="sriov"})' 2
check "ibcni_ipam_addresses used is 2" await 'ibcni_ipam_addresses{network="agnet",pool="agnet",state="used"}' 2
check "... and free 251 (10.79.0.2-254 less 2)" await 'ibcni_ipam_addresses{network="agnet",pool="agnet",state="free"}' 251
# --- the CNI calls, from the plugin's event ring -----------------------------------------------
out=$(cni ADD c c nosuchvf); code=$(jq -r '.code // empty' <<<"$out" 2>/dev/null)
check "an ADD on a device that is not there fails with a CNI error code" test -n "$code"
check "ibcni_cni_requests_total counts the 2 ADDs that succeeded" \
  await 'ibcni_cni_requests_total{verb="ADD",network="agnet",code="0"}' 2
check "... and the failed ADD under its code ($code)" \
  await "ibcni_cni_requests_total{verb=\"ADD\",network=\"agnet\",code=\"$code\"}" 1
check "ibcni_cni_request_duration_seconds has the 3 ADDs" \
  await 'ibcni_cni_request_duration_seconds_count{verb="ADD",network="agnet"}' 3
check "... none of them over 30 s" \
  await 'ibcni_cni_request_duration_seconds_bucket{verb="ADD",network="agnet",le="30"}' 3
runs1=$(query 'ibcni_reconcile_runs_total{result="success"}')
check "DEL of pod a" cni DEL a a vfa
check "ibcni_attachments is 1 after the DEL" await 'sum(ibcni_attachments{network="agnet"})' 1
check "ibcni_cni_requests_total counts the DEL" await 'ibcni_cni_requests_total{verb="DEL",network="agnet",code="0"}' 1
check "ibcni_ipam_addresses used is 1" await 'ibcni_ipam_addresses{network="agnet",pool="agnet",state="used"}' 1
sleep 2.5
runs2=$(query 'ibcni_reconcile_runs_total{result="success"}')
echo "  ibcni_reconcile_runs_total{result=\"success\"}: $runs1, then $runs2"
check "ibcni_reconcile_runs_total{result=\"success\"} increases" test "${runs2:-0}" -gt "${runs1:-0}"
check "no pass failed" test "$(query 'ibcni_reconcile_runs_total{result="failure"}')" = 0
check "every pass says the live pod is alive" test -n "$(query 'ibcni_reconcile_actions_total{action="alive"}')"
check "the last success is recent" test "$(query 'time() - ibcni_reconcile_last_success_timestamp_seconds < 10')" != ""

# --- the exposition itself -----------------------------------------------------------------------
curl -s "http://127.0.0.1:$agent_port/metrics" >"$work/metrics.txt"
check "promtool check metrics passes on /metrics" promtool check metrics <"$work/metrics.txt"
for i in 1 2 3 4 5; do curl -s -o /dev/null "http://127.0.0.1:$agent_port/metrics"; done
echo "  agent memory after $(($(query 'count_over_time(up{job="ibcni-agent"}[5m])') + 6)) scrapes:" \
  "$(grep -E '^Vm(RSS|HWM)' "/proc/$agent_pid/status" | tr -s ' \t' ' ' | paste -sd, -)"

# --- refusals ------------------------------------------------------------------------------------
out=$("$agent" --interval 1 --metrics-listen "127.0.0.1:$agent_port" --state-dir "$state" --ipam-data-dir "$data" \
  --pool-index-dir "" --http-relay-socket "" 2>&1); rc=$?
echo "  a second agent on the port printed: $out" | head -3
check "a second agent on the same port exits 1" test "$rc" -eq 1
check "... naming --metrics-listen and the address" grep -q -- "--metrics-listen 127.0.0.1:$agent_port" <<<"$out"
out=$("$ibcni" agent --interval abc 2>&1); rc=$?
check "--interval abc exits 2" test "$rc" -eq 2
check "... naming the flag and the value" grep -q -- "--interval abc" <<<"$out"

# --- --host-root: the node's mount namespace ---------------------------------------------------
# hidden CMD...: CMD in a PID namespace of its own, whose PID 1 (a shell) has this test's view, and
# in a mount namespace of its own where /run/netns is an empty tmpfs: pod b's netns path is missing
# from CMD's own view, and there in PID 1's.
# (PID 1 waits for CMD: "; exit" keeps bash from exec'ing the last command in its own place.)
hidden() {
  unshare --pid --fork --mount-proc -- bash -c \
    'unshare --mount --propagation private -- bash -c "mount -t tmpfs tmpfs /run/netns && exec \"\$@\"" _ "$@"; exit' \
    _ "$@"
}
once() {  # once [ARG...]: one dry pass over the test's state, on another port, hidden; its report
  hidden "$agent" --once --dry-run --metrics-listen "127.0.0.1:$(free_port)" --state-dir "$state" \
    --ipam-data-dir "$data" --pool-index-dir "" "$@" 2>&1
}
out=$(once); rc=$?
check "without --host-root a dry pass sees its own view, where pod b's netns path is missing" \
  grep -q "would-undo.*agnet" <<<"$out"
out=$(once --host-root /); rc=$?
check "--host-root /: the pass runs in PID 1's mount namespace, where pod b is alive" test "$rc" -eq 0
check "... (it would undo nothing)" bash -c '! grep -q would-undo <<<"$1"' _ "$out"
check "... and the dry passes changed nothing: pod b is still attached" test -f "$state/attachments/agnet/b/net1.json"
out=$(once --host-root "$work"); rc=$?
check "--host-root naming another directory than PID 1's /: exit 1" test "$rc" -eq 1
check "... saying PID 1's / is not the node's root" grep -q "PID 1's / is not the node's root" <<<"$out"

# --- SIGTERM ------------------------------------------------------------------------------------
kill -TERM "$agent_pid"
wait "$agent_pid"; rc=$?
pids=("${pids[@]:1}")
check "SIGTERM: the agent exits 0" test "$rc" -eq 0
check "... and says it stopped" grep -q "ibcni agent: stopped" "$work/agent.log"
check "... and no longer listens" bash -c "! curl -s -o /dev/null http://127.0.0.1:$agent_port/healthz"
finish_checks
