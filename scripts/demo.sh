#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ibcni's main job, start to finish, on this machine's kernel: a veth end stands in for an SR-IOV
# VF. ADD moves it into a throwaway pod namespace with an address from the embedded IPAM
# (ibcni-ipam, in process), CHECK verifies it, DEL brings it back and frees the address. Everything happens inside a throwaway "host" namespace (unshare), so the
# machine's own network is never touched, and the script checks that nothing is left behind.
#   scripts/demo.sh [BUILD_DIR]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)

if [[ ${_IBCNI_DEMO_INNER:-} != 1 ]]; then
  [[ $(id -u) -eq 0 ]] || { echo "demo: run as root (it creates network namespaces)" >&2; exit 1; }
  exec env _IBCNI_DEMO_INNER=1 unshare --net --mount --propagation private "$0" "$build"
fi

work=$(mktemp -d /tmp/ibcni-demo.XXXXXX)
pod=ibcni-demo-$$
cleanup() {
  ip netns del "$pod" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# A private /run/netns (over the host's, or, where the host has none, in a private /run): nothing
# is created on the host.
if [[ -d /run/netns ]]; then mount -t tmpfs tmpfs /run/netns; else mount -t tmpfs tmpfs /run && mkdir /run/netns; fi

ip link add vf0 type veth peer name vf0-peer
ip link set vf0 up
ip netns add "$pod"
netns=/run/netns/$pod

cat >"$work/net.conf" <<CONF
{
  "cniVersion": "1.0.0",
  "name": "demo-ib",
  "type": "ibcni",
  "mode": "sriov",
  "device": "vf0",
  "mtu": 2044,
  "stateDir": "$work/state",
  "logLevel": "info",
  "logFile": "$work/ibcni.log",
  "ipam": {
    "type": "ibcni-ipam",
    "ranges": [[{"subnet": "10.56.217.0/24", "gateway": "10.56.217.1"}]],
    "exclude": ["10.56.217.2/31"],
    "routes": [{"dst": "10.56.0.0/16"}],
    "dataDir": "$work/ipam"
  }
}
CONF

# CNI_PATH holds no IPAM plugin: ibcni-ipam runs inside ibcni.
export CNI_CONTAINERID=demo-$$ CNI_NETNS=$netns CNI_IFNAME=net1 CNI_PATH=/nonexistent
step() { echo; echo "== $*"; }

step "host before ADD"
ip -br link show vf0

step "ADD (CNI_IFNAME=net1, CNI_NETNS=$netns)"
result=$(CNI_COMMAND=ADD "$build/ibcni" <"$work/net.conf")
echo "$result" | jq .

step "ibcni-ipam's allocation"
find "$work/ipam/demo-ib/attachments" -type f -exec cat {} \; ; echo

step "inside the pod"
ip -n "$pod" -br addr show net1
ip -n "$pod" route show dev net1

step "CHECK (prevResult = the ADD result)"
jq --argjson prev "$result" '.prevResult = $prev' "$work/net.conf" | CNI_COMMAND=CHECK "$build/ibcni"
echo "CHECK ok (exit $?)"

step "DEL"
CNI_COMMAND=DEL "$build/ibcni" <"$work/net.conf"
echo "DEL ok (exit $?)"
step "DEL again (idempotent)"
CNI_COMMAND=DEL "$build/ibcni" <"$work/net.conf"
echo "DEL ok (exit $?)"

step "host after DEL"
ip -br link show vf0

# Nothing may be left: the pod is empty but for lo, no record, no IP reservation.
fail=0
[[ $(ip -n "$pod" -o link show | wc -l) -eq 1 ]] || { echo "demo: the pod still has interfaces" >&2; fail=1; }
[[ -z $(find "$work/state/attachments" -name '*.json' 2>/dev/null) ]] || { echo "demo: a record is left" >&2; fail=1; }
[[ -z $(find "$work/ipam/demo-ib/attachments" -type f 2>/dev/null) ]] || { echo "demo: an IP allocation is left" >&2; fail=1; }
step "ibcni's log"
cat "$work/ibcni.log"
echo "(the verbs check's warning is expected: a veth has no RDMA device. With \"verbsCheck\": {\"mode\": \"require\"}"
echo " the ADD would have failed with error 109 and left the host as it was.)"
ip netns del "$pod"
((fail == 0)) && echo && echo "demo: ADD, CHECK and DEL succeeded and nothing was left behind"
exit $fail
