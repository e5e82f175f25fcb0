#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ibcni-ipam's cluster mode seen by an operator and kept by the node agent, against a real etcd
# 3.4 (tests/support/etcd/etcd_cluster.sh, loopback ports of its own):
#  - `ibcni-ipam pools CONFIG [--json]` lists the pool's blocks, holders, fill (this node's blocks
#    only), the totals; an unreachable backend is error 11 naming the endpoint (exit 1); a
#    node-local network exits 2;
#  - `ibcni reconcile` visits <dataDir>/.cluster/<pool>: releases dead pods' addresses, renews the
#    node's etcd lease, gives back the blocks left empty (releaseAfterSeconds 0), keeps the one
#    that a live pod uses, and says so in --json ("pools"); --dry-run changes nothing.
# "Pods" are ibcni-ipam ADDs: a live one's netns is /proc/PID/ns/net of a sleep this script owns,
# the dead ones' a path that does not exist in a directory that does.
#   ibcni_cluster_upkeep_test.sh IBCNI IBCNI_IPAM
set -uo pipefail
ibcni=$1
bin=$2
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root (ibcni reconcile trusts only root's directories)"
  exit 77
fi
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
source "$here/../support/check.sh"
source "$here/../support/etcd/etcd_cluster.sh"
work=$(mktemp -d /tmp/ibcni-cluster-upkeep.XXXXXX)
sleeper=
cleanup() {
  [[ -n $sleeper ]] && kill "$sleeper" 2>/dev/null
  etcd_cluster_stop "$work/etcd" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
etcd_cluster_start 1 "$work/etcd" >/dev/null || { echo "FAIL etcd did not start (scripts/install-deps.sh installs etcd-server)"; exit 1; }
ep=$ETCD_ENDPOINTS
etcdctl_() { ETCDCTL_API=3 etcdctl --endpoints "$ep" "$@"; }
mkdir -p "$work/ns" "$work/state"

# conf NODE [ENDPOINT]: the network config of node NODE (its own dataDir).
conf() {
  jq -n --arg dir "$work/data-$1" --arg node "$1" --arg ep "${2:-$ep}" '{cniVersion: "1.0.0", name: "obsnet",
    type: "macvlan", ipam: {type: "ibcni-ipam", dataDir: $dir, ranges: [[{subnet: "10.56.0.0/26"}]],
    cluster: {backend: "etcd", pool: "obs-pool", blockSize: 8, nodeName: $node, timeoutMs: 2000,
      releaseAfterSeconds: 0, leaseDurationSeconds: 30, etcd: {endpoints: [$ep]}}}}'
}
conf node-a >"$work/a.conf"
conf node-b >"$work/b.conf"
add() {  # add CONF CID NETNS -> the address
  CNI_COMMAND=ADD CNI_CONTAINERID=$2 CNI_NETNS=$3 CNI_IFNAME=eth0 CNI_PATH=/nonexistent "$bin" <"$1" |
    jq -er '.ips[0].address'
}
blocks_of() {  # blocks_of NODE: the pool's block keys etcd lists for NODE, one a line
  etcdctl_ get --prefix /ibcni/pools/obs-pool/blocks/ -w json |
    jq -r --arg n "$1" '[.kvs[]? | {k: (.key | @base64d), v: (.value | @base64d | fromjson)}]
      | map(select(.v.node == $n) | .k | sub(".*/"; "")) | sort | .[]'
}
ledger_blocks() { jq -r '[.blocks[].name] | sort | .[]' "$work/data-node-a/.cluster/obs-pool/blocks.json"; }

sleep 600 &
sleeper=$!
live=$(add "$work/a.conf" live "/proc/$sleeper/ns/net")
check "ADD of the live pod on node-a" test -n "$live" || finish_checks
for i in 1 2 3 4 5 6 7 8; do
  add "$work/a.conf" "dead$i" "$work/ns/dead$i" >/dev/null || check "ADD of dead$i" false
done
check "ADD on node-b" add "$work/b.conf" b1 "$work/ns/b1" >/dev/null
mapfile -t a_blocks < <(blocks_of node-a)
check "node-a holds at least 2 blocks for its 9 addresses (blocks of 8)" test "${#a_blocks[@]}" -ge 2
check "node-b holds 1 block" test "$(blocks_of node-b | wc -l)" -eq 1

# --- ibcni-ipam pools
out=$("$bin" pools "$work/a.conf" --json)
check "pools --json exits 0" test $? -eq 0
echo "$out" >"$work/pools.json"
check "pools: the pool, backend, endpoint and node" jq -e --arg ep "$ep" '.pool == "obs-pool" and .network == "obsnet"
  and .backend == "etcd" and .endpoint == $ep and .node == "node-a" and .nodeSource == "ipam.cluster.nodeName"
  and .blockSize == 8' "$work/pools.json" >/dev/null
check "pools: totals match etcd (8 blocks, claimed = node-a's + node-b's, per node)" jq -e --argjson a "${#a_blocks[@]}" '
  .totals.blocks == 8 and .totals.claimed == ($a + 1) and .totals.free == (8 - $a - 1)
  and .totals.perNode == {"node-a": $a, "node-b": 1} and .totals.mine == $a' "$work/pools.json" >/dev/null
check "pools: this node's blocks hold its 9 addresses; node-b's fill is unknown" jq -e '
  ([.blocks[] | select(.mine) | .inUse] | add) == 9
  and ([.blocks[] | select(.holder == "node-b") | .inUse] == [null])
  and ([.blocks[] | select(.mine) | .ledger] | all(. == "owned"))
  and ([.blocks[] | .claimedAt] | all(test("^[0-9-]+T[0-9:]+Z$")))
  and .ledger.present and .ledger.disagreements == []' "$work/pools.json" >/dev/null
text=$("$bin" pools "$work/a.conf")
check "pools (text): a table row per block, node-b's fill as ?/8" bash -c '
  grep -q "^BLOCK  *SET  *HOLDER  *IN USE" <<<"$1" && grep -Eq "node-b +\?/8" <<<"$1" &&
  [[ $(grep -Ec "^10\.56\.0\.[0-9]+/29 " <<<"$1") -eq $2 ]] && grep -q "8 in the pool, $2 claimed" <<<"$1"' _ "$text" "$((${#a_blocks[@]} + 1))"
conf node-a http://127.0.0.1:1 >"$work/down.conf"
down=$("$bin" pools "$work/down.conf" --json)
check "pools with the backend down: exit 1" test $? -eq 1
check "pools with the backend down: CNI error 11 naming the endpoint" \
  jq -e '.code == 11 and (.msg | contains("http://127.0.0.1:1"))' <<<"$down" >/dev/null
jq 'del(.ipam.cluster)' "$work/a.conf" >"$work/local.conf"
"$bin" pools "$work/local.conf" >/dev/null 2>"$work/err"
check "pools of a node-local network: exit 2, saying so" bash -c '[[ $1 -eq 2 ]] && grep -q "no ipam.cluster" "$2"' _ $? "$work/err"

# --- ibcni doctor --config: reaches the backend, names the node, lists its blocks (the device part
# fails on a host without IPoIB; only the cluster part is checked here)
doctor_conf() {  # doctor_conf IPAM_CONF
  jq --arg s "$work/state" '{cniVersion, name, type: "ibcni", mode: "ipoib", master: "ib0", stateDir: $s, ipam}' "$1"
}
doctor_conf "$work/a.conf" >"$work/doctor.conf"
"$ibcni" doctor --json --config "$work/doctor.conf" >"$work/doctor.json"
check "doctor: the node reaches etcd, named node-a from ipam.cluster.nodeName, libcurl loads" jq -e --arg ep "$ep" '
  .config.cluster | .reachable and .endpoint == $ep and .node == "node-a" and .nodeSource == "ipam.cluster.nodeName"
  and .libcurl == "loads" and (.listMs | type == "number") and .error == null' "$work/doctor.json" >/dev/null
check "doctor: this node's blocks, ledger and backend agreeing" jq -e --argjson a "${#a_blocks[@]}" '
  .config.cluster | .agree and (.backendBlocks | length) == $a and .backendBlocks == .ledgerBlocks' \
  "$work/doctor.json" >/dev/null
"$ibcni" doctor --json --config "$work/doctor.conf" --agent-interval 60 >"$work/doctor-60.json"
check "doctor: a lease shorter than 3 x the agent's interval is a warning naming both" jq -e '
  .config.problems | any(.what | contains("leaseDurationSeconds 30 is less than 3 x the node agent'"'"'s interval (60 s"))' \
  "$work/doctor-60.json" >/dev/null
"$ibcni" doctor --json --config "$work/doctor.conf" --agent-interval 5 >"$work/doctor-5.json"
check "doctor: with the agent every 5 s, no lease warning; the last confirmation told" jq -e '
  (.config.problems | any(.what | contains("3 x the node agent")) | not)
  and (.config.ok | any(contains("holds were confirmed by the backend")))' "$work/doctor-5.json" >/dev/null
ledger_file="$work/data-node-a/.cluster/obs-pool/blocks.json"
cp "$ledger_file" "$work/ledger.keep"
jq '.confirmed.ns = ((.confirmed.ns | tonumber) - 40000000000 | tostring)' "$work/ledger.keep" >"$ledger_file"
"$ibcni" doctor --json --config "$work/doctor.conf" --agent-interval 5 >"$work/doctor-old.json"
cp "$work/ledger.keep" "$ledger_file"
check "doctor: holds last confirmed longer ago than the lease are a warning" jq -e '
  .config.problems | any(.what | test("last confirmed by the backend [0-9]+ s ago, longer than ipam.cluster.leaseDurationSeconds \\(30 s\\)"))' \
  "$work/doctor-old.json" >/dev/null
doctor_conf "$work/down.conf" >"$work/doctor-down.conf"
"$ibcni" doctor --json --config "$work/doctor-down.conf" >"$work/doctor-down.json"
check "doctor with the backend down: not reachable, a problem naming the endpoint" jq -e '
  (.config.cluster | (.reachable | not) and (.error | contains("http://127.0.0.1:1")))
  and (.config.problems | any(.what | contains("cannot list cluster pool")))' "$work/doctor-down.json" >/dev/null

# --- ibcni reconcile: a dry run changes nothing
check "no liveness for node-a before its agent's first pass (claims alone need none)" \
  test -z "$(etcdctl_ get /ibcni/nodes/node-a/alive --print-value-only)"
check "every claim is a key without a lease: nothing expires it" bash -c '
  etcdctl_() { ETCDCTL_API=3 etcdctl --endpoints "$1" "${@:2}"; }
  [[ $(etcdctl_ "$1" get --prefix /ibcni/pools/ -w json | jq "[.kvs[] | select(.lease != null and .lease != 0)] | length") == 0 ]]' _ "$ep"
dry=$("$ibcni" reconcile --dry-run --json --state-dir "$work/state" --ipam-data-dir "$work/data-node-a")
check "reconcile --dry-run exits 0" test $? -eq 0
check "reconcile --dry-run: 8 dead allocations would be released, the pool would be kept" jq -e '
  ([.allocations[] | select(.action == "would-release")] | length) == 8
  and (.pools | length) == 1 and .pools[0].action == "would-maintain" and .pools[0].pool == "obs-pool"
  and .pools[0].node == "node-a" and .errors == []' <<<"$dry" >/dev/null
check "reconcile --dry-run: etcd still lists node-a's blocks" test "$(blocks_of node-a)" = "$(printf '%s\n' "${a_blocks[@]}")"
check "reconcile --dry-run: the dead allocations are still there" \
  test "$(ls "$work/data-node-a/.cluster/obs-pool/attachments" | wc -l)" -eq 9

# --- the real pass: renews the node's liveness, releases the dead, gives back the empty blocks
real=$("$ibcni" reconcile --json --state-dir "$work/state" --ipam-data-dir "$work/data-node-a")
check "reconcile exits 0" test $? -eq 0
echo "  reconcile printed: $(jq -c .pools <<<"$real")"
lease=$(jq -r .etcdLease "$work/data-node-a/.cluster/obs-pool/blocks.json")
ttl() { etcdctl_ lease timetolive "$(printf '%x' "$lease")" -w json | jq -r .ttl; }
check "reconcile made node-a's liveness key, on its lease (TTL $(ttl) s of 30)" bash -c '
  [[ $1 -gt 0 && $1 -le 30 ]] && [[ -n $2 ]]' _ "$(ttl)" "$(etcdctl_ get /ibcni/nodes/node-a/alive --print-value-only)"
sleep 2
before=$(ttl)
"$ibcni" reconcile --json --state-dir "$work/state" --ipam-data-dir "$work/data-node-a" >/dev/null
after=$(ttl)
check "the next pass renews it (TTL $before s -> $after s)" test "$after" -gt "$before"
live_block=$(jq -r --arg ip "${live%/*}" '.blocks[] | select(.mine and .inUse > 0) | .key' "$work/pools.json" |
  while read -r k; do
    base=${k%-*}
    [[ $(cut -d. -f4 <<<"${live%/*}") -ge $(cut -d. -f4 <<<"$base") && $(cut -d. -f4 <<<"${live%/*}") -lt $(($(cut -d. -f4 <<<"$base") + 8)) ]] && echo "$k"
  done)
check "reconcile: 8 allocations released" jq -e '([.allocations[] | select(.action == "released")] | length) == 8' <<<"$real" >/dev/null
check "reconcile --json: the pool renewed, every empty block given back" jq -e --arg keep "$live_block" '
  .pools[0].action == "maintained" and .pools[0].renewed and .pools[0].lostBlocks == []
  and (.pools[0].releasedBlocks | length) >= 1 and (.pools[0].releasedBlocks | index($keep) == null)' <<<"$real" >/dev/null
check "etcd: node-a keeps only the live pod's block ($live_block)" test "$(blocks_of node-a)" = "$live_block"
check "ledger: only the live pod's block" test "$(ledger_blocks)" = "$live_block"
check "etcd: node-b's block untouched" test "$(blocks_of node-b | wc -l)" -eq 1
check "the live pod keeps its allocation" test -e "$work/data-node-a/.cluster/obs-pool/attachments/live:eth0"
again=$("$ibcni" reconcile --json --state-dir "$work/state" --ipam-data-dir "$work/data-node-a")
check "a second pass gives back nothing more" jq -e '.pools[0].releasedBlocks == [] and .allocations == []' <<<"$again" >/dev/null
text=$("$ibcni" reconcile --state-dir "$work/state" --ipam-data-dir "$work/data-node-a")
check "reconcile (text): one line for the cluster pool" grep -q "maintained cluster pool=obs-pool node=node-a: claims renewed" <<<"$text"

# The pod dies too: its address is released, and (minBlocksPerNode 0, releaseAfterSeconds 0) its
# block goes back: an idle node keeps nothing.
kill "$sleeper"
wait "$sleeper" 2>/dev/null
sleeper=
last=$("$ibcni" reconcile --json --state-dir "$work/state" --ipam-data-dir "$work/data-node-a")
check "the last pod's address released and its block given back" bash -c '
  jq -e ".allocations | length == 1" <<<"$1" >/dev/null && [[ -z $2 ]]' _ "$last" "$(blocks_of node-a)"

# The backend down: the pass says which pool could not be kept, exit 1.
mkdir -p "$work/data-down/.cluster"
cp -a "$work/data-node-a/.cluster/obs-pool" "$work/data-down/.cluster/"
jq --arg d "$work/data-down" '.ipam.cluster.etcd.endpoints = ["http://127.0.0.1:1"] | .ipam.dataDir = $d' \
  "$work/data-down/.cluster/obs-pool/network.json" >"$work/nj" && mv "$work/nj" "$work/data-down/.cluster/obs-pool/network.json"
bad=$("$ibcni" reconcile --json --state-dir "$work/state" --ipam-data-dir "$work/data-down")
rc=$?
check "reconcile with the backend down: exit 1, the pool and endpoint named" bash -c '[[ $1 -eq 1 ]] &&
  jq -e ".errors | any(contains(\"cluster pool obs-pool\") and contains(\"http://127.0.0.1:1\"))" <<<"$2" >/dev/null' _ "$rc" "$bad"
# --- pools --retire: refused while node-b still holds a block; the pool stays registered and open
check "the pools' registry names obs-pool" bash -c '
  etcdctl_() { ETCDCTL_API=3 etcdctl --endpoints "$1" "${@:2}"; }
  etcdctl_ "$1" get /ibcni/registry --print-value-only | jq -e ".pools | has(\"obs-pool\")" >/dev/null' _ "$ep"
"$bin" pools "$work/a.conf" --retire >/dev/null 2>"$work/err"
rc=$?
check "pools --retire of a pool node-b still holds a block of: exit 1, naming it and the way" bash -c '
  [[ $1 -eq 1 ]] && grep -q "is not drained: block .* (node-b)" "$2" && grep -q -- "--retire again" "$2"' _ "$rc" "$work/err"
check "still registered and open after the refusal" bash -c '
  etcdctl_() { ETCDCTL_API=3 etcdctl --endpoints "$1" "${@:2}"; }
  etcdctl_ "$1" get /ibcni/registry --print-value-only | jq -e ".pools | has(\"obs-pool\")" >/dev/null &&
  etcdctl_ "$1" get /ibcni/definitions/obs-pool --print-value-only | jq -e ".closed != true" >/dev/null' _ "$ep"
"$bin" pools "$work/a.conf" --redefine --retire >/dev/null 2>&1
check "pools --redefine --retire: usage, exit 2" test $? -eq 2
finish_checks
