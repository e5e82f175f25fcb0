#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `ibcni doctor --json` against the real kernel: inside the kernel-lab VM, with an rxe device on
# eth0, the devices, ports (netdev, state) and RDMA netns mode it reports must match what iproute2's
# `rdma` says. ctest's kernel_lab_doctor (label kernel-lab) boots the VM and runs it; by hand:
#   ../shared/kernel-lab/run.sh --nics 1 -- tests/kernel-lab/doctor_vm_check.sh build/ibcni
# Inside the VM only (KERNEL_LAB=1): it adds rxe0 on eth0 and flips the netns mode back and forth.
# Prints one PASS/FAIL line per check, ends with "N passed, M failed", exits non-zero on any failure.
set -u
IBCNI=$(readlink -f "${1:?usage: $0 <ibcni>}")
if [[ ${KERNEL_LAB:-} != 1 ]]; then
  echo "FAIL: run inside the kernel-lab VM (KERNEL_LAB=1): ../shared/kernel-lab/run.sh -- $0 $IBCNI"
  exit 1
fi
passed=0 failed=0
check() {
  local what=$1
  shift
  if "$@"; then
    echo "PASS $what"
    passed=$((passed + 1))
  else
    echo "FAIL $what"
    failed=$((failed + 1))
  fi
}
same() {  # same WHAT EXPECTED ACTUAL
  if [[ $2 == "$3" ]]; then
    echo "PASS $1: $3"
    passed=$((passed + 1))
  else
    echo "FAIL $1: rdma says $2, doctor says $3"
    failed=$((failed + 1))
  fi
}
# `rdma system show` ("netns shared copy-on-fork on"): Debian 12's iproute2 has no JSON for it.
rdma_mode() { rdma system show | awk '{for (i = 1; i < NF; i++) if ($i == "netns") print $(i + 1)}'; }
finish() {
  echo "$passed passed, $failed failed"
  ((failed == 0))
  exit
}

modprobe rdma_rxe 2>/dev/null
added=0
if ! rdma -j dev show 2>/dev/null | jq -e 'any(.[]; .ifname == "rxe0")' >/dev/null; then
  check "rxe0 made on eth0" rdma link add rxe0 type rxe netdev eth0 || finish
  added=1
fi
ip link set eth0 up
# rxe0's port goes ACTIVE shortly after eth0 is up; compare a settled state, not a transition.
port_active() {
  for _ in $(seq 100); do
    [[ $(rdma -j link show rxe0/1 2>/dev/null | jq -r '.[0].state') == ACTIVE ]] && return 0
    sleep 0.1
  done
  return 1
}
check "rxe0/1 is ACTIVE before the comparison" port_active

compare() {  # compare TAG: one doctor run against rdma's view
  local tag=$1 out rc
  out=$("$IBCNI" doctor --json)
  rc=$?
  check "[$tag] doctor --json prints JSON" jq -e 'type == "object"' <<<"$out" >/dev/null || return
  check "[$tag] doctor exits 0 or 1 (problems: $(jq -c '[.problems[] | select(.informational | not) | .what]' <<<"$out"))" \
    test "$rc" -le 1
  same "[$tag] RDMA devices" "$(rdma -j dev show | jq -c '[.[].ifname] | sort')" \
    "$(jq -c '[.devices[].name] | sort' <<<"$out")"
  same "[$tag] ports and their netdevs" \
    "$(rdma -j link show | jq -c '[.[] | "\(.ifname)/\(.port) \(.netdev // "-")"] | sort')" \
    "$(jq -c '[.devices[] as $d | $d.ports[] | "\($d.name)/\(.port) \(.netdev // "-")"] | sort' <<<"$out")"
  same "[$tag] port states" \
    "$(rdma -j link show | jq -c '[.[] | "\(.ifname)/\(.port) \(.state)"] | sort')" \
    "$(jq -c '[.devices[] as $d | $d.ports[] | "\($d.name)/\(.port) \(.state)"] | sort' <<<"$out")"
  same "[$tag] RDMA netns mode" "$(rdma_mode)" "$(jq -r '.rdmaNetnsMode' <<<"$out")"
  check "[$tag] libibverbs loads in the VM" jq -e '.libibverbs.available' <<<"$out" >/dev/null
  check "[$tag] rxe0 port 1 is Ethernet (RoCE) with a port GUID" \
    jq -e '.devices[] | select(.name == "rxe0") | .ports[0] | .linkLayer == "Ethernet" and .portGuid != null' \
    <<<"$out" >/dev/null
  check "[$tag] the uverbs devices are those of /dev/infiniband" \
    test "$(jq -r '.uverbsDevices | join(" ")' <<<"$out")" == "$(cd /dev/infiniband 2>/dev/null && ls -d uverbs* 2>/dev/null | sort | xargs)"
}

orig=$(rdma_mode)
compare "$orig"
other=exclusive
[[ $orig == exclusive ]] && other=shared
if rdma system set netns "$other" 2>/dev/null; then
  compare "$other"
  rdma system set netns "$orig"
else
  echo "note: could not switch the netns mode to $other (other namespaces exist?); compared $orig only"
fi
((added)) && rdma link delete rxe0
finish
