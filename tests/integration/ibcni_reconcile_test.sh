#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `ibcni reconcile` on real namespaces (veth pairs standing in for VFs, the embedded ibcni-ipam):
#  - a pod whose netns was deleted without a DEL: ADD of another pod on its device answers 100
#    naming where the device was last seen (it answered 101 naming the dead pod before); --dry-run
#    changes nothing; a pass removes the record and releases the address; a second pass finds nothing;
#  - a live pod is untouched (device, address, record, allocation);
#  - a netns whose path is gone while a process still holds it: undone (a veth has no PCI function,
#    it cannot come back to the host: it is destroyed with that namespace);
#  - ibcni-ipam used alone (another plugin's IPAM): the pool's dead allocations are reclaimed;
#  - a reconcile loop racing 20 ADD/DEL cycles on the same devices undoes nothing live, and the node
#    ends clean.
# What only a physical device shows (the kernel returning it under the pod's name, renamed back) is
# tests/kernel-lab's (virtio PCI NICs in a VM).
#   ibcni_reconcile_test.sh IBCNI IBCNI_IPAM
set -uo pipefail
ibcni=$(readlink -f "$1")
ipam=$(readlink -f "$2")
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root (creates network namespaces)"
  exit 77
fi
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
if [[ ${_IBCNI_RECONCILE_INNER:-} != 1 ]]; then
  exec env _IBCNI_RECONCILE_INNER=1 unshare --net --mount --propagation private "$0" "$ibcni" "$ipam"
fi
work=$(mktemp -d /tmp/ibcni-reconcile.XXXXXX)
holders=()
cleanup() {
  for p in "${holders[@]}"; do kill "$p" 2>/dev/null; done
  for ns in $(ip netns list | awk '{print $1}'); do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
source "$here/../support/check.sh"
# A private /run/netns (over the node's, or, where the node has none, in a private /run), so that
# nothing is created on the node.
if [[ -d /run/netns ]]; then mount -t tmpfs tmpfs /run/netns; else mount -t tmpfs tmpfs /run && mkdir /run/netns; fi

state=$work/state data=$work/ipam
conf() {  # conf DEVICE
  jq -n --arg dev "$1" --arg state "$state" --arg data "$data" '{cniVersion: "1.0.0", name: "rcnet", type: "ibcni",
    mode: "sriov", device: $dev, mtu: 2044, stateDir: $state,
    ipam: {type: "ibcni-ipam", ranges: [[{subnet: "10.77.0.0/24"}]], dataDir: $data}}'
}
cni() {  # cni VERB CONTAINER NETNS_NAME DEVICE
  conf "$4" | CNI_COMMAND=$1 CNI_CONTAINERID=$2 CNI_NETNS=/run/netns/$3 CNI_IFNAME=net1 CNI_PATH=/nonexistent "$ibcni"
}
reconcile() { "$ibcni" reconcile --state-dir "$state" --ipam-data-dir "$data" "$@"; }
records() { find "$state/attachments" -type f 2>/dev/null | wc -l; }
allocations() { find "$data/rcnet/attachments" -type f 2>/dev/null | wc -l; }
veth() {  # veth NAME: a stand-in VF with settings of its own, up
  ip link add "$1" type veth peer name "$1-peer" && ip link set "$1" mtu 1400 alias "before $1" up
}

# --- a pod that died without a DEL ----------------------------------------------------------
veth vfa && ip netns add a && ip netns add b
check "ADD of pod A on vfa" cni ADD A a vfa >/dev/null
ip netns del a  # no DEL: the veth dies with the namespace
out=$(cni ADD B b vfa); rc=$?
echo "  ADD of pod B printed: $out"
check "ADD of pod B on the missing vfa fails" test "$rc" -ne 0
check "... with 100, not 101" jq -e '.code == 100' <<<"$out" >/dev/null
check "... saying where vfa was last seen" jq -e '.msg | contains("last seen attached to container A")' <<<"$out" >/dev/null
dry=$(reconcile --dry-run --json)
check "--dry-run lists A as would-undo" jq -e '[.attachments[] | select(.containerID == "A") | .action] == ["would-undo"]' <<<"$dry" >/dev/null
check "--dry-run changes nothing" test "$(records):$(allocations)" = 1:1
text=$(reconcile); rc=$?
echo "$text" | sed 's/^/  reconcile: /'
check "reconcile exits 0" test "$rc" -eq 0
check "reconcile logs one line for A" grep -q "undone network=rcnet containerID=A ifname=net1" <<<"$text"
check "A's record is removed and its address released" test "$(records):$(allocations)" = 0:0
again=$(reconcile --json)
check "a second pass finds nothing" jq -e '(.attachments | length) == 0 and (.allocations | length) == 0' <<<"$again" >/dev/null

# --- a live pod ---------------------------------------------------------------------------
veth vfl && ip netns add live
check "ADD of the live pod" cni ADD L live vfl >/dev/null
before=$(ip -n live -br addr show net1)
out=$(reconcile --json)
check "reconcile says the live pod is alive" jq -e '[.attachments[] | select(.containerID == "L") | .action] == ["alive"]' <<<"$out" >/dev/null
check "the live pod keeps its device and address" test "$(ip -n live -br addr show net1)" = "$before"
check "... its record and allocation" test "$(records):$(allocations)" = 1:1

# --- a path gone while a process holds the namespace ---------------------------------------
veth vfh && ip netns add held
check "ADD of the held pod" cni ADD H held vfh >/dev/null
ip netns exec held sleep 600 &
holders+=($!)
sleep 0.2
umount /run/netns/held && rm -f /run/netns/held
out=$(reconcile --json)
check "a path that is gone is undone though a process holds the namespace" \
  jq -e '[.attachments[] | select(.containerID == "H") | .action] == ["undone"]' <<<"$out" >/dev/null
check "the live pod is still alive" jq -e '[.attachments[] | select(.containerID == "L") | .action] == ["alive"]' <<<"$out" >/dev/null
check "only the live pod's record and allocation remain" test "$(records):$(allocations)" = 1:1
check "DEL of the live pod" cni DEL L live vfl
check "vfl is home with its name, MTU, alias and state" \
  bash -c "ip -br link show vfl | grep -q UP && ip -d link show vfl | grep -q 'mtu 1400' && ip link show vfl | grep -q 'alias before vfl'"

# --- ibcni-ipam used by another plugin ---------------------------------------------------------
ip netns add solo
pool=$(jq -n --arg data "$data" '{cniVersion: "1.0.0", name: "solonet", type: "macvlan",
  ipam: {type: "ibcni-ipam", ranges: [[{subnet: "10.78.0.0/24"}]], dataDir: $data}}')
check "ibcni-ipam ADD for a pod of another plugin" \
  env CNI_COMMAND=ADD CNI_CONTAINERID=S CNI_NETNS=/run/netns/solo CNI_IFNAME=eth0 CNI_PATH=/nonexistent "$ipam" <<<"$pool" >/dev/null
check "the pool keeps its configuration" jq -e '.name == "solonet" and .ipam.type == "ibcni-ipam"' "$data/solonet/network.json" >/dev/null
ip netns del solo
out=$(reconcile --json)
check "reconcile releases the dead pod's address in the pool" \
  jq -e '[.allocations[] | select(.network == "solonet") | .containerID + " " + .action] == ["S released"]' <<<"$out" >/dev/null
check "... and it is gone from the pool" test ! -e "$data/solonet/attachments/S:eth0"

# --- reconcile racing ADD/DEL cycles -----------------------------------------------------------
for i in 0 1 2 3; do veth "vfr$i" && ip netns add "r$i"; done
: >"$work/reconciles"
(
  while [[ ! -e $work/stop ]]; do reconcile --json >>"$work/reconciles" 2>/dev/null || echo '{"failed": true}' >>"$work/reconciles"; done
) &
looper=$!
cycle_failures=0
for cycle in 0 1 2 3 4; do
  pids=()
  for i in 0 1 2 3; do
    (
      cni ADD "R$i-$cycle" "r$i" "vfr$i" >/dev/null || exit 1
      ip -n "r$i" link show net1 >/dev/null || exit 2  # still in the pod: nothing pulled it back
      cni DEL "R$i-$cycle" "r$i" "vfr$i" || exit 3
    ) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || cycle_failures=$((cycle_failures + 1)); done
done
touch "$work/stop"
wait "$looper"
passes=$(jq -s 'length' "$work/reconciles")
echo "  $passes reconcile passes ran during 20 ADD/DEL cycles"
check "20 ADD/DEL cycles succeed while reconcile runs" test "$cycle_failures" -eq 0
check "reconcile ran during the cycles" test "$passes" -ge 2
check "no pass undid or failed anything" \
  jq -e -s 'all(.[]; (.failed // false) == false and ([.attachments[]? | select(.action == "undone" or .action == "failed")] | length) == 0)' "$work/reconciles" >/dev/null
check "the node ends clean: no record, no allocation" test "$(records):$(allocations)" = 0:0
for i in 0 1 2 3; do
  check "vfr$i is home" bash -c "ip -d link show vfr$i | grep -q 'mtu 1400' && ip link show vfr$i | grep -q 'alias before vfr$i'"
done
finish_checks
