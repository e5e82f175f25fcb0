#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `ibcni doctor --json` against the real kernel: inside the kernel-lab VM, with an rxe device on
# eth0, the devices, ports (netdev, state) and RDMA netns mode it reports must match what iproute2's
# `rdma` says. ctest's kernel_lab runs it in its one boot (kernel_lab.sh through doctor_verbs_vm.sh,
# see README.md); by hand, from the repository root:
#   ../shared/kernel-lab/run.sh --nics 4 -- bash tests/kernel-lab/doctor_vm_check.sh build/ibcni
# Inside the VM only (KERNEL_LAB=1): it adds rxe0 on eth0 (needs --nics 1 or more; other NICs are
# not touched) and flips the netns mode back and forth; it leaves rxe0 (when it made it), eth0's
# state and the netns mode as found, also when a check fails.
# `doctor --config` is run there too, with eth0's PCI function as deviceID: the verbs check of the
# real port (ACTIVE, then DOWN) and rdmaIsolation against the real netns mode.
# Prints one PASS/FAIL line per check, ends with "N passed, M failed", exits non-zero on any failure.
set -u
IBCNI=$(readlink -f "${1:?usage: $0 <ibcni>}")
if [[ ${KERNEL_LAB:-} != 1 ]]; then
  echo "FAIL: run inside the kernel-lab VM (KERNEL_LAB=1): ../shared/kernel-lab/run.sh --nics 4 -- bash $0 $IBCNI"
  exit 1
fi
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
source "$here/../support/check.sh"
source "$here/lab_nics.sh"
nics_snapshot
same() {  # same WHAT EXPECTED ACTUAL
  if [[ $2 == "$3" ]]; then
    echo "PASS $1: $3"
    passed=$((passed + 1))
  else
    echo "FAIL $1: rdma says $2, doctor says $3"
    failed=$((failed + 1))
  fi
}

modprobe rdma_rxe 2>/dev/null
added=0
work=
orig=
cleanup() {
  ((added)) && rdma link delete rxe0 2>/dev/null
  [[ -n $orig && $(rdma_mode) != "$orig" ]] && rdma system set netns "$orig"
  nics_restore
  [[ -n $work ]] && rm -rf "$work"
}
trap cleanup EXIT
if [[ ! -e /sys/class/infiniband/rxe0 ]]; then
  check "rxe0 made on eth0" rdma link add rxe0 type rxe netdev eth0 || finish_checks
  added=1
fi
ip link set eth0 up
# rxe0's port goes ACTIVE shortly after eth0 is up; compare a settled state, not a transition.
check "rxe0/1 is ACTIVE before the comparison" rdma_port_is rxe0 ACTIVE

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

# `doctor --config` with eth0's PCI function as deviceID (rxe0 is its RDMA device): the verbs check
# (require) of the real port, and rdmaIsolation against the real netns mode.
work=$(mktemp -d /tmp/doctor-vm.XXXXXX)
pci=$(basename "$(readlink -f /sys/class/net/eth0/device/..)")
lab_config() {  # lab_config FILE EXTRA_JSON
  jq -n --arg pci "$pci" --arg state "$work/state" --argjson extra "$2" \
    '{cniVersion: "1.1.0", name: "lab", type: "ibcni", deviceID: $pci, stateDir: $state,
      verbsCheck: {mode: "require"}} + $extra' >"$1"
}
verdict() {  # verdict FILE: the config part of doctor --json --config FILE
  "$IBCNI" doctor --json --config "$1" | jq -c '.config'
}
configs() {  # configs TAG MODE
  local tag=$1 mode=$2 v
  lab_config "$work/plain.json" '{}'
  v=$(verdict "$work/plain.json")
  check "[$tag] --config deviceID $pci (rxe0 ACTIVE), verbsCheck require: works ($v)" \
    jq -e '.works and .candidates[0].works and .candidates[0].warnings == []' <<<"$v" >/dev/null
  lab_config "$work/iso.json" '{"rdmaIsolation": true}'
  v=$(verdict "$work/iso.json")
  if [[ $mode == shared ]]; then
    check "[$tag] --config rdmaIsolation true: refused in shared mode, with the fix ($v)" \
      jq -e '(.works | not) and (.candidates[0].problem | test("rdma system set netns exclusive"))' <<<"$v" >/dev/null
  else
    check "[$tag] --config rdmaIsolation true: accepted in exclusive mode ($v)" jq -e '.works' <<<"$v" >/dev/null
  fi
}
orig=$(rdma_mode)
compare "$orig"
configs "$orig" "$orig"
# The port DOWN (eth0 down): the verbs check refuses the device.
ip link set eth0 down
rdma_port_is rxe0 DOWN
v=$(verdict "$work/plain.json")
check "[$orig] --config with rxe0's port DOWN: refused by the verbs check, 109 ($v)" \
  jq -e '(.works | not) and (.candidates[0].problem | test("rxe0 port 1 is DOWN, not ACTIVE.*CNI error 109"))' \
  <<<"$v" >/dev/null
ip link set eth0 up
check "rxe0/1 is ACTIVE again" rdma_port_is rxe0 ACTIVE
other=exclusive
[[ $orig == exclusive ]] && other=shared
if rdma system set netns "$other" 2>/dev/null; then
  compare "$other"
  configs "$other" "$other"
  rdma system set netns "$orig"
else
  echo "note: could not switch the netns mode to $other (other namespaces exist?); compared $orig only"
fi
finish_checks  # cleanup (EXIT): rxe0 deleted when made here, eth0 as found
