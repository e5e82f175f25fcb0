# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# The kernel-lab VM's PCI NICs (virtio-net, eth0..eth<N-1> from run.sh --nics N) as found, and
# putting them back: the lab scripts move them between namespaces, rename them and change their
# MTU, MAC and state; each leaves them as it found them, so the parts of one boot (kernel_lab.sh)
# do not depend on each other. Source it (bash); no process is started for a read (sysfs), as a
# process costs 50-300 ms in the emulated VM.
#   nics_snapshot        records each eth* of the initial netns that sits on a PCI function: its
#                        PCI address (NICS_PCI[name]) and "name mtu=N up=B mac=M alias=A"
#                        (NICS_FOUND[name]); NICS lists the names
#   hostinfo NAME        sets HOSTINFO to that line for NAME now; status 1 when there is no NAME
#   netdev_of_pci PCI    the netdev of that PCI function in the initial netns (empty while in a pod)
#   nics_diff            prints each NIC that is not as found; status 1 when one is not
#   nics_restore         puts each NIC back: renamed by PCI address (a NIC handed back by a dying
#                        netns comes back as net1 or dev<ifindex>; waits up to 10 s for it),
#                        addresses flushed, MTU, MAC and up/down state as found
# And what the lab scripts read of a pod and of ibcni's output, each with one `ip -o` or none
# (jq costs 0.5 s a run in the emulated VM):
#   pod_links NETNS      its link names, sorted, comma-separated
#   pod_ipv4 NETNS IF    IF's IPv4 addresses (A/P), comma-separated
#   podinfo NETNS IF     "IF mtu=N up=B mac=M alias=A", as hostinfo gives for the initial netns
#   rdma_mode            the node's RDMA netns mode (shared, exclusive)
#   set_rdma_mode M      sets it, retrying for up to 10 s while other namespaces still die
#   linkinfo IF [NETNS]  that line for IF in NETNS (podinfo), or in the initial netns (hostinfo)
#   rdma_port_is DEV S   waits up to 10 s for DEV's port 1 to be in state S (ACTIVE, DOWN; sysfs);
#                        says what it is when it does not get there
#   out_code             the "code" of the CNI error in OUT (empty when there is none)
#   code_is N            OUT is a CNI error with code N
#   out_says TEXT        the CNI error in OUT (its quotes unescaped) contains TEXT, case-insensitively
#   json_with JSON KV    the compact JSON object JSON with the members KV ("\"k\":v,...") added
#   with_prev CONF RES   CONF with prevResult RES, as a runtime sends CHECK and DEL
declare -gA NICS_PCI=() NICS_FOUND=()
NICS=()

hostinfo() {
  local d=/sys/class/net/$1 mtu flags mac alias='' up=false
  HOSTINFO=
  [[ -e $d/flags ]] || return 1
  read -r mtu <"$d/mtu" && read -r flags <"$d/flags" && read -r mac <"$d/address" || return 1
  read -r alias <"$d/ifalias"
  (((flags & 1) == 1)) && up=true
  HOSTINFO="$1 mtu=$mtu up=$up mac=$mac alias=$alias"
}

netdev_of_pci() {
  local f
  for f in /sys/bus/pci/devices/"$1"/virtio*/net/*; do
    [[ -e $f ]] && echo "${f##*/}"
  done
}

nics_snapshot() {
  local f n dev
  NICS_PCI=() NICS_FOUND=() NICS=()
  for f in /sys/class/net/eth*; do
    [[ -e $f/device ]] || continue
    n=${f##*/}
    dev=$(readlink -f "$f/device")
    dev=${dev%/*}  # the virtio device's parent: the PCI function
    [[ ${dev##*/} =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ ]] || continue
    hostinfo "$n" || continue
    NICS_PCI[$n]=${dev##*/}
    NICS_FOUND[$n]=$HOSTINFO
    NICS+=("$n")
  done
}

nics_diff() {
  local n cur rc=0
  for n in "${NICS[@]}"; do
    cur=$(netdev_of_pci "${NICS_PCI[$n]}")
    if [[ -z $cur ]]; then
      echo "  $n (PCI ${NICS_PCI[$n]}) is not in the initial netns"
      rc=1
      continue
    fi
    hostinfo "$cur"
    if [[ $HOSTINFO != "${NICS_FOUND[$n]}" ]]; then
      echo "  $n is '$HOSTINFO', was '${NICS_FOUND[$n]}'"
      rc=1
    fi
  done
  return $rc
}

nics_restore() {
  local n pci cur i mtu up mac alias _
  for n in "${NICS[@]}"; do
    pci=${NICS_PCI[$n]}
    cur=
    for ((i = 0; i < 50; i++)); do  # a dying netns hands its physical devices back asynchronously
      cur=$(netdev_of_pci "$pci")
      [[ -n $cur ]] && break
      sleep 0.2
    done
    if [[ -z $cur ]]; then
      echo "  restore: $n (PCI $pci) is not in the initial netns"
      continue
    fi
    if [[ $cur != "$n" ]]; then
      ip link set dev "$cur" down
      ip link set dev "$cur" name "$n" || continue
    fi
    ip addr flush dev "$n" 2>/dev/null
    hostinfo "$n"
    [[ $HOSTINFO == "${NICS_FOUND[$n]}" ]] && continue
    echo "  restore: $n is '$HOSTINFO', putting back '${NICS_FOUND[$n]}'"
    read -r _ mtu up mac alias <<<"${NICS_FOUND[$n]}"
    ip link set dev "$n" down
    ip link set dev "$n" mtu "${mtu#mtu=}" address "${mac#mac=}" alias "${alias#alias=}"
    [[ $up == up=true ]] && ip link set dev "$n" up
  done
}

pod_links() {
  local line names=()
  while read -r line; do
    line=${line#*: }
    names+=("${line%%[:@]*}")
  done <<<"$(ip -n "$1" -o link show)"  # (no <(...): the VM has no /dev/fd)
  printf '%s\n' "${names[@]}" | sort | paste -sd,
}
pod_ipv4() {
  local line addrs=()
  while read -r line; do
    [[ $line =~ inet\ ([0-9./]+) ]] && addrs+=("${BASH_REMATCH[1]}")
  done <<<"$(ip -n "$1" -4 -o addr show dev "$2" 2>/dev/null)"
  local IFS=,
  echo "${addrs[*]}"
}
podinfo() {
  local line mtu='' mac='' alias='' up=false
  line=$(ip -n "$1" -o link show dev "$2" 2>/dev/null) || return 1
  [[ $line =~ \<([A-Z_,-]*)\> ]] && [[ ,${BASH_REMATCH[1]}, == *,UP,* ]] && up=true
  [[ $line =~ \ mtu\ ([0-9]+) ]] && mtu=${BASH_REMATCH[1]}
  [[ $line =~ link/[a-z]+\ ([0-9a-f:]+) ]] && mac=${BASH_REMATCH[1]}
  [[ $line =~ \ alias\ (.*)$ ]] && alias=${BASH_REMATCH[1]}
  echo "$2 mtu=$mtu up=$up mac=$mac alias=$alias"
}

out_code() {
  [[ $OUT =~ \"code\":\ *([0-9]+) ]] && echo "${BASH_REMATCH[1]}"
}

out_says() {
  local out=${OUT//'\"'/'"'} text=${1,,}  # JSON's \" read as "
  out=${out,,}
  [[ $out == *"$text"* ]]
}

json_with() {
  printf '%s,%s}' "${1%\}}" "$2"
}

with_prev() {
  json_with "$1" "\"prevResult\":$2"
}

code_is() {
  [[ $(out_code) == "$1" ]]
}

linkinfo() {
  if [[ -n ${2:-} ]]; then
    podinfo "$2" "$1"
  else
    hostinfo "$1" && echo "$HOSTINFO"
  fi
}

rdma_port_is() {
  local state=missing
  for _ in $(seq 100); do
    read -r state 2>/dev/null </sys/class/infiniband/"$1"/ports/1/state || state=missing
    [[ ${state#*: } == "$2" ]] && return 0
    sleep 0.1
  done
  echo "  $1/1 is ${state#*: }, not $2"
  return 1
}

# `rdma system show` ("netns shared copy-on-fork on"): Debian 12's iproute2 has no JSON for it.
rdma_mode() {
  rdma system show 2>/dev/null | grep -o 'netns [a-z]*' | cut -d' ' -f2
}

# rdma system set netns needs every namespace but the initial one gone (they die asynchronously).
set_rdma_mode() {
  for _ in $(seq 100); do
    rdma system set netns "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
