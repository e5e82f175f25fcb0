#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# End to end on PCI NICs: the built ibcni (sriov mode, embedded ibcni-ipam) driven through the
# libcni driver (e2e/cnitool, upstream cnitool's command line) with a NetworkAttachmentDefinition-style
# conflist, in the kernel-lab VM booted with --nics 4. Its virtio-net PCI NICs eth0..eth3 stand in
# for SR-IOV VFs: each is handed to ibcni as runtimeConfig.deviceID (capability "deviceID"), by its
# PCI address, as a device plugin would. All four sit on one emulated Ethernet segment, so two pods
# can ping each other.
#
# Scenarios (names are stable; E2E_LAB_ONLY="pods_ping churn_50" runs a subset):
#   pods_ping           two pods, one NIC each (eth2, eth3), ibcni-ipam addresses (one requested
#                       through the ips capability, with a mac): they ping each other, CHECK passes
#                       for both, DEL returns both NICs under their names with MTU, MAC and up/down
#                       state as before; no record, allocation or libcni cache file is left.
#   netns_gone_del      ADD, the pod's netns deleted (as after a crashed node), then DEL: exit 0, the
#                       address released, the NIC back in the host under its name; DEL again exit 0.
#   churn_50            50 ADD/DEL cycles over the 4 NICs in random order (several pods alive at
#                       once; seed E2E_LAB_SEED, printed): nothing leaked at the end.
#   same_network_twice  one pod gets the same network twice (net1, net2; two deviceIDs): both pass
#                       CHECK, DEL net1 leaves net2 intact, DEL net2; then net1..net3 with 3 NICs.
#   multus_shape        what Multus sends a delegate for a NAD with a resourceName annotation,
#                       by direct exec (env -i, CNI_* variables): top-level deviceID and pciBusID,
#                       runtimeConfig with ips and mac (no GUID: a virtio NIC is no VF), CNI_ARGS
#                       IgnoreUnknown, K8S_POD_* (and Multus' legacy IP=/MAC=): ADD, CHECK, DEL.
# The verbs check over rxe is verbs_check_vm.sh's job (same boot, see README.md).
#
# Inside the VM only (KERNEL_LAB=1: it moves the VM's NICs around). By hand, from the repository root:
#   e2e/build-driver.sh                 # -> build/e2e/cnitool, on the host (Go is slow in the VM)
#   ../shared/kernel-lab/run.sh --nics 4 --timeout 900 -- bash tests/kernel-lab/e2e_lab_vm.sh build
#   usage: e2e_lab_vm.sh BUILD_DIR [CNITOOL]   (BUILD_DIR holds ibcni and ibcni-ipam; CNITOOL
#                                               defaults to BUILD_DIR/e2e/cnitool)
# ctest's kernel_lab (kernel_lab.sh) runs it last in its boot.
# Prints one PASS/FAIL line per check (tests/support/check.sh), a verdict per scenario, ends with
# "N passed, M failed", exits non-zero on any failure, and puts everything back even then: it
# deletes what is still attached, its namespaces, its work dir and libcni cache files, and renames
# each NIC back (found by PCI address) with its MTU, MAC and state as found.
set -u
usage="usage: $0 BUILD_DIR [CNITOOL]"
BUILD=$(readlink -f "${1:?$usage}")
CNITOOL=$(readlink -f "${2:-$BUILD/e2e/cnitool}")
if [[ ${KERNEL_LAB:-} != 1 ]]; then
  echo "FAIL: this script moves the VM's NICs between namespaces and runs only inside the kernel-lab VM (KERNEL_LAB=1):"
  echo "      ../shared/kernel-lab/run.sh --nics 4 --timeout 900 -- bash $0 $1"
  exit 1
fi
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
source "$here/../support/check.sh"

SEED=${E2E_LAB_SEED:-20251121}
ONLY=${E2E_LAB_ONLY:-}
PFX=klab-e2e                     # network names, netns names and libcni cache files start with it
RESULTS=/var/lib/cni/results     # libcni's cache (cnitool uses the default cache dir)
STARTED=$SECONDS

# ---- the NICs: name -> PCI function (NICS_PCI), and their state as found (NICS_FOUND) -------------
source "$here/lab_nics.sh"
nics_snapshot
for n in eth0 eth1 eth2 eth3; do
  if [[ -z ${NICS_PCI[$n]:-} ]]; then
    check "$n is a virtio-net PCI NIC (/sys/class/net/$n/device); boot the VM with --nics 4" false
    finish_checks
  fi
  echo "$n: PCI ${NICS_PCI[$n]}, ${NICS_FOUND[$n]}"
done
NICS=(eth0 eth1 eth2 eth3)  # the ones this script uses (and puts back)
WORK=$(mktemp -d /tmp/ibcni-e2e-lab.XXXXXX)
CONFDIR=$WORK/net.d              # NETCONFPATH
STATE=$WORK/state                # ibcni's stateDir
IPAMDIR=$WORK/ipam               # ibcni-ipam's dataDir
LOG=$WORK/ibcni.log
mkdir -p "$CONFDIR"
LINKS_BEFORE=$(ip -o link show | awk -F': ' '{print $2}' | sort | xargs)

# ---- cleanup: runs on every exit ---------------------------------------------------------------
# ATTACHED[key] = how to DEL it: "cnitool NET NETNS IFNAME CAP_ARGS" or "direct CID NETNS IFNAME CONF".
declare -A ATTACHED=()
# reset_world: DEL whatever is still attached, delete the pods, put the NICs back as found, drop
# the libcni cache files. After a failed scenario (so the next one starts clean) and on exit.
reset_world() {
  local key how
  for key in "${!ATTACHED[@]}"; do
    read -r -a how <<<"${ATTACHED[$key]}"
    echo "cleanup: DEL $key"
    if [[ ${how[0]} == cnitool ]]; then
      lab_cni del "${how[1]}" "${how[2]}" "${how[3]}" "${how[*]:4}" >/dev/null 2>&1
    else
      direct DEL "${how[1]}" "${how[2]}" "${how[3]}" "$(cat "${how[4]}")" "" >/dev/null 2>&1
    fi
  done
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^$PFX-"); do ip netns del "$ns"; done
  ATTACHED=()
  nics_restore
  rm -f "$RESULTS/$PFX"-*
}
cleanup() {
  reset_world
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

command -v jq >/dev/null || { check "jq is installed" false; finish_checks; }
for f in "$BUILD/ibcni" "$BUILD/ibcni-ipam" "$CNITOOL"; do
  [[ -x $f ]] || { check "$f is built (the driver: e2e/build-driver.sh on the host)" false; finish_checks; }
done
# The driver runs from the VM's tmpfs: exec'd from the shared tree (9p, no page cache) it takes
# 0.4-1 s a call in the emulated VM, from tmpfs 0.07 s. ibcni itself runs from BUILD_DIR (which
# kernel_lab.sh makes a tmpfs copy of the build's ibcni and ibcni-ipam, for the same reason).
DRIVER=$WORK/cnitool
cp "$CNITOOL" "$DRIVER"

# ---- drivers -----------------------------------------------------------------------------------
# lab_cni VERB NET NETNS IFNAME [CAP_ARGS [CNI_ARGS]]: the libcni driver as a runtime would run it;
# sets RC, OUT (stdout) and ERR (stderr).
lab_cni() {
  local env=(PATH=/usr/sbin:/usr/bin:/sbin:/bin "NETCONFPATH=$CONFDIR" "CNI_PATH=$BUILD:/usr/lib/cni"
    "CNI_IFNAME=$4")
  [[ -n ${5:-} ]] && env+=("CAP_ARGS=$5")
  [[ -n ${6:-} ]] && env+=("CNI_ARGS=$6")
  local t0=$EPOCHREALTIME
  OUT=$(env -i "${env[@]}" timeout 120 "$DRIVER" "$1" "$2" "$3" 2>"$WORK/stderr")
  RC=$?
  LAST_MS=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000))
  ERR=
  read -r -d '' ERR <"$WORK/stderr"
  if ((RC != 0)); then
    echo "  cnitool $1 $2 $3 ($4) exit $RC: $ERR" | head -5
    tail -5 "$LOG" 2>/dev/null | sed 's/^/  log: /'
  fi
  return 0
}
# direct VERB CID NETNS IFNAME CONFIG CNI_ARGS: ibcni exec'd with a fresh environment, the config
# on stdin, as Multus (through libcni) runs a delegate; sets RC, OUT and ERR.
direct() {
  local env=(PATH=/usr/sbin:/usr/bin:/sbin:/bin "CNI_COMMAND=$1" "CNI_CONTAINERID=$2" "CNI_NETNS=$3"
    "CNI_IFNAME=$4" "CNI_PATH=$BUILD:/usr/lib/cni")
  [[ -n $6 ]] && env+=("CNI_ARGS=$6")
  OUT=$(printf '%s' "$5" | env -i "${env[@]}" timeout 120 "$BUILD/ibcni" 2>"$WORK/stderr")
  RC=$?
  ERR=
  read -r -d '' ERR <"$WORK/stderr"
  if ((RC != 0)); then
    echo "  ibcni $1 exit $RC: $OUT" | head -5
    tail -5 "$LOG" 2>/dev/null | sed 's/^/  log: /'
  fi
  return 0
}
jqtest() { jq -e "$1" >/dev/null 2>&1 <<<"$OUT"; }
# write_net NET SUBNET: the NAD-style conflist NET in NETCONFPATH.
write_net() {
  jq -n --arg net "$1" --arg subnet "$2" --arg state "$STATE" --arg ipam "$IPAMDIR" --arg log "$LOG" \
    '{cniVersion: "1.0.0", name: $net, plugins: [{
        type: "ibcni", mode: "sriov", mtu: 1400,
        capabilities: {deviceID: true, ips: true, mac: true},
        stateDir: $state, logLevel: "info", logFile: $log,
        ipam: {type: "ibcni-ipam", subnet: $subnet, dataDir: $ipam}}]}' >"$CONFDIR/$1.conflist"
}
# cap PCI [IP [MAC]]: CAP_ARGS for one attachment.
cap() {
  local c="{\"deviceID\":\"$1\""
  [[ -n ${2:-} ]] && c+=",\"ips\":[\"$2\"]"
  [[ -n ${3:-} ]] && c+=",\"mac\":\"$3\""
  echo "$c}"
}
# add NET NETNS IFNAME CAP [CNI_ARGS]: cnitool add, registered for cleanup when it succeeds.
add() {
  lab_cni add "$1" "$2" "$3" "$4" "${5:-}"
  ((RC == 0)) && ATTACHED["$1 $2 $3"]="cnitool $1 $2 $3 $4"
}
# del NET NETNS IFNAME CAP [CNI_ARGS]: cnitool del; unregistered when it succeeds.
del() {
  lab_cni del "$1" "$2" "$3" "$4" "${5:-}"
  ((RC == 0)) && unset 'ATTACHED["$1 $2 $3"]'
}
new_pod() {  # new_pod NAME: a fresh netns $PFX-NAME; prints its path
  ip netns add "$PFX-$1" && echo "/run/netns/$PFX-$1"
}
# pod_has_ipv4 POD IFNAME ADDRESS/PREFIX: the pod's IFNAME carries exactly that IPv4 address.
pod_has_ipv4() {
  local out
  out=$(ip -n "$1" -4 -o addr show dev "$2" 2>/dev/null)
  [[ $out =~ inet\ ([0-9./]+) && ${BASH_REMATCH[1]} == "$3" && $out != *inet*inet* ]]
}
# result_ip: the first address of the last result (OUT), without jq.
result_ip() {
  RESULT_IP=
  [[ $OUT =~ \"address\":\ *\"([0-9a-f.:/]+)\" ]] && RESULT_IP=${BASH_REMATCH[1]}
}
# nic_back NIC: NIC is in the host under its name, with MTU, MAC and state as found ($2: or as given).
nic_back() {
  local want=${2:-${NICS_FOUND[$1]}} i
  for ((i = 0; i < 50; i++)); do
    hostinfo "$1"
    [[ $HOSTINFO == "$want" ]] && return 0
    sleep 0.1
  done
  echo "  $1 (PCI ${NICS_PCI[$1]}: '$(netdev_of_pci "${NICS_PCI[$1]}")' in the host): '$HOSTINFO', want '$want'"
  return 1
}
nic_gone() { ! compgen -G "/sys/bus/pci/devices/${NICS_PCI[$1]}/virtio*/net/*" >/dev/null; }
both_gone() { nic_gone "$1" && nic_gone "$2"; }
both_claimed() { claimed "$1" "$2" && claimed "$1" "$3"; }
no_record() {  # no attachment record of NET in stateDir (lock files aside)
  local left
  left=$(find "$STATE" -type f ! -path '*/locks/*' ! -name '*lock*' ! -name '*.lck' 2>/dev/null | grep -F "/$1/")
  [[ -z $left ]] || { echo "  left in stateDir: $left"; return 1; }
}
no_allocation() {  # ibcni-ipam's store of NET holds no attachment and no claim
  local left
  left=$(find "$IPAMDIR/$1/attachments" "$IPAMDIR/$1/ips" -mindepth 1 2>/dev/null)
  [[ -z $left ]] || { echo "  left in the IPAM dataDir: $left"; return 1; }
}
claimed() { [[ -L $IPAMDIR/$1/ips/${2%/*} ]]; }  # claimed NET ADDRESS[/PREFIX]
unclaimed() { [[ -n $2 && ! -L $IPAMDIR/$1/ips/${2%/*} ]]; }
no_cache() {  # no libcni cache file of NET
  local left
  left=$(ls "$RESULTS/$1"-* 2>/dev/null)
  [[ -z $left ]] || { echo "  libcni cache left: $left"; return 1; }
}
no_addresses() {  # no IPv4 address on any of the NICs in the host
  local n
  for n in "${NICS[@]}"; do [[ -z $(ip -4 -o addr show dev "$n" 2>/dev/null) ]] || { echo "  $n has $(ip -4 -o addr show dev "$n")"; return 1; }; done
}
same_links() { [[ $(ip -o link show | awk -F': ' '{print $2}' | sort | xargs) == "$LINKS_BEFORE" ]]; }
no_netns() { ! ip netns list | grep -q "^$PFX-"; }
# all_clean TAG NET: nothing of NET is left anywhere.
all_clean() {
  check "[$1] no attachment record left in stateDir" no_record "$2"
  check "[$1] no allocation left in the IPAM dataDir" no_allocation "$2"
  check "[$1] no libcni cache file left" no_cache "$2"
  check "[$1] no pod netns left" no_netns
  check "[$1] the host's links are those found at the start" same_links
  check "[$1] no address left on the NICs" no_addresses
}

# Per-scenario verdicts.
VERDICTS=()
scenario_begin() { S_NAME=$1 S_FAILED=$failed S_PASSED=$passed S_START=$SECONDS; echo "=== $1"; }
scenario_end() {
  local v=PASS
  if ((failed > S_FAILED)); then
    v=FAIL
    reset_world
  fi
  VERDICTS+=("$v $S_NAME ($((passed - S_PASSED + failed - S_FAILED)) checks, $((SECONDS - S_START)) s)")
  echo "=== $v $S_NAME in $((SECONDS - S_START)) s"
}
wanted() { [[ -z $ONLY || " $ONLY " == *" $1 "* ]]; }

# ---- pods_ping ---------------------------------------------------------------------------------
pods_ping() {
  local net=$PFX-ping tag=pods_ping a b pa pb capa capb resb ipb
  write_net "$net" 10.79.1.0/24
  ip link set eth3 up  # DEL must bring back both states: eth2 down, eth3 up
  local before2 before3
  hostinfo eth2 && before2=$HOSTINFO
  hostinfo eth3 && before3=$HOSTINFO
  a=$(new_pod ping-a) && b=$(new_pod ping-b)
  capa=$(cap "${NICS_PCI[eth2]}" 10.79.1.10/24 02:79:01:00:00:0a)
  capb=$(cap "${NICS_PCI[eth3]}")
  # CNI_ARGS as a runtime (through Multus) passes them on every call.
  local argsa="IgnoreUnknown=1;K8S_POD_NAMESPACE=klab;K8S_POD_NAME=ping-a"
  local argsb="IgnoreUnknown=1;K8S_POD_NAMESPACE=klab;K8S_POD_NAME=ping-b"
  add "$net" "$a" net1 "$capa" "$argsa"
  check "[$tag] ADD pod a (eth2 ${NICS_PCI[eth2]}, ips 10.79.1.10/24, mac) exits 0" test "$RC" -eq 0
  check "[$tag] ... result: net1 in pod a, 10.79.1.10/24, the mac" \
    jqtest ".interfaces[0].name == \"net1\" and .interfaces[0].sandbox == \"$a\" and .interfaces[0].mac == \"02:79:01:00:00:0a\" and .ips[0].address == \"10.79.1.10/24\""
  add "$net" "$b" net1 "$capb" "$argsb"
  check "[$tag] ADD pod b (eth3 ${NICS_PCI[eth3]}) exits 0" test "$RC" -eq 0
  resb=$OUT
  ipb=$(jq -r '.ips[0].address // ""' <<<"$resb")
  check "[$tag] ... result: net1 in pod b with an ibcni-ipam address of 10.79.1.0/24 ($ipb)" \
    jqtest ".interfaces[0].sandbox == \"$b\" and (.ips[0].address | startswith(\"10.79.1.\")) and .ips[0].address != \"10.79.1.10/24\""
  check "[$tag] eth2 and eth3 left the host" both_gone eth2 eth3
  pa=$(podinfo "$PFX-ping-a" net1)
  pb=$(podinfo "$PFX-ping-b" net1)
  echo "  pod a: $pa $(pod_ipv4 "$PFX-ping-a" net1); pod b: $pb $(pod_ipv4 "$PFX-ping-b" net1)"
  check "[$tag] pod a: net1 up, mtu 1400, mac 02:79:01:00:00:0a, 10.79.1.10/24" \
    test "${pa% alias=*} $(pod_ipv4 "$PFX-ping-a" net1)" = "net1 mtu=1400 up=true mac=02:79:01:00:00:0a 10.79.1.10/24"
  check "[$tag] pod b: net1 up, mtu 1400, $ipb" test "$(cut -d' ' -f1-3 <<<"$pb") $(pod_ipv4 "$PFX-ping-b" net1)" = "net1 mtu=1400 up=true $ipb"
  check "[$tag] the IPAM store holds both claims" both_claimed "$net" 10.79.1.10 "$ipb"
  check "[$tag] pod a pings pod b (${ipb%/*}) over the segment" \
    ip netns exec "$PFX-ping-a" ping -c 3 -i 0.3 -W 5 -q "${ipb%/*}"
  check "[$tag] pod b pings pod a (10.79.1.10)" ip netns exec "$PFX-ping-b" ping -c 3 -i 0.3 -W 5 -q 10.79.1.10
  lab_cni check "$net" "$a" net1 "$capa" "$argsa"
  check "[$tag] CHECK pod a exits 0" test "$RC" -eq 0
  lab_cni check "$net" "$b" net1 "$capb" "$argsb"
  check "[$tag] CHECK pod b exits 0" test "$RC" -eq 0
  del "$net" "$a" net1 "$capa" "$argsa"
  check "[$tag] DEL pod a exits 0" test "$RC" -eq 0
  del "$net" "$b" net1 "$capb" "$argsb"
  check "[$tag] DEL pod b exits 0" test "$RC" -eq 0
  check "[$tag] eth2 is back as it was ($before2)" nic_back eth2 "$before2"
  check "[$tag] eth3 is back as it was ($before3)" nic_back eth3 "$before3"
  check "[$tag] the pods hold only lo" test "$(pod_links "$PFX-ping-a") $(pod_links "$PFX-ping-b")" = "lo lo"
  ip netns del "$PFX-ping-a"
  ip netns del "$PFX-ping-b"
  ip link set eth3 down
  all_clean "$tag" "$net"
}

# ---- netns_gone_del ----------------------------------------------------------------------------
netns_gone_del() {
  local net=$PFX-gone tag=netns_gone_del p c ip back=
  write_net "$net" 10.79.2.0/24
  p=$(new_pod gone)
  c=$(cap "${NICS_PCI[eth1]}")
  add "$net" "$p" net1 "$c"
  check "[$tag] ADD (eth1 ${NICS_PCI[eth1]}) exits 0" test "$RC" -eq 0
  ip=$(jq -r '.ips[0].address // ""' <<<"$OUT")
  check "[$tag] ... with an address ($ip), claimed in the IPAM store" claimed "$net" "$ip"
  ip netns del "$PFX-gone"
  # The kernel hands the physical device of a dying netns back to the initial one (as net1, or
  # dev<ifindex> when taken), asynchronously.
  for _ in $(seq 100); do
    back=$(netdev_of_pci "${NICS_PCI[eth1]}")
    [[ -n $back ]] && break
    sleep 0.2
  done
  check "[$tag] the netns is gone and the kernel returned the NIC to the host (as '${back:-nothing}')" test -n "$back"
  del "$net" "$p" net1 "$c"
  check "[$tag] DEL with the netns gone exits 0" test "$RC" -eq 0
  check "[$tag] the address $ip is released" unclaimed "$net" "$ip"
  check "[$tag] eth1 is back under its name as it was (${NICS_FOUND[eth1]})" nic_back eth1
  lab_cni del "$net" "$p" net1 "$c"
  check "[$tag] DEL again exits 0" test "$RC" -eq 0
  all_clean "$tag" "$net"
}

# ---- churn_50 ----------------------------------------------------------------------------------
churn_50() {
  local net=$PFX-churn tag=churn_50 cycles=50
  write_net "$net" 10.79.3.0/24
  RANDOM=$SEED
  echo "  seed $SEED (E2E_LAB_SEED)"
  local -A alive_nic=() alive_ip=()
  local free=("${NICS[@]}") adds=0 dels=0 add_fail=0 del_fail=0 back_fail=0 ip_fail=0 max_alive=0 ops="" add_ms=0 del_ms=0
  local pod path n i c ip k
  while ((adds < cycles || ${#alive_nic[@]} > 0)); do
    if ((adds < cycles && ${#free[@]} > 0)) && { ((${#alive_nic[@]} == 0)) || ((RANDOM % 5 < 3)); }; then
      i=$((RANDOM % ${#free[@]}))
      n=${free[$i]}
      free=("${free[@]:0:i}" "${free[@]:i+1}")
      pod=c$adds
      adds=$((adds + 1))
      ip netns add "$PFX-$pod"
      path=/run/netns/$PFX-$pod
      add "$net" "$path" net1 "$(cap "${NICS_PCI[$n]}")"
      add_ms=$((add_ms + LAST_MS))
      if ((RC != 0)); then
        add_fail=$((add_fail + 1))
        ip netns del "$PFX-$pod"
        free+=("$n")
        continue
      fi
      result_ip
      ip=$RESULT_IP
      # Distinct from every live pod's address, and on net1 in the pod.
      for k in "${!alive_ip[@]}"; do [[ ${alive_ip[$k]} == "$ip" ]] && ip_fail=$((ip_fail + 1)); done
      [[ $ip == 10.79.3.* ]] && pod_has_ipv4 "$PFX-$pod" net1 "$ip" || { echo "  $pod: '$ip' is not on net1"; ip_fail=$((ip_fail + 1)); }
      alive_nic[$pod]=$n
      alive_ip[$pod]=$ip
      ((${#alive_nic[@]} > max_alive)) && max_alive=${#alive_nic[@]}
      ops+=" +$pod:$n"
    else
      local pods=("${!alive_nic[@]}")
      pod=${pods[$((RANDOM % ${#pods[@]}))]}
      n=${alive_nic[$pod]}
      del "$net" "/run/netns/$PFX-$pod" net1 "$(cap "${NICS_PCI[$n]}")"
      dels=$((dels + 1))
      del_ms=$((del_ms + LAST_MS))
      ((RC != 0)) && del_fail=$((del_fail + 1))
      nic_back "$n" || back_fail=$((back_fail + 1))
      ip netns del "$PFX-$pod"
      unset 'alive_nic[$pod]' 'alive_ip[$pod]'
      free+=("$n")
      ops+=" -$pod"
    fi
  done
  echo "  order:$ops"
  echo "  $adds ADDs (cnitool add: $((add_ms / (adds > 0 ? adds : 1))) ms on average), $dels DELs ($((del_ms / (dels > 0 ? dels : 1))) ms), at most $max_alive pods alive at once"
  check "[$tag] all $cycles ADDs exit 0 ($add_fail failed)" test "$add_fail" -eq 0
  check "[$tag] every DEL exits 0 ($del_fail of $dels failed)" test "$del_fail" -eq 0 -a "$dels" -eq "$cycles"
  check "[$tag] every DEL gave its NIC back under its name, as found ($back_fail did not)" test "$back_fail" -eq 0
  check "[$tag] every pod got a 10.79.3.x address on net1, distinct from the live pods' ($ip_fail did not)" test "$ip_fail" -eq 0
  check "[$tag] several pods were alive at once (at most $max_alive)" test "$max_alive" -ge 3
  for n in "${NICS[@]}"; do check "[$tag] $n is back as found (${NICS_FOUND[$n]})" nic_back "$n"; done
  all_clean "$tag" "$net"
}

# ---- same_network_twice ------------------------------------------------------------------------
same_network_twice() {
  local net=$PFX-twice tag=same_network_twice p c1 c2 ip1 ip2
  write_net "$net" 10.79.4.0/24
  p=$(new_pod twice)
  c1=$(cap "${NICS_PCI[eth1]}")
  c2=$(cap "${NICS_PCI[eth2]}")
  add "$net" "$p" net1 "$c1"
  check "[$tag] ADD net1 (eth1) exits 0" test "$RC" -eq 0
  ip1=$(jq -r '.ips[0].address // ""' <<<"$OUT")
  add "$net" "$p" net2 "$c2"
  check "[$tag] ADD net2 (eth2), same network, same pod, exits 0" test "$RC" -eq 0
  ip2=$(jq -r '.ips[0].address // ""' <<<"$OUT")
  check "[$tag] two distinct addresses ($ip1, $ip2)" test -n "$ip1" -a -n "$ip2" -a "$ip1" != "$ip2"
  check "[$tag] the pod holds lo, net1, net2" test "$(pod_links "$PFX-twice")" = lo,net1,net2
  lab_cni check "$net" "$p" net1 "$c1"
  check "[$tag] CHECK net1 exits 0" test "$RC" -eq 0
  lab_cni check "$net" "$p" net2 "$c2"
  check "[$tag] CHECK net2 exits 0" test "$RC" -eq 0
  del "$net" "$p" net1 "$c1"
  check "[$tag] DEL net1 exits 0" test "$RC" -eq 0
  check "[$tag] eth1 is back as found" nic_back eth1
  check "[$tag] net2 is intact: up, mtu 1400, $ip2" \
    test "$(podinfo "$PFX-twice" net2 | cut -d' ' -f1-3) $(pod_ipv4 "$PFX-twice" net2)" = "net2 mtu=1400 up=true $ip2"
  check "[$tag] ... the pod holds lo, net2" test "$(pod_links "$PFX-twice")" = lo,net2
  check "[$tag] ... net2's claim kept" claimed "$net" "$ip2"
  check "[$tag] ... net1's claim released" unclaimed "$net" "$ip1"
  lab_cni check "$net" "$p" net2 "$c2"
  check "[$tag] ... and CHECK net2 exits 0" test "$RC" -eq 0
  del "$net" "$p" net2 "$c2"
  check "[$tag] DEL net2 exits 0" test "$RC" -eq 0
  check "[$tag] eth2 is back as found" nic_back eth2
  check "[$tag] the pod holds only lo" test "$(pod_links "$PFX-twice")" = lo
  check "[$tag] no record of the pod is left in stateDir" no_record "$net"
  check "[$tag] no allocation of the pod is left in the IPAM store" no_allocation "$net"

  # net1, net2, net3 at once.
  local ips=() i capn
  for i in 1 2 3; do
    capn=$(cap "${NICS_PCI[eth$i]}")
    add "$net" "$p" "net$i" "$capn"
    check "[$tag] ADD net$i (eth$i) exits 0" test "$RC" -eq 0
    ips+=("$(jq -r '.ips[0].address // ""' <<<"$OUT")")
  done
  check "[$tag] the pod holds lo, net1, net2, net3" test "$(pod_links "$PFX-twice")" = lo,net1,net2,net3
  check "[$tag] three distinct addresses (${ips[*]})" test "$(printf '%s\n' "${ips[@]}" | grep -c .)" -eq 3 -a "$(printf '%s\n' "${ips[@]}" | sort -u | wc -l)" -eq 3
  for i in 1 2 3; do
    check "[$tag] net$i: up, mtu 1400, ${ips[i-1]}" \
      test "$(podinfo "$PFX-twice" "net$i" | cut -d' ' -f1-3) $(pod_ipv4 "$PFX-twice" "net$i")" = "net$i mtu=1400 up=true ${ips[i-1]}"
    lab_cni check "$net" "$p" "net$i" "$(cap "${NICS_PCI[eth$i]}")"
    check "[$tag] CHECK net$i exits 0" test "$RC" -eq 0
  done
  for i in 2 3 1; do
    del "$net" "$p" "net$i" "$(cap "${NICS_PCI[eth$i]}")"
    check "[$tag] DEL net$i exits 0" test "$RC" -eq 0
    check "[$tag] eth$i is back as found" nic_back "eth$i"
  done
  check "[$tag] the pod holds only lo" test "$(pod_links "$PFX-twice")" = lo
  ip netns del "$PFX-twice"
  all_clean "$tag" "$net"
}

# ---- multus_shape ------------------------------------------------------------------------------
# What Multus (multus-cni HEAD, thin or thick) hands a delegate for a NAD annotated with
# k8s.v1.cni.cncf.io/resourceName and a pod asking for ips and mac: the NAD's plugin config with
# top-level deviceID and pciBusID injected (the device plugin's allocation), libcni's runtimeConfig
# with the declared capabilities it was given, CNI_ARGS IgnoreUnknown + K8S_POD_* and, for the
# annotation's ips/mac, the legacy IP=/MAC= as well. DEL gets the cached result as prevResult.
multus_round() {
  local tag=$1 ignore=$2 legacy=$3 net=$PFX-multus nic=eth3 cid uid ns path conf args ip=10.79.5.7/24 mac=02:79:05:00:00:07
  local before result
  cid=$(head -c 32 /dev/urandom | sha256sum | cut -c1-64)
  uid=$(cat /proc/sys/kernel/random/uuid)
  ns=$PFX-cni-$(cut -c1-8 <<<"$uid")
  ip netns add "$ns"
  path=/var/run/netns/$ns
  conf=$WORK/multus-$ignore.json
  jq -n --arg net "$net" --arg pci "${NICS_PCI[$nic]}" --arg state "$STATE" --arg ipam "$IPAMDIR" --arg log "$LOG" \
    --arg ip "$ip" --arg mac "$mac" \
    '{cniVersion: "1.0.0", name: $net, type: "ibcni", mode: "sriov", mtu: 1400,
      capabilities: {deviceID: true, ips: true, mac: true},
      stateDir: $state, logLevel: "info", logFile: $log,
      ipam: {type: "ibcni-ipam", subnet: "10.79.5.0/24", dataDir: $ipam},
      deviceID: $pci, pciBusID: $pci,
      runtimeConfig: {ips: [$ip], mac: $mac}}' >"$conf"
  args="IgnoreUnknown=$ignore;K8S_POD_NAMESPACE=klab;K8S_POD_NAME=pod-$ignore;K8S_POD_INFRA_CONTAINER_ID=$cid;K8S_POD_UID=$uid"
  ((legacy)) && args+=";IP=${ip%/*};MAC=$mac"
  echo "  CNI_ARGS=$args"
  hostinfo "$nic" && before=$HOSTINFO
  direct ADD "$cid" "$path" net1 "$(cat "$conf")" "$args"
  check "[$tag] ADD exits 0" test "$RC" -eq 0
  result=$OUT
  ((RC == 0)) && ATTACHED["multus $cid net1"]="direct $cid $path net1 $conf"
  check "[$tag] ... result: net1 in $path, mac $mac, $ip" \
    jqtest ".cniVersion == \"1.0.0\" and .interfaces[0].name == \"net1\" and .interfaces[0].sandbox == \"$path\" and .interfaces[0].mac == \"$mac\" and .ips[0].address == \"$ip\""
  check "[$tag] $nic left the host; net1 in the pod: up, mtu 1400, mac $mac, $ip" \
    test "$(nic_gone "$nic" && echo gone) $(podinfo "$ns" net1 | cut -d' ' -f1-4) $(pod_ipv4 "$ns" net1)" = "gone net1 mtu=1400 up=true mac=$mac $ip"
  check "[$tag] ... $ip claimed in the IPAM store" claimed "$net" "$ip"
  local withprev
  withprev=$(jq -c --argjson prev "$result" '. + {prevResult: $prev}' "$conf")
  direct CHECK "$cid" "$path" net1 "$withprev" "$args"
  check "[$tag] CHECK (prevResult = ADD's result) exits 0" test "$RC" -eq 0 -a -z "$OUT"
  direct DEL "$cid" "$path" net1 "$withprev" "$args"
  check "[$tag] DEL exits 0" test "$RC" -eq 0 -a -z "$OUT"
  ((RC == 0)) && unset 'ATTACHED["multus $cid net1"]'
  check "[$tag] $nic is back as it was ($before)" nic_back "$nic" "$before"
  check "[$tag] the pod holds only lo" test "$(pod_links "$ns")" = lo
  ip netns del "$ns"
  all_clean "$tag" "$net"
}
multus_shape() {
  multus_round "multus_shape IgnoreUnknown=true + IP/MAC (Multus HEAD)" true 1
  multus_round "multus_shape IgnoreUnknown=1" 1 0
}

echo "ibcni: $BUILD/ibcni; driver: $CNITOOL; work dir: $WORK"
SCENARIOS=(pods_ping netns_gone_del churn_50 same_network_twice multus_shape)
for s in $ONLY; do
  check "E2E_LAB_ONLY's $s is a scenario (${SCENARIOS[*]})" test -n "$(printf '%s\n' "${SCENARIOS[@]}" | grep -x -- "$s")"
done
for s in "${SCENARIOS[@]}"; do
  wanted "$s" || continue
  scenario_begin "$s"
  "$s"
  scenario_end
done
echo "scenarios:"
printf '  %s\n' "${VERDICTS[@]}"
echo "e2e_lab_vm.sh ran for $((SECONDS - STARTED)) s"
finish_checks
