#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# sriov mode on a PCI function really bound to vfio-pci: eth1's virtio-net function, bound to
# vfio-pci through driver_override in a VM with an IOMMU (q35 + intel-iommu: run-iommu.sh), stands
# in for a VF given to a VM. A virtio function is no SR-IOV VF, so ADD takes it as a PCI function
# passed through whole (nothing to set through a PF; the GUID and link state path is the unit
# tests' and the fault tests', over mlx5's layout). Checked: ADD takes it in VFIO mode (exit 0,
# nothing in the pod, the result's pciID and the device-info file name its PCI address), CHECK
# passes and fails once the function leaves vfio-pci, `ibcni reconcile` after the pod died and
# DEL leave it bound to vfio-pci and untouched, a GUID asked of it is error 7, `"vfio": true` on
# eth2 under its netdev driver is 100, and eth2 with "auto" still takes the netdev path.
#
# Inside the VM only (KERNEL_LAB=1), with an IOMMU (/sys/kernel/iommu_groups not empty) and
# vfio-pci; kernel_lab.sh runs it as part `vfio` in the boot of ctest's kernel_lab_vfio:
#   tests/kernel-lab/kernel_lab.sh --boot tests/kernel-lab/run-iommu.sh build vfio
# or alone:
#   tests/kernel-lab/run-iommu.sh --nics 4 -- bash tests/kernel-lab/vfio_vm.sh build/ibcni
# eth1 is given back to virtio-pci (same name) and every NIC left as found, also on a failure.
set -u
IBCNI=$(readlink -f "${1:?usage: $0 <ibcni>}")
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
if [[ ${KERNEL_LAB:-} != 1 ]]; then
  echo "FAIL: this script rebinds eth1 to vfio-pci and runs only inside the kernel-lab VM (KERNEL_LAB=1)"
  exit 1
fi
source "$here/../support/check.sh"
source "$here/lab_nics.sh"
nics_snapshot

WORK=$(mktemp -d /tmp/ibcni-vfio.XXXXXX)
STATE=$WORK/state
DEVINFO=/var/run/k8s.cni.cncf.io/devinfo/cni
POD=vfiopod
PCI=${NICS_PCI[eth1]:-}
PCI2=${NICS_PCI[eth2]:-}

# to_driver PCI DRIVER: binds the function to DRIVER ("" = its own, by the kernel's match).
to_driver() {
  local dev=/sys/bus/pci/devices/$1 cur
  cur=$(basename "$(readlink -f "$dev/driver" 2>/dev/null)" 2>/dev/null)
  echo "${2:-}" >"$dev/driver_override"
  [[ -e $dev/driver ]] && echo "$1" >"/sys/bus/pci/drivers/$cur/unbind"
  echo "$1" >/sys/bus/pci/drivers_probe
}
driver_of() { basename "$(readlink -f "/sys/bus/pci/devices/$1/driver" 2>/dev/null)" 2>/dev/null; }
cleanup() {
  [[ -n $PCI && $(driver_of "$PCI") != virtio-pci ]] && to_driver "$PCI" ""
  ip netns del "$POD" 2>/dev/null
  rm -f "$DEVINFO"/vfionet-*
  nics_restore
  rm -rf "$WORK"
}
trap cleanup EXIT

check "an IOMMU (q35 + intel-iommu, intel_iommu=on): $(ls /sys/kernel/iommu_groups 2>/dev/null | wc -l) groups" \
  test -n "$(ls /sys/kernel/iommu_groups 2>/dev/null)" || finish_checks
modprobe vfio-pci 2>/dev/null
check "vfio-pci is loaded" test -d /sys/bus/pci/drivers/vfio-pci || finish_checks
check "eth1 and eth2 are PCI NICs ($PCI, $PCI2)" test -n "$PCI" -a -n "$PCI2" || finish_checks

# cni VERB IFNAME CONFIG: ibcni as a runtime runs it; sets RC, OUT.
cni() {
  OUT=$(printf '%s' "$3" | env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "CNI_COMMAND=$1" CNI_CONTAINERID=vm1 \
    "CNI_NETNS=/var/run/netns/$POD" "CNI_IFNAME=$2" CNI_PATH=/usr/lib/cni "$IBCNI" 2>"$WORK/stderr")
  RC=$?
  ((RC == 0)) || { echo "  ibcni $1 exit $RC: $OUT"; tail -3 "$WORK/stderr" | sed 's/^/  stderr: /'; }
}
# vm_config PCI [EXTRA]: a network for VMs (no ipam), the device as Multus injects it, asking for
# the device-info file as Multus does when the device plugin wrote none.
vm_config() {
  local c
  c=$(printf '{"cniVersion":"1.1.0","name":"vfionet","type":"ibcni","mode":"sriov","deviceID":"%s","stateDir":"%s"}' \
    "$1" "$STATE")
  c=$(json_with "$c" "\"runtimeConfig\":{\"CNIDeviceInfoFile\":\"$DEVINFO/vfionet-vm1_net1\"}")
  [[ -n ${2:-} ]] && c=$(json_with "$c" "$2")
  printf '%s' "$c"
}
# failed_with CODE [TEXT]: the last call failed with CNI error CODE, its message saying TEXT.
failed_with() { ((RC != 0)) && [[ $(out_code) == "$1" ]] && { [[ -z ${2:-} ]] || out_says "$2"; }; }
records() { find "$STATE/attachments" -name '*.json' 2>/dev/null; }

# ---- eth1's function bound to vfio-pci -----------------------------------------------------------
to_driver "$PCI" vfio-pci
check "$PCI is bound to vfio-pci (driver_override)" test "$(driver_of "$PCI")" = vfio-pci || finish_checks
group=$(basename "$(readlink -f "/sys/bus/pci/devices/$PCI/iommu_group")")
check "its IOMMU group $group has /dev/vfio/$group" test -c "/dev/vfio/$group"
check "eth1 is gone from the host (vfio-pci makes no netdev)" bash -c "! ip link show eth1 >/dev/null 2>&1"

ip netns add "$POD"
CONF=$(vm_config "$PCI")
cni ADD net1 "$CONF"
ADD_OUT=$OUT
check "ADD of the function bound to vfio-pci exits 0" test "$RC" -eq 0
check "the result names net1 in the pod's sandbox" \
  test "$(jq -r '.interfaces[0].name + " " + .interfaces[0].sandbox' <<<"$ADD_OUT")" = "net1 /var/run/netns/$POD"
check "the result's pciID is $PCI" test "$(jq -r '.interfaces[0].pciID' <<<"$ADD_OUT")" = "$PCI"
check "the result has no address" test "$(jq -r '.ips // [] | length' <<<"$ADD_OUT")" = 0
check "nothing moved into the pod (lo only)" test "$(pod_links "$POD")" = lo
check "the device-info file names $PCI" \
  test "$(jq -r '.type + " " + .pci["pci-address"]' "$DEVINFO/vfionet-vm1_net1" 2>/dev/null)" = "pci $PCI"
check "$PCI is still bound to vfio-pci" test "$(driver_of "$PCI")" = vfio-pci
check "one record, of mode sriov-vfio" test "$(jq -r .mode $(records) 2>/dev/null)" = sriov-vfio

cni CHECK net1 "$(with_prev "$CONF" "$ADD_OUT")"
check "CHECK passes" test "$RC" -eq 0
cni ADD net2 "$(vm_config "$PCI" '"runtimeConfig":{"infinibandGUID":"c2:00:00:00:00:00:00:07"}')"
check "a GUID asked of a function that is no VF is error 7" failed_with 7 "no SR-IOV VF"

# The pod dies without a DEL: the node agent's pass undoes the attachment and leaves the function.
ip netns del "$POD"
"$IBCNI" reconcile --state-dir "$STATE" --ipam-data-dir "$WORK/ipam" --pool-index-dir "" --json >"$WORK/rec" 2>&1
check "ibcni reconcile exits 0" test $? -eq 0
check "reconcile undid the dead pod's attachment" grep -q '"undone"' "$WORK/rec"
check "no record is left" test -z "$(records)"
check "$PCI is still bound to vfio-pci after reconcile" test "$(driver_of "$PCI")" = vfio-pci

ip netns add "$POD"
cni ADD net1 "$CONF"
ADD_OUT=$OUT
check "ADD again exits 0" test "$RC" -eq 0
cni DEL net1 "$CONF"
check "DEL exits 0" test "$RC" -eq 0
check "DEL leaves $PCI bound to vfio-pci" test "$(driver_of "$PCI")" = vfio-pci
check "DEL removed the device-info file and the record" test ! -e "$DEVINFO/vfionet-vm1_net1" -a -z "$(records)"
cni DEL net1 "$CONF"
check "DEL again exits 0" test "$RC" -eq 0

cni ADD net1 "$CONF"
to_driver "$PCI" ""
cni CHECK net1 "$(with_prev "$CONF" "$OUT")"
check "CHECK fails (107) once the function is back under virtio-pci" failed_with 107 virtio-pci
cni DEL net1 "$CONF"
check "DEL of it then exits 0" test "$RC" -eq 0

# ---- eth2 under its netdev driver ------------------------------------------------------------------
cni ADD net1 "$(vm_config "$PCI2" '"vfio":true')"
check "\"vfio\": true on eth2 under virtio-pci is error 100 naming the driver" failed_with 100 virtio-pci
cni ADD net1 "$(vm_config "$PCI2")"
check "eth2 with vfio \"auto\" takes the netdev path: ADD exits 0" test "$RC" -eq 0
check "eth2 is net1 in the pod" podinfo "$POD" net1
cni DEL net1 "$(vm_config "$PCI2")"
check "DEL returns eth2" bash -c "ip link show eth2 >/dev/null 2>&1"
finish_checks
