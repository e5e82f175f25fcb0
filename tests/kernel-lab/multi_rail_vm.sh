#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# policyRouting on real NICs: two pods with two rails each, all four in one subnet (10.77.0.0/24),
# eth0..eth3 on the lab's one Ethernet segment. Pod railA gets eth0 and eth1 as net1 and net2 by
# deviceID, pod railB eth2 and eth3, through ibcni with the embedded IPAM; both pods have strict
# reverse-path filtering (net.ipv4.conf.all.rp_filter = 1, RHEL's default) and no IPv6 (whose
# autoconfiguration would send on every rail of its own accord). Checked:
#   - without the key, the lab shows the wrong-interface behaviour: a packet from railA's net2
#     address leaves on net1 (`ip route get`, and the tx counters of a ping), and RDMA CM maps
#     railB/net2's address to railB/net1's MAC (its ARP answered by the wrong rail);
#   - with `"policyRouting": true`, a ping between every pair of rails succeeds and each leaves and
#     is answered on the rails it names: the tx counters of the two other NICs stay put, and the
#     peer's neighbour entry holds the MAC of the rail that sent (no ARP flux);
#   - rxe on each NIC (made in the pod, after the move) and RDMA CM from each rail's address to
#     each of the peer's rails (rdma_cm_resolve): the CM ID binds that rail's rxe device and the
#     peer is resolved by that rail's NIC alone (below: why no RDMA packet flows from a pod's
#     netns on this kernel, and so why no ib_send_lat -R or ibv_rc_pingpong runs here);
#   - DEL of every attachment leaves no rule in the pods.
#
# Inside the VM only (KERNEL_LAB=1); kernel_lab.sh runs it as part `multi_rail`:
#   tests/kernel-lab/kernel_lab.sh --boot ../shared/kernel-lab/run.sh build multi_rail
# or alone:
#   ../shared/kernel-lab/run.sh --nics 4 -- bash tests/kernel-lab/multi_rail_vm.sh build/ibcni \
#     build/tests/kernel-lab/rdma_cm_resolve
# Every NIC is left as found and the rxe devices deleted, also on a failure.
set -u
IBCNI=$(readlink -f "${1:?usage: $0 <ibcni> <rdma_cm_resolve>}")
RESOLVE=$(readlink -f "${2:?usage: $0 <ibcni> <rdma_cm_resolve>}")
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
if [[ ${KERNEL_LAB:-} != 1 ]]; then
  echo "FAIL: this script moves eth0..eth3 into pods and runs only inside the kernel-lab VM (KERNEL_LAB=1)"
  exit 1
fi
source "$here/../support/check.sh"
source "$here/lab_nics.sh"
nics_snapshot

WORK=$(mktemp -d /tmp/ibcni-rails.XXXXXX)
PODS=(railA railB)
declare -A NIC_OF=([railA/net1]=eth0 [railA/net2]=eth1 [railB/net1]=eth2 [railB/net2]=eth3)
declare -A IP=()

cleanup() {
  local d
  for d in $(rdma -j link show 2>/dev/null | grep -o '"ifname":"rxe[AB][12]' | cut -d'"' -f4 | sort -u); do
    rdma link delete "$d" 2>/dev/null
  done
  for p in "${PODS[@]}"; do ip netns del "$p" 2>/dev/null; done
  nics_restore
  rm -rf "$WORK"
}
trap cleanup EXIT

# conf PCI POLICY: the rails' network (one for all four, as one NAD per rail over one pool would
# be), with policyRouting when POLICY is 1.
conf() {
  local c
  local head='"cniVersion":"1.1.0","name":"rails","type":"ibcni","mode":"sriov","deviceID":"%s","stateDir":"%s"'
  local ipam='"ipam":{"type":"ibcni-ipam","dataDir":"%s","ranges":[[{"subnet":"10.77.0.0/24"}]]}'
  c=$(printf "{$head,$ipam}" "$1" "$WORK/state" "$WORK/ipam")
  [[ $2 == 1 ]] && c=$(json_with "$c" '"policyRouting":true')
  printf '%s' "$c"
}
# cni VERB POD IFNAME CONF: ibcni as a runtime runs it (the pod's name is its container ID); sets
# RC and OUT.
cni() {
  OUT=$(printf '%s' "$4" | env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "CNI_COMMAND=$1" "CNI_CONTAINERID=$2" \
    "CNI_NETNS=/var/run/netns/$2" "CNI_IFNAME=$3" CNI_PATH=/usr/lib/cni "$IBCNI" 2>"$WORK/stderr")
  RC=$?
  ((RC == 0)) || { echo "  ibcni $1 $2/$3 exit $RC: $OUT"; tail -3 "$WORK/stderr" | sed 's/^/  stderr: /'; }
}
in_pod() { ip netns exec "$@"; }
tx() { in_pod "$1" cat "/sys/class/net/$2/statistics/tx_packets"; }
# tx_all: "A1 A2 B1 B2", the four rails' tx_packets.
tx_all() { echo "$(tx railA net1) $(tx railA net2) $(tx railB net1) $(tx railB net2)"; }
mac_of() { in_pod "$1" cat "/sys/class/net/$2/address"; }

# attach_all POLICY: both pods made afresh with strict rp_filter and no IPv6, the four NICs added.
attach_all() {
  local p ifn
  for p in "${PODS[@]}"; do
    ip netns add "$p"
    in_pod "$p" sysctl -qw net.ipv4.conf.all.rp_filter=1 net.ipv6.conf.all.disable_ipv6=1 \
      net.ipv6.conf.default.disable_ipv6=1
    ip -n "$p" link set lo up
    for ifn in net1 net2; do
      cni ADD "$p" "$ifn" "$(conf "${NICS_PCI[${NIC_OF[$p/$ifn]}]}" "$1")"
      check "policyRouting=$1: ADD $p/$ifn (${NIC_OF[$p/$ifn]}) exits 0" test "$RC" -eq 0 || return 1
      IP[$p/$ifn]=$(grep -o '"address":"[0-9.]*' <<<"$OUT" | head -1 | cut -d'"' -f4)
      # Neighbour entries kept as they are for the test's length: a rail confirming an earlier
      # exchange's entry (a unicast probe 5 s after its use) would send during a later ping of
      # other rails. Per interface: a namespace's neigh "default" is no template for its devices.
      in_pod "$p" sysctl -qw "net.ipv4.neigh.$ifn.delay_first_probe_time=600" \
        "net.ipv4.neigh.$ifn.base_reachable_time_ms=600000"
    done
  done
}
detach_all() {
  local p ifn
  for p in "${PODS[@]}"; do
    for ifn in net1 net2; do
      cni DEL "$p" "$ifn" "$(conf "${NICS_PCI[${NIC_OF[$p/$ifn]}]}" "$1")"
      check "policyRouting=$1: DEL $p/$ifn exits 0" test "$RC" -eq 0
    done
    check "policyRouting=$1: no rule of ibcni is left in $p" bash -c "! ip -n $p rule show | grep -q 'lookup 10[12]'"
    ip netns del "$p"
  done
}
# ping_rail SRC_POD SRC_IF DST_POD DST_IF: a ping from SRC's address to DST's succeeds, and of the
# four NICs only SRC's and DST's send.
ping_rail() {
  local before after i ok=0 names=(railA/net1 railA/net2 railB/net1 railB/net2)
  before=($(tx_all))
  in_pod "$1" ping -q -c 2 -i 0.3 -W 3 -I "${IP[$1/$2]}" "${IP[$3/$4]}" >/dev/null || ok=1
  after=($(tx_all))
  for i in 0 1 2 3; do
    if [[ ${names[$i]} == "$1/$2" || ${names[$i]} == "$3/$4" ]]; then
      ((after[i] >= before[i] + 2)) || { echo "  ${names[$i]} sent $((after[i] - before[i])), not the 2 echoes"; ok=1; }
    elif ((after[i] != before[i])); then
      echo "  ${names[$i]} sent $((after[i] - before[i])) packets of a ping between $1/$2 and $3/$4"
      ok=1
    fi
  done
  return $ok
}

# rxe_all add|delete: an rxe device on each of the four rails (made in its pod: rxe goes with a
# netdev that moves), or none.
rxe_all() {
  local p ifn dev
  modprobe rdma_rxe 2>/dev/null
  for p in railA railB; do
    for ifn in net1 net2; do
      dev=rxe${p#rail}${ifn#net}
      if [[ $1 == add ]]; then
        in_pod "$p" rdma link add "$dev" type rxe netdev "$ifn"
        check "$dev on $p/$ifn" rdma_port_is "$dev" ACTIVE
      else
        rdma link delete "$dev"
      fi
    done
  done
}
# cm_resolve S D: RDMA CM from railA/netS's address to railB/netD's, railA's neighbour entries of
# netS flushed first; sets CM (rdma_cm_resolve's answer) and SENT ("A1 A2 B1 B2": what each rail
# sent meanwhile: railA's ARP request, the ARP replies of railB).
cm_resolve() {
  local before after i
  ip -n railA neigh flush dev "net$1"
  before=($(tx_all))
  CM=$(in_pod railA "$RESOLVE" "${IP[railA/net$1]}" "${IP[railB/net$2]}")
  after=($(tx_all))
  SENT=
  for i in 0 1 2 3; do SENT+="$((after[i] - before[i])) "; done
  SENT=${SENT% }
}

check "eth0..eth3 are PCI NICs" test -n "${NICS_PCI[eth0]:-}" -a -n "${NICS_PCI[eth3]:-}" || finish_checks

# ---- without the key: the wrong interface ----------------------------------------------------------
attach_all 0 || finish_checks
route=$(ip -n railA route get "${IP[railB/net1]}" from "${IP[railA/net2]}")
check "without policyRouting a packet from net2's address leaves on net1 ($route)" grep -q "dev net1 " <<<"$route"
before=($(tx_all))
in_pod railA ping -q -c 2 -i 0.3 -W 2 -I "${IP[railA/net2]}" "${IP[railB/net1]}" >/dev/null
after=($(tx_all))
check "without policyRouting net2's echo requests went out of net1 \
(net1 +$((after[0] - before[0])), net2 +$((after[1] - before[1])))" \
  test $((after[0] - before[0])) -ge 2 -a "${after[1]}" = "${before[1]}"
# RDMA CM from net2 to railB's net2: railB/net1 answers the ARP for net2's address (arp_ignore 0),
# and railB/net2, whose reverse path to the asker is net1, does not (strict rp_filter): railA maps
# railB/net2's address to railB/net1's MAC, and so to the wrong RDMA device.
rxe_all add
cm_resolve 2 2
neigh=$(ip -n railA neigh show "${IP[railB/net2]}" dev net2)
check "without policyRouting railB/net1 answers RDMA CM's ARP for railB/net2 (sent A1 A2 B1 B2: $SENT)" \
  test "$(cut -d' ' -f3 <<<"$SENT")" -ge 1
check "without policyRouting railA maps railB/net2's address to railB/net1's MAC ($neigh)" \
  grep -q "lladdr $(mac_of railB net1)" <<<"$neigh"
rxe_all delete
detach_all 0

# ---- with the key: every rail answers on itself ----------------------------------------------------
attach_all 1 || finish_checks
for p in railA railB; do
  for ifn in net1 net2; do
    table=$((100 + ${ifn#net}))
    route=$(ip -n "$p" route get 10.77.0.254 from "${IP[$p/$ifn]}")
    check "$p: from ${IP[$p/$ifn]} goes out of $ifn by table $table" grep -q "dev $ifn table $table" <<<"$route"
    conf=/proc/sys/net/ipv4/conf/$ifn
    values=$(in_pod "$p" cat "$conf/arp_ignore" "$conf/arp_announce" "$conf/rp_filter" "$conf/accept_local" | xargs)
    check "$p/$ifn: arp_ignore 2, arp_announce 2, rp_filter 2, accept_local 1 ($values)" test "$values" = "2 2 2 1"
  done
done
for s in net1 net2; do
  for d in net1 net2; do
    check "railA/$s -> railB/$d: the ping succeeds on those two rails alone" ping_rail railA "$s" railB "$d"
    check "railB/$d -> railA/$s: the ping succeeds on those two rails alone" ping_rail railB "$d" railA "$s"
  done
done
neigh=$(ip -n railB neigh show "${IP[railA/net2]}" dev net1)
check "railB holds railA/net2's own MAC for its address ($neigh)" grep -q "lladdr $(mac_of railA net2)" <<<"$neigh"

# ---- RDMA CM per rail ----------------------------------------------------------------------------
# rxe of Debian 12's kernel (6.1) sends from the initial namespace only (its UDP sockets and route
# lookups are init_net's), so no RDMA packet leaves a pod's netns in the lab and a connection from
# there never completes (perftest's ib_send_lat -R: "Unexpected CM event 7", unreachable); hence no
# ib_send_lat -R or ibv_rc_pingpong here. What policyRouting decides for RDMA comes before the
# data: RDMA CM resolves the peer by the pod's routing and ARP, which pick the RDMA device and the
# peer's MAC (librdmacm.md: without arp_ignore 2 "the RDMA stack [may] incorrectly map the remote IP
# address to the wrong RDMA device"). Checked from each of railA's rails to each of railB's with
# rdma_cm_resolve (rdma_resolve_addr and rdma_resolve_route): the CM ID is bound to the source
# rail's rxe device, the ARP leaves by that rail alone, only the named rail of railB answers it,
# and railA holds that rail's own MAC.
rxe_all add
for s in 1 2; do
  for d in 1 2; do
    cm_resolve "$s" "$d"
    expect="0 0 0 0"
    expect=$(awk -v s="$s" -v d="$d" '{ $s = "+"; $(2 + d) = "+"; print }' <<<"$expect")
    got=$(awk '{ for (i = 1; i <= NF; i++) $i = ($i > 0 ? "+" : "0"); print }' <<<"$SENT")
    check "RDMA CM railA/net$s -> railB/net$d: bound to rxeA$s ($CM), sent by those two rails alone \
(A1 A2 B1 B2: $SENT)" \
      test "$CM" = "device rxeA$s" -a "$got" = "$expect"
    neigh=$(ip -n railA neigh show "${IP[railB/net$d]}" dev "net$s")
    check "railA/net$s maps railB/net$d's address to its own MAC ($neigh)" \
      grep -q "lladdr $(mac_of railB "net$d")" <<<"$neigh"
  done
done
rxe_all delete
detach_all 1
finish_checks
