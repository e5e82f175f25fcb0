#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `ibcni pools CONFIG [--json]` for a network with a cluster guidPool, against a real etcd 3.4
# (tests/support/etcd/etcd_cluster.sh, loopback ports of its own). The GUIDs are handed out by the
# chaos checker's driver (tests/chaos/guid_driver.cpp: sriov mode's GUID-pool half, no VF), as sriov
# mode's ADD hands them out:
#  - the report lists the pool (backend pool guid_<pool>), this node's block with the GUIDs in use,
#    and each GUID with the attachment holding it; a NAD as kubectl prints it reads the same;
#  - a DEL's GUID leaves the list; text output says how many GUIDs the node hands out;
#  - an unreachable backend is a CNI error (exit 1) naming the endpoint; a network with neither
#    ipam.cluster nor guidPool exits 2.
#   ibcni_pools_test.sh IBCNI GUID_DRIVER
set -uo pipefail
ibcni=$1
driver=$2
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
source "$here/../support/check.sh"
source "$here/../support/etcd/etcd_cluster.sh"
work=$(mktemp -d /tmp/ibcni-pools.XXXXXX)
cleanup() {
  etcd_cluster_stop "$work/etcd" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
etcd_cluster_start 1 "$work/etcd" >/dev/null || { echo "FAIL etcd did not start (scripts/install-deps.sh installs etcd-server)"; exit 1; }
ep=$ETCD_ENDPOINTS

# conf ENDPOINT: the sriov network of node-a with a cluster guidPool of 4 blocks of 4 GUIDs.
conf() {
  jq -n --arg dir "$work/data" --arg ep "$1" '{cniVersion: "1.0.0", name: "gnet", type: "ibcni",
    mode: "sriov", guidPool: {range: "02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:0f", blockSize: 4,
    pool: "gp", dataDir: $dir, cluster: {backend: "etcd", nodeName: "node-a", timeoutMs: 2000,
    etcd: {endpoints: [$ep]}}}}'
}
conf "$ep" >"$work/g.conf"
# jcheck DESCRIPTION FILE FILTER [JQ ARGS]: FILTER holds on the JSON in FILE (an empty file fails).
jcheck() {
  local what=$1 file=$2 filter=$3
  shift 3
  check "$what" jq -en "$@" "input | $filter" "$file"
}
guid_add() {  # guid_add CID -> the GUID
  CNI_COMMAND=ADD CNI_CONTAINERID=$1 CNI_NETNS=/var/run/netns/$1 CNI_IFNAME=net1 "$driver" <"$work/g.conf" |
    jq -er '.guid'
}
declare -A given
for c in c1 c2 c3; do
  given[$c]=$(guid_add "$c") || check "driver ADD of $c" false
done
check "three distinct GUIDs" test "$(printf '%s\n' "${given[@]}" | sort -u | wc -l)" -eq 3

out=$("$ibcni" pools "$work/g.conf" --json)
check "pools --json exits 0" test $? -eq 0
echo "$out" >"$work/pools.json"
jcheck "the GUID pool's report: pool, backend, node; no address pool" "$work/pools.json" '.network == "gnet" and
  .ipam == null and .guidPool.pool == "gp" and .guidPool.backend == "etcd" and .guidPool.node == "node-a"' >/dev/null
jcheck "node-a's one block holds its 3 GUIDs" "$work/pools.json" '[.guidPool.blocks[] | select(.mine)] | length == 1
  and .[0].inUse == 3' >/dev/null
for c in c1 c2 c3; do
  jcheck "$c holds ${given[$c]} in the list" "$work/pools.json" '[.guids[] | select(.guid == $g and
    .containerID == $c and .ifname == "net1" and .network == "gnet")] | length == 1' --arg g "${given[$c]}" \
    --arg c "$c" >/dev/null
done
check "the etcd block lives under guid_gp" bash -c "ETCDCTL_API=3 etcdctl --endpoints '$ep' get --prefix --keys-only \
  /ibcni/pools/guid_gp/blocks/ | grep -q ."

jq -n --arg c "$(cat "$work/g.conf")" '{apiVersion: "k8s.cni.cncf.io/v1", kind: "NetworkAttachmentDefinition",
  metadata: {name: "gnet"}, spec: {config: $c}}' >"$work/nad.json"
"$ibcni" pools "$work/nad.json" --json >"$work/nad-pools.json"
jcheck "a NAD lists the same GUIDs" "$work/nad-pools.json" '.guids | length == 3' >/dev/null

CNI_COMMAND=DEL CNI_CONTAINERID=c2 CNI_NETNS=/var/run/netns/c2 CNI_IFNAME=net1 "$driver" <"$work/g.conf" >/dev/null
"$ibcni" pools "$work/g.conf" --json >"$work/after-del.json"
jcheck "DEL's GUID leaves the list" "$work/after-del.json" '(.guids | length == 2) and
  ([.guids[] | select(.guid == $g)] | length == 0)' --arg g "${given[c2]}" >/dev/null
text=$("$ibcni" pools "$work/g.conf")
check "text: the block table and the GUIDs this node hands out" grep -q "GUIDs this node hands out from guidPool gp: 2" <<<"$text"
check "text: names c1's GUID" grep -q "${given[c1]}  network gnet  c1/net1" <<<"$text"

conf "http://127.0.0.1:9" >"$work/down.conf"
"$ibcni" pools "$work/down.conf" --json >"$work/down.json"
check "an unreachable backend exits 1" test $? -eq 1
jcheck "... with CNI error 11 naming the endpoint" "$work/down.json" '.code == 11 and
  (.msg + .details | test("127.0.0.1:9"))' >/dev/null
echo '{"cniVersion":"1.0.0","name":"plain","type":"ibcni","mode":"sriov"}' >"$work/plain.conf"
"$ibcni" pools "$work/plain.conf" 2>"$work/plain.err"
check "a network with no pool exits 2" test $? -eq 2
check "... saying so" grep -q "neither ipam.cluster nor guidPool" "$work/plain.err"
finish_checks
