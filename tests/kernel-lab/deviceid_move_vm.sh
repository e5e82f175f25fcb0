#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deviceID on real PCI hardware: the built ibcni moves the kernel-lab VM's virtio-net PCI NIC eth1
# (a PCI function like an SR-IOV VF handed out as deviceID) into pod namespaces and back; first it
# runs the GoogleTest binaries that need the VM's kernel (sysfs, RDMA netlink with rxe0 on eth0,
# IPoIB netlink, verbs probe).
#
# Inside the VM only (KERNEL_LAB=1; refuses to run anywhere else: it moves eth1 around). Needs eth0
# and eth1 (run.sh --nics 2 or more); other NICs are not touched. Every NIC is left as found
# (name, MTU, MAC, up/down; lab_nics.sh), also when a check or a GoogleTest fails:
#   deviceid_move_vm.sh [--gtest <binary>[:<gtest filter>]]... <ibcni>
# ctest's kernel_lab runs it first in its one boot (kernel_lab.sh, see README.md); by hand, from the
# repository root:
#   ../shared/kernel-lab/run.sh --nics 4 -- bash tests/kernel-lab/deviceid_move_vm.sh build/ibcni
#
# Prints one PASS/FAIL line per check, ends with "N passed, M failed", exits non-zero on any
# failure.
set -u

gtests=()
while [[ ${1:-} == --gtest ]]; do
  gtests+=("${2:?}")
  shift 2
done
IBCNI=$(readlink -f "${1:?usage: $0 [--gtest <binary>]... <ibcni>}")

if [[ ${KERNEL_LAB:-} != 1 ]]; then
  echo "FAIL: this script moves eth1 between namespaces and runs only inside the kernel-lab VM (KERNEL_LAB=1):"
  echo "      ../shared/kernel-lab/run.sh --nics 4 -- bash $0 $IBCNI"
  exit 1
fi
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lab_nics.sh"
nics_snapshot

pass=0
fail=0
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
# check DESCRIPTION COMMAND...: PASS when the command succeeds.
check() {
  local desc=$1
  shift
  if "$@"; then ok "$desc"; else bad "$desc"; fi
}
finish() {
  echo "$pass passed, $fail failed"
  ((fail == 0))
  exit $?
}

WORK=$(mktemp -d /tmp/ibcni-klab.XXXXXX)
NETNSES=()
cleanup() {
  for ns in "${NETNSES[@]}"; do ip netns del "$ns" 2>/dev/null; done
  nics_restore  # eth1 from a pod (by PCI address), eth0 and eth1 with their state as found
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---- (a) the GoogleTest binaries that need the VM's kernel ---------------------------------------
for spec in "${gtests[@]}"; do
  t=${spec%%:*}  # BINARY[:GTEST_FILTER]
  filter=
  [[ $spec == *:* ]] && filter=--gtest_filter=${spec#*:}
  name=$(basename "$t")
  "$t" ${filter:+"$filter"} >"$WORK/$name.log" 2>&1
  rc=$?
  sed 's/^/  | /' "$WORK/$name.log"
  check "$name exits 0" test "$rc" -eq 0
  # The one skip allowed: a child of a real IPoIB port needs an InfiniBand HCA (e2e/hw covers it).
  check "$name skipped nothing inside the VM (but the hardware-only case)" \
    bash -c "! grep '^\[  SKIPPED \]' '$WORK/$name.log' | grep -v -e 'IpoibNetlinkVm.ChildOfARealIpoibPort' -e 'listed below' | grep -q ."
done

# ---- (b) ibcni with deviceID -------------------------------------------------------------------
command -v jq >/dev/null || { bad "jq is needed to read the results"; finish; }
[[ -x $IBCNI ]] || { bad "$IBCNI is not an executable"; finish; }

# eth1's PCI function: /sys/class/net/eth1/device is the virtio device on it.
dev=$(readlink -f /sys/class/net/eth1/device 2>/dev/null)
PCI=$(basename "$(dirname "$dev")")
if [[ -z $dev || ! $PCI =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ || ! -e /sys/bus/pci/devices/$PCI ]]; then
  bad "eth1 is a virtio-net PCI NIC (device -> ${dev:-none}); boot the VM with --nics 2"
  finish
fi
echo "eth1 is PCI function $PCI (device -> $dev)"

STATE=$WORK/state
NET=klab
# The netdevs of the PCI function in the VM's init netns (sysfs is mounted there).
pci_netdevs() { ls "/sys/bus/pci/devices/$PCI"/virtio*/net/ 2>/dev/null; }

# cni VERB CID NETNS-PATH IFNAME CONFIG: runs ibcni like a runtime (fresh environment, config on
# stdin); sets RC, OUT and ERR.
cni() {
  local env=(PATH=/usr/sbin:/usr/bin:/sbin:/bin "CNI_COMMAND=$1" "CNI_CONTAINERID=$2" "CNI_IFNAME=$4"
    CNI_PATH=/usr/lib/cni)
  [[ -n $3 ]] && env+=("CNI_NETNS=$3")
  OUT=$(printf '%s' "$5" | env -i "${env[@]}" "$IBCNI" 2>"$WORK/stderr")
  RC=$?
  ERR=$(cat "$WORK/stderr")
  if ((RC != 0)); then
    echo "  ibcni $1 exit $RC: $OUT"
    sed 's/^/  stderr: /' "$WORK/stderr" | tail -5
  fi
}
starts_with() { [[ $1 == "$2"* ]]; }
out_lacks() { ! out_says "$1"; }

# config VERSION SELECT IPAM: SELECT is "top" (deviceID) or "runtime" (runtimeConfig.deviceID).
# Built without jq (a process costs up to 0.5 s in the emulated VM); the values need no escaping.
config() {
  local c
  c=$(printf '{"cniVersion":"%s","name":"%s","type":"ibcni","mode":"sriov","mtu":1400,"stateDir":"%s","logLevel":"debug"}' \
    "$1" "$NET" "$STATE")
  if [[ $2 == top ]]; then
    c=$(json_with "$c" "\"deviceID\":\"$PCI\"")
  else
    c=$(json_with "$c" "\"runtimeConfig\":{\"deviceID\":\"$PCI\"}")
  fi
  if [[ $3 == static ]]; then
    c=$(json_with "$c" '"ipam":{"type":"static","addresses":[{"address":"10.88.0.5/24"}]}')
  fi
  printf '%s' "$c"
}

# round VERSION SELECT IPAM: ADD, CHECK, DEL of eth1 into a fresh pod.
round() {
  local version=$1 select=$2 ipam=$3
  local tag="$version $select-deviceID ${ipam:-no-ipam}"
  local pod=pod-$RANDOM cid=cid-$RANDOM conf before result
  ip netns add "$pod" && NETNSES+=("$pod")
  conf=$(config "$version" "$select" "$ipam")
  before=$(linkinfo eth1)
  echo "--- $tag: eth1 before: $before"

  cni ADD "$cid" "/run/netns/$pod" net1 "$conf"
  check "[$tag] ADD exits 0" test "$RC" -eq 0
  result=$OUT
  # What the result says, read by one jq: version, interfaces[0]'s name, sandbox and pciID, ips[0].
  local said version_said if_said sandbox_said pci_said ip_said
  said=$(jq -r '[.cniVersion, .interfaces[0].name, .interfaces[0].sandbox,
                 (.interfaces[0] | if has("pciID") then .pciID else "-" end), (.ips[0].address // "-")] | join(" ")' \
    <<<"$OUT" 2>/dev/null)
  read -r version_said if_said sandbox_said pci_said ip_said <<<"$said"
  check "[$tag] ADD result has cniVersion $version" test "$version_said" = "$version"
  check "[$tag] ADD result names net1 in the pod" test "$if_said $sandbox_said" = "net1 /run/netns/$pod"
  if [[ $version == 1.1.0 ]]; then
    check "[$tag] ADD result interfaces[0].pciID is $PCI" test "$pci_said" = "$PCI"
  else
    check "[$tag] ADD result has no pciID below 1.1.0" test "$pci_said" = -
  fi
  if [[ $ipam == static ]]; then
    check "[$tag] ADD result has 10.88.0.5/24" test "$ip_said" = 10.88.0.5/24
  fi
  check "[$tag] eth1 left the init netns" test -z "$(pci_netdevs)"
  local inpod
  inpod=$(linkinfo net1 "$pod")
  echo "  in the pod: $inpod"
  check "[$tag] net1 is in the pod, up, mtu 1400" starts_with "$inpod" "net1 mtu=1400 up=true "
  if [[ $ipam == static ]]; then
    check "[$tag] net1 has 10.88.0.5/24" bash -c "ip -n $pod -o addr show dev net1 | grep -q 'inet 10.88.0.5/24'"
  fi

  # While attached, another pod asking for the same deviceID is told it is busy.
  local other=pod-$RANDOM
  ip netns add "$other" && NETNSES+=("$other")
  cni ADD "cid-other-$RANDOM" "/run/netns/$other" net1 "$conf"
  check "[$tag] a second ADD of the same deviceID fails with 101" code_is 101
  check "[$tag] ... and leaves the other pod empty" test "$(pod_links "$other")" = lo
  ip netns del "$other"

  cni CHECK "$cid" "/run/netns/$pod" net1 "$(with_prev "$conf" "$result")"
  check "[$tag] CHECK exits 0 with empty stdout" test "$RC" -eq 0 -a -z "$OUT"

  cni DEL "$cid" "/run/netns/$pod" net1 "$(with_prev "$conf" "$result")"
  check "[$tag] DEL exits 0 with empty stdout" test "$RC" -eq 0 -a -z "$OUT"
  check "[$tag] eth1 is back in the init netns as it was ($before)" test "$(linkinfo eth1)" = "$before"
  check "[$tag] the pod holds only lo" test "$(pod_links "$pod")" = lo
  check "[$tag] no attachment record is left" bash -c "! find $STATE/attachments/$NET -name '*.json' 2>/dev/null | grep -q ."
  ip netns del "$pod"
}

ip link set eth1 up  # start the first rounds from "up", the others from "down"
round 1.0.0 top static
round 1.0.0 runtime static
ip link set eth1 down
round 1.1.0 top ""
round 1.1.0 runtime ""

# ---- the pod's netns is destroyed while eth1 is in it ------------------------------------------
tag="netns deleted"
pod=pod-$RANDOM
cid=cid-$RANDOM
ip netns add "$pod" && NETNSES+=("$pod")
conf=$(config 1.0.0 top static)
before=$(linkinfo eth1)
cni ADD "$cid" "/run/netns/$pod" net1 "$conf"
check "[$tag] ADD exits 0" test "$RC" -eq 0
result=$OUT
ip netns del "$pod"
# The kernel hands a physical device of a dying namespace back to the init netns (under its pod
# name when free, else dev<ifindex>), asynchronously.
back=
for _ in $(seq 100); do
  back=$(pci_netdevs)
  [[ -n $back ]] && break
  sleep 0.2
done
check "[$tag] the kernel returned the PCI netdev to the init netns (as '${back:-nothing}')" test -n "$back"
[[ -n $back ]] && echo "  returned: $(linkinfo "$back")"
cni DEL "$cid" "/run/netns/$pod" net1 "$(with_prev "$conf" "$result")"
check "[$tag] DEL exits 0" test "$RC" -eq 0
check "[$tag] the device is back under the name eth1 as it was ($before)" test "$(linkinfo eth1)" = "$before"
check "[$tag] no attachment record is left" bash -c "! find $STATE/attachments/$NET -name '*.json' 2>/dev/null | grep -q ."
cni DEL "$cid" "/run/netns/$pod" net1 "$(with_prev "$conf" "$result")"
check "[$tag] DEL again exits 0" test "$RC" -eq 0

# ---- no DEL at all: ibcni reconcile brings the device back ---------------------------------------
# The pod's namespace is destroyed and no DEL ever comes (a killed runtime, a crashed node agent):
# the kernel returns eth1 under the pod's name, and `ibcni reconcile` restores it. Then the same
# with the device taken meanwhile by a live pod: ADD of a third pod names only the live holder
# (101), reconcile leaves the live pod's device alone, and restores eth1 once that pod's DEL ends it.
# wait_back: the PCI netdev is in the init netns again (asynchronous); echoes its name.
wait_back() {
  local n
  for _ in $(seq 100); do
    n=$(pci_netdevs)
    [[ -n $n ]] && { echo "$n"; return 0; }
    sleep 0.2
  done
  return 1
}
reconcile() { "$IBCNI" reconcile --state-dir "$STATE" --ipam-data-dir "$WORK/ipam" "$@"; }
# rc_action CID: the action of reconcile's last JSON report (RCOUT) for container CID.
rc_action() { jq -r --arg c "$1" '[.attachments[] | select(.containerID == $c) | .action] | join(",")' <<<"$RCOUT"; }
rc_nothing() { jq -e '.attachments == []' <<<"$RCOUT" >/dev/null; }
no_records() { ! find "$STATE/attachments" -name '*.json' 2>/dev/null | grep -q .; }

tag="reconcile"
hostinfo eth1
alias_was=${HOSTINFO#* alias=}
ip link set eth1 alias "eth1 before reconcile"
before=$(linkinfo eth1)
conf=$(config 1.0.0 top "")
pod=pod-$RANDOM
ip netns add "$pod" && NETNSES+=("$pod")
cni ADD cid-rc "/run/netns/$pod" net1 "$conf"
check "[$tag] ADD exits 0" test "$RC" -eq 0
ip netns del "$pod"
back=$(wait_back)
check "[$tag] the kernel returned eth1 as '${back:-nothing}', not as eth1" test -n "$back" -a "$back" != eth1
RCOUT=$(reconcile --dry-run --json)
check "[$tag] --dry-run would undo it" test "$(rc_action cid-rc)" = would-undo
check "[$tag] ... and changes nothing" test "$(pci_netdevs)" = "$back"
RCOUT=$(reconcile --json)
check "[$tag] reconcile undoes it" test "$(rc_action cid-rc)" = undone
check "[$tag] eth1 is back as it was ($before)" test "$(linkinfo eth1)" = "$before"
check "[$tag] no record is left" no_records
RCOUT=$(reconcile --json)
check "[$tag] a second pass finds nothing" rc_nothing

tag="reconcile, device taken by a live pod"
pod=pod-$RANDOM
ip netns add "$pod" && NETNSES+=("$pod")
cni ADD cid-dead "/run/netns/$pod" net1 "$conf"
check "[$tag] ADD of the pod about to die exits 0" test "$RC" -eq 0
ip netns del "$pod"
back=$(wait_back)
check "[$tag] the kernel returned eth1 as '${back:-nothing}'" test -n "$back"
live=pod-$RANDOM
ip netns add "$live" && NETNSES+=("$live")
cni ADD cid-live "/run/netns/$live" net1 "$conf"
check "[$tag] ADD of a live pod takes the returned device (deviceID)" test "$RC" -eq 0
livecfg=$(with_prev "$conf" "$OUT")
third=pod-$RANDOM
ip netns add "$third" && NETNSES+=("$third")
cni ADD cid-third "/run/netns/$third" net1 "$conf"
check "[$tag] ADD of a third pod fails with 101" code_is 101
check "[$tag] ... naming the live holder" out_says "attached to container cid-live"
check "[$tag] ... and not the dead one" out_lacks cid-dead
inlive=$(linkinfo net1 "$live")
RCOUT=$(reconcile --json)
check "[$tag] reconcile leaves the dead pod's record for later (superseded)" test "$(rc_action cid-dead)" = superseded
check "[$tag] ... and the live pod alone" test "$(rc_action cid-live)" = alive -a "$(linkinfo net1 "$live")" = "$inlive"
cni DEL cid-live "/run/netns/$live" net1 "$livecfg"
check "[$tag] DEL of the live pod exits 0" test "$RC" -eq 0
RCOUT=$(reconcile --json)
check "[$tag] the next pass undoes the dead pod's attachment" test "$(rc_action cid-dead)" = undone
check "[$tag] eth1 is back as it was ($before)" test "$(linkinfo eth1)" = "$before"
check "[$tag] no record is left" no_records
drop_netnses_rc() {
  for ns in "$live" "$third"; do ip netns del "$ns" 2>/dev/null; done
}
drop_netnses_rc
ip link set eth1 alias "$alias_was"

# ---- a PCI function without a netdev -----------------------------------------------------------
tag="no netdev"
if [[ -e /sys/bus/pci/devices/0000:00:00.0 ]]; then
  pod=pod-$RANDOM
  ip netns add "$pod" && NETNSES+=("$pod")
  conf=$(config 1.0.0 top static)
  conf=${conf/"\"deviceID\":\"$PCI\""/'"deviceID":"0000:00:00.0"'}
  cni ADD cid-bridge "/run/netns/$pod" net1 "$conf"
  check "[$tag] deviceID 0000:00:00.0 (the host bridge) exits 1" test "$RC" -eq 1
  check "[$tag] ... with code 100" code_is 100
  check "[$tag] ... and the pod holds only lo" test "$(pod_links "$pod")" = lo
  ip netns del "$pod"
else
  bad "[$tag] the VM has no PCI host bridge 0000:00:00.0"
fi

# ---- RDMA: an rxe device on eth1, found by its netdev through RDMA netlink ----------------------
has_rxe() { [[ -e /sys/class/infiniband/rxe1 ]]; }
add_rxe() { has_rxe || rdma link add rxe1 type rxe netdev eth1; }
drop_netnses() {
  for ns in "${NETNSES[@]}"; do ip netns del "$ns" 2>/dev/null; done
  NETNSES=()
}
# refused TAG CONF CODE TEXT: ADD of eth1 fails with CODE, the message holds TEXT, and nothing
# changed: eth1 as before, the pod empty, rxe1 still in the host, no record.
refused() {
  local tag=$1 conf=$2 code=$3 text=$4 pod=pod-$RANDOM before
  ip netns add "$pod" && NETNSES+=("$pod")
  before=$(linkinfo eth1)
  cni ADD "cid-$RANDOM" "/run/netns/$pod" net1 "$conf"
  check "[$tag] ADD fails with code $code" code_is "$code"
  check "[$tag] ... saying '$text'" out_says "$text"
  check "[$tag] ... and leaves eth1 as it was ($before)" test "$(linkinfo eth1)" = "$before"
  check "[$tag] ... the pod holding only lo" test "$(pod_links "$pod")" = lo
  check "[$tag] ... rxe1 in the host" has_rxe
  check "[$tag] ... and no attachment record" bash -c "! find $STATE/attachments -name '*.json' 2>/dev/null | grep -q ."
}

modprobe rdma_rxe 2>/dev/null
drop_netnses
check "[rdma] the node is in shared RDMA netns mode" set_rdma_mode shared
check "[rdma] rxe1 made on eth1" add_rxe
base=$(config 1.0.0 top static)

tag="rdma shared"
refused "$tag rdmaIsolation=true" "$(json_with "$base" '"rdmaIsolation":true')" 7 "rdma system set netns exclusive"
refused "$tag pkey not in rxe1's table" "$(json_with "$base" '"pkey":"0x1234"')" 7 "0xffff"
pod=pod-$RANDOM
ip netns add "$pod" && NETNSES+=("$pod")
# Multus' device-info path with no file there (no device plugin wrote one): ADD writes it for the pod.
F=/var/run/k8s.cni.cncf.io/devinfo/cni/default-klab-cid-pkey_net1
rm -f "$F"
conf=$(json_with "$base" "\"pkey\":\"0x7fff\",\"runtimeConfig\":{\"CNIDeviceInfoFile\":\"$F\"}")
before=$(linkinfo eth1)
cni ADD cid-pkey "/run/netns/$pod" net1 "$conf"
check "[$tag] pkey 0x7fff (rxe1 holds 0xffff) is accepted: ADD exits 0" test "$RC" -eq 0
result=$OUT
check "[$tag] ... and rdmaIsolation auto left rxe's (shared) device alone" bash -c "! grep -q 'moving RDMA device' '$WORK/stderr'"
check "[$tag] ... the device-info file (spec 1.1.0) names eth1's PCI address and rxe1" \
  jq -e --arg pci "$PCI" '.type == "pci" and .version == "1.1.0" and .pci["pci-address"] == $pci and
                          .pci["rdma-device"] == "rxe1" and (.pci | has("pf-pci-address") | not)' "$F"
check "[$tag] ... read-only (0444) and remembered in the record" \
  bash -c "test \"\$(stat -c %a '$F')\" = 444 && grep -rq '\"deviceInfoFile\": *\"$F\"' '$STATE'"
cni DEL cid-pkey "/run/netns/$pod" net1 "$(with_prev "$conf" "$result")"
check "[$tag] DEL exits 0 and eth1 is back as it was" test "$RC" -eq 0 -a "$(linkinfo eth1)" = "$before"
check "[$tag] ... and the device-info file ibcni wrote is gone" test ! -e "$F"
# Moving rxe's netdev out of the initial namespace unregisters rxe (a kernel fact): make it again.
drop_netnses
add_rxe

tag="rdma exclusive"
check "[$tag] the node switched to exclusive RDMA netns mode" set_rdma_mode exclusive
check "[$tag] rdma system show says exclusive" test "$(rdma_mode)" = exclusive
refused "$tag rdmaIsolation=auto" "$base" 102 "rxe1"
check "[$tag] ... the kernel's EOPNOTSUPP is in the error" out_says "Operation not supported"
refused "$tag rdmaIsolation=true" "$(json_with "$base" '"rdmaIsolation":true')" 102 "set rdmaIsolation to false"
pod=pod-$RANDOM
ip netns add "$pod" && NETNSES+=("$pod")
conf=$(json_with "$base" '"rdmaIsolation":false')
cni ADD cid-noiso "/run/netns/$pod" net1 "$conf"
check "[$tag] rdmaIsolation=false attaches eth1 without moving rxe1" test "$RC" -eq 0
result=$OUT
cni DEL cid-noiso "/run/netns/$pod" net1 "$(with_prev "$conf" "$result")"
check "[$tag] ... and DEL returns it" test "$RC" -eq 0 -a "$(linkinfo eth1 | cut -d' ' -f1)" = eth1
drop_netnses
rdma link delete rxe1 2>/dev/null
check "[rdma] the node is back in shared mode" set_rdma_mode shared

# ---- ipoib mode: parents that are not IPoIB are refused before anything is sent -----------------
modprobe ib_ipoib 2>/dev/null
modprobe dummy 2>/dev/null
modprobe 8021q 2>/dev/null
ip link add klveth0 type veth peer name klveth1
ip link add kldummy0 type dummy
ip link add link eth0 name eth0.42 type vlan id 42
pod=pod-$RANDOM
ip netns add "$pod" && NETNSES+=("$pod")
all_links() { ip -o link show | awk -F': ' '{print $2}' | sort | tr '\n' ' '; }
for parent in klveth0 kldummy0 eth0.42; do
  kind=$(ip -d -j link show dev "$parent" | jq -r '.[0].linkinfo.info_kind // "physical"')
  tag="ipoib parent $parent ($kind)"
  before=$(all_links)
  conf=$(printf '{"cniVersion":"1.0.0","name":"klab-ipoib","type":"ibcni","mode":"ipoib","master":"%s","pkey":"0x7fff","stateDir":"%s"}' \
    "$parent" "$STATE")
  cni ADD "cid-$RANDOM" "/run/netns/$pod" net1 "$conf"
  check "[$tag] ADD fails with code 7" code_is 7
  check "[$tag] ... naming it a $kind link, not IPoIB" out_says "a $kind link"
  check "[$tag] ... and no link was created" test "$(all_links)" = "$before"
  check "[$tag] ... and the pod holds only lo" test "$(pod_links "$pod")" = lo
done
ip link del klveth0 2>/dev/null
ip link del kldummy0 2>/dev/null
ip link del eth0.42 2>/dev/null
drop_netnses

check "eth1 ends where it started" test "$(linkinfo eth1 | cut -d' ' -f1)" = eth1

finish
