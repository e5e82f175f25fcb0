#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The verbs check (verbsCheck) of the built ibcni against real rxe verbs data, in shared RDMA netns
# mode: a veth pair stands in for a VF (host end vcvf0, named by "device"; its peer vcpeer0 stays
# in the host, up), embedded IPAM, a pod netns vcpod.
#   1. ADD, require: moving vcvf0 unregisters the rxe0 on it (a kernel fact), so ADD fails with
#      109 "not visible" and rolls back fully (link, pod, IPAM, record).
#   2. ADD, warn: succeeds and logs the warning. rxe0 made again from the pod on net1 makes CHECK,
#      require, pass ("is usable" in the log); sysfs shows the RoCE v2 GID ::ffff:<pod IPv4>.
#      A prevResult naming an address net1 lacks fails CHECK on the address (107) before the verbs
#      check runs, so CHECK cannot reach the GID finding: that sub-check prints SKIP.
#      ibcni agent (beside ibcni) then shows that rxe0 as the pod's RDMA port in /metrics: state
#      ACTIVE and its hw counters, labelled with the network.
#   3. vcpeer0 down: net1 loses carrier, rxe0's port goes DOWN: CHECK fails with 109 "DOWN, not
#      ACTIVE"; vcpeer0 up again: CHECK passes.
#   4. rxe0 deleted: CHECK fails with 109 "not visible".
#   5. DEL exits 0 and leaves nothing; DEL again exits 0.
#   6. A virtio-net PCI NIC (eth1, named by deviceID: the stand-in for a VF a device plugin hands
#      out), require: with no verbs device on it, ADD fails with 109 "not an RDMA-capable device"
#      (the fix names isRdma) and eth1 is back in the host as found (name, MTU, MAC, state). With
#      rxe0 on eth1, require: the move unregisters rxe0 (a kernel fact of rxe, see
#      ../shared/kernel-lab/README.md), so ADD fails with 109 naming rxe0 as not visible, eth1 back
#      as found; an ADD that succeeds under require needs an RDMA device that survives the move,
#      which a soft device does not. warn: ADD succeeds, rxe0 made from the pod on net1 makes CHECK
#      (require) pass; rxe0 deleted (rdma link delete): CHECK 109 naming rxe0; DEL: eth1 as found.
# ctest's kernel_lab (label kernel-lab) runs it after doctor_vm_check.sh in its one boot
# (kernel_lab.sh, see README.md); by hand, from the repository root:
#   ../shared/kernel-lab/run.sh --nics 4 -- bash tests/kernel-lab/verbs_check_vm.sh build/ibcni
# Inside the VM only (KERNEL_LAB=1); parts 1-5 use no NIC, part 6 uses eth1 (--nics 2 or more;
# other NICs are not touched) and leaves it as found (lab_nics.sh), also on failure. Prints one
# PASS/FAIL line per check, ends with "N passed, M failed", exits non-zero on any failure, and
# removes what it made even then.
set -u
IBCNI=$(readlink -f "${1:?usage: $0 <ibcni>}")
if [[ ${KERNEL_LAB:-} != 1 ]]; then
  echo "FAIL: run inside the kernel-lab VM (KERNEL_LAB=1): ../shared/kernel-lab/run.sh --nics 4 -- bash $0 $IBCNI"
  exit 1
fi

source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../support/check.sh"
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lab_nics.sh"
nics_snapshot
finish() {
  echo "verbs_check_vm.sh ran for $SECONDS s"
  finish_checks
}

RXE=rxe0
HOSTEND=vcvf0    # the "VF": moved into the pod as net1
PEER=vcpeer0     # its peer, in the host: its state is net1's carrier
POD=vcpod
PODNS=/run/netns/$POD
NET=vcnet
POD_IP=10.77.0.10
WORK=$(mktemp -d /tmp/ibcni-verbs.XXXXXX)
STATE=$WORK/state
IPAMDIR=$WORK/ipam
LOG=$WORK/ibcni.log
made_rxe=0
cleanup() {
  ip netns del "$POD" 2>/dev/null
  ip link del "$HOSTEND" 2>/dev/null
  ip link del "$PEER" 2>/dev/null
  ((made_rxe)) && rdma link delete "$RXE" 2>/dev/null
  nics_restore
  rm -rf "$WORK"
}
trap cleanup EXIT

command -v jq >/dev/null || { check "jq is installed (needed to read results)" false; finish; }
command -v rdma >/dev/null || { check "iproute2's rdma is installed" false; finish; }
[[ -x $IBCNI ]] || { check "$IBCNI is an executable" false; finish; }
modprobe rdma_rxe 2>/dev/null
modprobe veth 2>/dev/null

has_rxe() { [[ -e /sys/class/infiniband/$RXE ]]; }
no_record() { ! find "$STATE" -name '*.json' 2>/dev/null | grep -q .; }
# The embedded IPAM's store (made by the first ADD) holds no attachment and no claim.
ipam_empty() {
  [[ -d $IPAMDIR/$NET/ips && -d $IPAMDIR/$NET/attachments ]] && ! find "$IPAMDIR/$NET/attachments" "$IPAMDIR/$NET/ips" -mindepth 1 2>/dev/null | grep -q .
}

# cni VERB CID CONFIG [CNI_ARGS]: runs ibcni like a runtime (fresh environment, config on stdin,
# net1 in $POD); sets RC and OUT. The log goes to $LOG (logFile); NEWLOG is what this run added.
cni() {
  local env=(PATH=/usr/sbin:/usr/bin:/sbin:/bin "CNI_COMMAND=$1" "CNI_CONTAINERID=$2" CNI_IFNAME=net1
    "CNI_NETNS=$PODNS" CNI_PATH=/usr/lib/cni)
  [[ -n ${4:-} ]] && env+=("CNI_ARGS=$4")
  local before
  before=$(stat -c %s "$LOG" 2>/dev/null || echo 0)
  OUT=$(printf '%s' "$3" | env -i "${env[@]}" "$IBCNI" 2>"$WORK/stderr")
  RC=$?
  NEWLOG=$(tail -c +$((before + 1)) "$LOG" 2>/dev/null)
  if ((RC != 0)); then
    echo "  ibcni $1 exit $RC: $OUT"
  fi
  sed 's/^/  stderr: /' "$WORK/stderr" | tail -5
}
jqtest() { jq -e "$1" >/dev/null 2>&1 <<<"$OUT"; }
log_says() { grep -qE -- "$1" <<<"$NEWLOG"; }
# config MODE [SELECT]: the network configuration with verbsCheck.mode MODE; SELECT the device
# ("device":"$HOSTEND" unless given). Built without jq (a process costs up to 0.5 s in the emulated
# VM); the values need no escaping.
config() {
  printf '{"cniVersion":"1.0.0","name":"%s","type":"ibcni","mode":"sriov",%s,"stateDir":"%s","logLevel":"info","logFile":"%s","verbsCheck":{"mode":"%s","timeoutMs":20000},"ipam":{"type":"ibcni-ipam","subnet":"10.77.0.0/24","dataDir":"%s"}}' \
    "$NET" "${2:-"\"device\":\"$HOSTEND\""}" "$STATE" "$LOG" "$1" "$IPAMDIR"
}
# The RoCE v2 GID of an IPv4 address as sysfs writes it: 0000:...:ffff:0a4d:000a.
gid_of_v4() {
  local a b c d
  IFS=. read -r a b c d <<<"$1"
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d"
}
# sysfs_has_rocev2_gid IPV4: $RXE port 1's GID table holds ::ffff:IPV4 with type "RoCE v2". The
# table has hundreds of entries: one grep reads them all (a process per file is slow in the VM).
sysfs_has_rocev2_gid() {
  local want f idx dir=/sys/class/infiniband/$RXE/ports/1
  want=$(gid_of_v4 "$1")
  for _ in $(seq 50); do
    for f in $(grep -slxF "$want" "$dir"/gids/*); do
      idx=${f##*/}
      if [[ $(cat "$dir/gid_attrs/types/$idx" 2>/dev/null) == "RoCE v2" ]]; then
        echo "  sysfs: $dir/gids/$idx = $want, gid_attrs/types/$idx = RoCE v2"
        return 0
      fi
    done
    sleep 0.1
  done
  echo "  sysfs: no RoCE v2 GID $want in $dir; the non-zero GIDs:"
  grep -svxF 0000:0000:0000:0000:0000:0000:0000:0000 "$dir"/gids/* | sed 's/^/    /'
  return 1
}

# ---- the world: shared mode, veth pair, rxe on the host end, pod netns --------------------------
if has_rxe; then
  check "no $RXE exists before the test (it would be clobbered)" false
  finish
fi
check "the node is in shared RDMA netns mode" set_rdma_mode shared
check "rdma system show says shared" test "$(rdma_mode)" = shared
check "veth pair $HOSTEND/$PEER made" ip link add "$HOSTEND" type veth peer name "$PEER" || finish
ip link set "$PEER" up
ip link set "$HOSTEND" up
ip netns add "$POD" || { check "pod netns $POD made" false; finish; }
check "$RXE made on $HOSTEND" rdma link add "$RXE" type rxe netdev "$HOSTEND" || finish
made_rxe=1
check "$RXE/1 is ACTIVE" rdma_port_is "$RXE" ACTIVE
before=$(linkinfo "$HOSTEND")
echo "$HOSTEND before: $before"

# ---- 1. ADD, require: the move unregisters the rxe -> 109, full rollback ------------------------
tag="1 add require"
cni ADD vc-cid-1 "$(config require)" "IP=$POD_IP"
check "[$tag] ADD exits 1" test "$RC" -eq 1
check "[$tag] ... with code 109" code_is 109
check "[$tag] ... saying $RXE is not visible in the pod's netns" \
  out_says "RDMA device $RXE is not visible in the pod's network namespace"
check "[$tag] the move unregistered $RXE (a kernel fact the check saw)" bash -c "! rdma dev show $RXE >/dev/null 2>&1"
check "[$tag] $HOSTEND is back in the host as it was ($before)" test "$(linkinfo "$HOSTEND")" = "$before"
check "[$tag] $PEER is still in the host, up" test "$(linkinfo "$PEER" | cut -d' ' -f3)" = up=true
check "[$tag] the pod holds only lo" test "$(pod_links "$POD")" = lo
check "[$tag] the IPAM store holds no allocation" ipam_empty
check "[$tag] no attachment record is left" no_record

# ---- 2. ADD, warn: succeeds; an rxe made from the pod on net1 makes CHECK (require) pass ---------
tag="2 add warn"
check "[$tag] $RXE made on $HOSTEND again" rdma link add "$RXE" type rxe netdev "$HOSTEND"
conf=$(config warn)
cni ADD vc-cid "$conf" "IP=$POD_IP"
check "[$tag] ADD exits 0" test "$RC" -eq 0
result=$OUT
check "[$tag] ... and gets $POD_IP/24 again (the first ADD released it)" jqtest ".ips[0].address == \"$POD_IP/24\""
check "[$tag] ... logging the warning that $RXE is not visible" \
  log_says "\[warning\].*verbs check: RDMA device $RXE is not visible in the pod's network namespace"
check "[$tag] net1 is in the pod, up, with $POD_IP/24" \
  bash -c "ip -n $POD -o addr show dev net1 | grep -q 'inet $POD_IP/24'"
check "[$tag] an attachment record exists" bash -c "find '$STATE' -name '*.json' | grep -q ."
check "[$tag] the IPAM store holds the claim on $POD_IP" test -L "$IPAMDIR/$NET/ips/$POD_IP"

tag="2 check pass"
check "[$tag] $RXE made from the pod on net1" ip netns exec "$POD" rdma link add "$RXE" type rxe netdev net1
check "[$tag] $RXE/1 is ACTIVE" rdma_port_is "$RXE" ACTIVE
check "[$tag] $RXE is visible from the pod (shared mode)" bash -c "ip netns exec $POD rdma dev show $RXE >/dev/null"
check "[$tag] $RXE/1's netdev is net1 (seen from the pod)" \
  test "$(ip netns exec "$POD" rdma -j link show "$RXE/1" | jq -r '.[0].netdev')" = net1
require=$(with_prev "$(config require)" "$result")
cni CHECK vc-cid "$require"
check "[$tag] CHECK (require) exits 0 with empty stdout" test "$RC" -eq 0 -a -z "$OUT"
check "[$tag] ... and the log says '$RXE port 1 is usable from $PODNS'" \
  log_says "\[info\].*verbs check: $RXE port 1 is usable from $PODNS"
check "[$tag] sysfs: $RXE/1 has the RoCE v2 GID ::ffff:$POD_IP the check looked for" sysfs_has_rocev2_gid "$POD_IP"
# Can the GID finding fire? A prevResult with an address net1 lacks: CHECK compares addresses
# before it runs the verbs check, so it fails there (107) and the GID finding is not reached.
other=$(jq -c '.ips[0].address = "10.77.0.99/24"' <<<"$result")
cni CHECK vc-cid "$(with_prev "$(config require)" "$other")"
if code_is 109 && out_says "no RoCE v2 GID of $RXE port 1 carries 10.77.0.99"; then
  check "[$tag] CHECK with 10.77.0.99 (not on net1) fails with 109: no RoCE v2 GID carries it" true
elif code_is 107 && out_says "address 10.77.0.99/24 is missing from net1"; then
  echo "SKIP [$tag] the GID finding: CHECK with 10.77.0.99 fails earlier, 107 \"address ... is missing\""
else
  check "[$tag] CHECK with 10.77.0.99 (not on net1) fails with 107 (address) or 109 (GID)" false
fi

# ---- 2 agent: ibcni agent shows the pod's RDMA port (the rxe made from the pod) in /metrics -------
tag="2 agent"
AGENT=$(dirname "$IBCNI")/ibcni-agent
if [[ -x $AGENT ]]; then
  aport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$AGENT" --interval 0 --metrics-listen "127.0.0.1:$aport" --state-dir "$STATE" --ipam-data-dir "$IPAMDIR" \
    --pool-index-dir "" >"$WORK/agent.log" 2>&1 &
  agent_pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$aport/healthz" >/dev/null && break; sleep 0.2; done
  metrics=$(curl -s "http://127.0.0.1:$aport/metrics")
  labels="device=\"$RXE\",network=\"$NET\",pod=\"\",pod_namespace=\"\",port=\"1\""
  check "[$tag] /metrics: ibcni_rdma_port_state{$labels} 1 (ACTIVE)" \
    grep -qF "ibcni_rdma_port_state{$labels} 1" <<<"$metrics"
  check "[$tag] ... and $RXE's hw counters (rxe has no PMA counters), sent_pkts among them" \
    grep -qF "ibcni_rdma_port_hw_counters_total{$labels,counter=\"sent_pkts\"}" <<<"$metrics"
  check "[$tag] ... and ibcni_attachments{network=\"$NET\"} 1" \
    grep -qF "ibcni_attachments{mode=\"sriov\",network=\"$NET\"} 1" <<<"$metrics"
  kill -TERM "$agent_pid"
  wait "$agent_pid"
  check "[$tag] SIGTERM: the agent exits 0" test "$?" -eq 0
else
  echo "SKIP [$tag] no ibcni-agent beside $IBCNI (a build without prometheus-cpp)"
fi

# ---- 3. carrier down: the rxe port goes DOWN --------------------------------------------------
tag="3 carrier down"
ip link set "$PEER" down
check "[$tag] $RXE/1 is DOWN once $PEER is down" rdma_port_is "$RXE" DOWN
check "[$tag] net1 is still administratively up, without carrier" \
  test "$(ip -n "$POD" -j link show net1 | jq -r '.[0] | "\(any(.flags[]; . == "UP")) \(any(.flags[]; . == "NO-CARRIER"))"')" = "true true"
cni CHECK vc-cid "$require"
check "[$tag] CHECK (require) exits 1 with code 109" code_is 109
check "[$tag] ... saying '$RXE port 1 is DOWN, not ACTIVE'" out_says "$RXE port 1 is DOWN, not ACTIVE"
ip link set "$PEER" up
check "[$tag] $RXE/1 is ACTIVE again once $PEER is up" rdma_port_is "$RXE" ACTIVE
cni CHECK vc-cid "$require"
check "[$tag] CHECK (require) exits 0 again" test "$RC" -eq 0 -a -z "$OUT"

# ---- 4. the rxe deleted --------------------------------------------------------------------------
tag="4 device gone"
check "[$tag] $RXE deleted from the pod" ip netns exec "$POD" rdma link delete "$RXE"
check "[$tag] $RXE is gone" bash -c "! rdma dev show $RXE >/dev/null 2>&1"
cni CHECK vc-cid "$require"
check "[$tag] CHECK (require) exits 1 with code 109" code_is 109
check "[$tag] ... saying $RXE is not visible" out_says "RDMA device $RXE is not visible in the pod's network namespace"

# ---- 5. DEL -----------------------------------------------------------------------------------
tag="5 del"
cni DEL vc-cid "$(with_prev "$conf" "$result")"
check "[$tag] DEL exits 0 with empty stdout" test "$RC" -eq 0 -a -z "$OUT"
check "[$tag] $HOSTEND is back in the host as it was ($before)" test "$(linkinfo "$HOSTEND")" = "$before"
check "[$tag] the pod holds only lo" test "$(pod_links "$POD")" = lo
check "[$tag] the IPAM store holds no allocation" ipam_empty
check "[$tag] no attachment record is left" no_record
cni DEL vc-cid "$(with_prev "$conf" "$result")"
check "[$tag] DEL again exits 0 with empty stdout" test "$RC" -eq 0 -a -z "$OUT"
check "[$tag] ... and $HOSTEND is still as it was" test "$(linkinfo "$HOSTEND")" = "$before"

# ---- 6. a virtio-net PCI NIC by deviceID: no verbs device, then rxe0 on it ------------------------
NIC=eth1
NIC_PCI=${NICS_PCI[$NIC]:-}
# config_pci MODE: sriov mode on $NIC's PCI function, verbsCheck.mode MODE.
config_pci() { config "$1" "\"deviceID\":\"$NIC_PCI\""; }
nic_as_found() {
  local cur
  cur=$(netdev_of_pci "$NIC_PCI")
  hostinfo "${cur:-$NIC}" || { echo "  $NIC (PCI $NIC_PCI) is not in the host"; return 1; }
  [[ $HOSTINFO == "${NICS_FOUND[$NIC]}" ]] || { echo "  now '$HOSTINFO', was '${NICS_FOUND[$NIC]}'"; return 1; }
}
tag="6 nic"
if [[ -z $NIC_PCI ]]; then
  check "[$tag] $NIC is a virtio-net PCI NIC (boot the VM with --nics 2 or more)" false
  finish
fi
rdma link delete "$RXE" 2>/dev/null  # part 4 deleted it; this only makes sure
echo "$NIC ($NIC_PCI) as found: ${NICS_FOUND[$NIC]}"

tag="6a require, no verbs device"
check "[$tag] $NIC has no RDMA device" bash -c "! rdma -j link show 2>/dev/null | jq -e 'any(.[]; .netdev == \"$NIC\")' >/dev/null"
cni ADD vc-nic-1 "$(config_pci require)" "IP=$POD_IP"
check "[$tag] ADD exits 1" test "$RC" -eq 1
check "[$tag] ... with code 109" code_is 109
check "[$tag] ... saying deviceID $NIC_PCI is not an RDMA-capable device" \
  out_says "deviceID = \"$NIC_PCI\" (netdev $NIC, PCI $NIC_PCI, driver virtio-pci) is not an RDMA-capable device"
check "[$tag] ... and the fix names isRdma" out_says '"isRdma": true'
check "[$tag] $NIC is back in the host as found (name, MTU, MAC, state)" nic_as_found
check "[$tag] the pod holds only lo" test "$(pod_links "$POD")" = lo
check "[$tag] the IPAM store holds no allocation" ipam_empty
check "[$tag] no attachment record is left" no_record

tag="6b require, rxe0 on the NIC"
check "[$tag] $RXE made on $NIC" rdma link add "$RXE" type rxe netdev "$NIC" && made_rxe=1
cni ADD vc-nic-2 "$(config_pci require)" "IP=$POD_IP"
check "[$tag] ADD exits 1 with code 109 (moving $NIC unregisters $RXE: a kernel fact of rxe)" code_is 109
check "[$tag] ... naming $RXE as not visible in the pod" \
  out_says "RDMA device $RXE is not visible in the pod's network namespace"
check "[$tag] $NIC is back in the host as found" nic_as_found
check "[$tag] the pod holds only lo" test "$(pod_links "$POD")" = lo
check "[$tag] no attachment record is left" no_record

tag="6c warn, then CHECK"
rdma dev show "$RXE" >/dev/null 2>&1 || check "[$tag] $RXE made on $NIC again" rdma link add "$RXE" type rxe netdev "$NIC"
nconf=$(config_pci warn)
cni ADD vc-nic "$nconf" "IP=$POD_IP"
check "[$tag] ADD (warn) exits 0" test "$RC" -eq 0
nresult=$OUT
check "[$tag] ... and the record names $RXE" bash -c "grep -rq '\"rdmaDevice\": *\"$RXE\"' '$STATE'"
check "[$tag] $RXE made from the pod on net1" ip netns exec "$POD" rdma link add "$RXE" type rxe netdev net1
check "[$tag] $RXE/1 is ACTIVE" rdma_port_is "$RXE" ACTIVE
nrequire=$(with_prev "$(config_pci require)" "$nresult")
cni CHECK vc-nic "$nrequire"
check "[$tag] CHECK (require) exits 0" test "$RC" -eq 0 -a -z "$OUT"
check "[$tag] $RXE deleted (rdma link delete)" ip netns exec "$POD" rdma link delete "$RXE"
cni CHECK vc-nic "$nrequire"
check "[$tag] CHECK (require) exits 1 with code 109" code_is 109
check "[$tag] ... naming $RXE" out_says "RDMA device $RXE is not visible in the pod's network namespace"
cni DEL vc-nic "$(with_prev "$nconf" "$nresult")"
check "[$tag] DEL exits 0" test "$RC" -eq 0 -a -z "$OUT"
check "[$tag] $NIC is back in the host as found" nic_as_found
check "[$tag] no attachment record is left" no_record
check "[$tag] the IPAM store holds no allocation" ipam_empty

finish
