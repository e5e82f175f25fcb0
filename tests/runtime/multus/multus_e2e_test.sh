#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# multus_e2e_test.sh BUILD_DIR: ibcni behind the real Multus, as a cluster uses it.
#   - a real kube-apiserver v1.36.3 (tests/support/control-plane) with the NetworkAttachmentDefinition
#     CRD, NADs of type ibcni (sriov mode, embedded ibcni-ipam) and Pod objects whose
#     k8s.v1.cni.cncf.io/networks annotation names them: by name, and as a selection element with
#     `interface`, `ips` and `mac`;
#   - Multus v4.3.0's thin plugin (built from its module, tests/upstream/multus) invoked as the
#     kubelet's runtime invokes it: through libcni (upstream cnitool v1.3.0) with the CRI's CNI_ARGS
#     (K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_INFRA_CONTAINER_ID, K8S_POD_UID), reading the pod and
#     the NADs from the API server with a ServiceAccount token under Multus's own RBAC, the cluster
#     network (Debian's ptp + host-local) first, then delegating to ibcni;
#   - the device plugin's allocation given to Multus as the kubelet gives it: the kubelet's device
#     plugin checkpoint (/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint), written by the
#     kubelet's own code from its module (tests/upstream/kubelet), names the pod's VF by PCI address
#     for the NAD's k8s.v1.cni.cncf.io/resourceName, and Multus hands it to ibcni as deviceID;
#   - the stand-in VF: a veth whose PCI function is described by a sysfs of the test's own (a tmpfs
#     over /sys/bus/pci/devices holding <pci>/net/<veth>, as a VF's function holds its netdev): ibcni
#     resolves deviceID to it and moves it into the pod. The host kernel has no SR-IOV or RDMA, so
#     the function has no PF, no GUID and no RDMA device (the kernel lab moves real PCI NICs; the
#     RDMA device in the device-info is proven there and by the unit tests);
#   - checked: Multus's result, the pod's interfaces, the network-status annotation Multus writes
#     back to the Pod (ibcni's interface, IPs, MAC, device-info with the PCI address), ibcni's and
#     the IPAM's records; then DEL through Multus leaves nothing: the VF back on the host under its
#     name, no address held, no record, no device-info file, no Multus cache;
#   - the annotation's infiniband-guid reaches ibcni as runtimeConfig.infinibandGUID: refused for
#     this function (no PF to set a GUID through), Multus fails the ADD with ibcni's message, the
#     runtime's DEL after it leaves nothing (a GUID set for real: tests/kernel-lab and the fakes);
#   - a NAD in ipoib mode, delegated the same way: its parent is a veth here (no InfiniBand link on
#     this kernel, nor in the kernel lab, whose rxe is RoCE), so ibcni's error 7 naming `master`
#     comes back through Multus and nothing is left.
# Everything runs in a private mount and network namespace (a private /run, /var/lib and sysfs):
# nothing of the machine is seen or changed, and all of it goes with the namespace.
# MULTUS_E2E_PLANT plants a fault the checks must find (ctest runs both, expecting the named FAIL):
#   no-interfaces  ibcni's result loses its interfaces on the way to Multus (a wrapper plugin)
#   other-type     the NAD's config says "type": "ptp" instead of ibcni
# 77 = skip: not root, or the upstream programs are not built (scripts/build-upstream.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
build=$(cd "${1:?usage: multus_e2e_test.sh BUILD_DIR}" && pwd)
plant=${MULTUS_E2E_PLANT:-}

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root"
  exit 77
fi
for c in multus cnitool kubernetes etcd kubelet; do
  if ! "$repo/scripts/build-upstream.sh" --dir "$c" >/dev/null 2>&1; then
    echo "SKIP: $c is not built on this machine (scripts/build-upstream.sh $c)"
    exit 77
  fi
done
if [[ ${IBCNI_MULTUS_E2E_INSIDE:-} != 1 ]]; then
  exec env IBCNI_MULTUS_E2E_INSIDE=1 unshare --mount --net --propagation private -- bash "$0" "$build"
fi

source "$repo/tests/support/check.sh"
source "$repo/tests/support/control-plane/lib.sh"

# ---- the namespace's own /run, /var/lib and sysfs -------------------------------------------------
ip link set lo up
mount -t sysfs sysfs /sys                 # shows this network namespace's netdevs
mount -t tmpfs tmpfs /run                 # netns handles, Multus's device-info files
mount -t tmpfs tmpfs /var/lib             # the kubelet's checkpoint, libcni's cache
mount -t tmpfs tmpfs /sys/bus/pci/devices # the stand-in VF's PCI function, and nothing else
mkdir -p /run/netns /var/lib/kubelet/device-plugins /var/lib/cni

control_plane_session
multus=$("$repo/scripts/build-upstream.sh" --dir multus)/multus
cnitool=$("$repo/scripts/build-upstream.sh" --dir cnitool)/cnitool
kubelet_checkpoint=$("$repo/scripts/build-upstream.sh" --dir kubelet)/kubelet-checkpoint
echo "multus: $("$multus" --version 2>&1 | head -1)"

ns=ib-pods
pci=0000:ff:01.2                          # the stand-in VF's PCI address
vf=ibvf0                                  # its netdev
resource=ibcni.io/ib_vf                   # the device plugin's resource the NAD names
node=node-e2e
bin=$work/bin
netconf=$work/net.d
mkdir -p "$bin" "$netconf" "$work/multus-cache"

# ---- the plugins, where Multus and libcni find them -------------------------------------------
ln -s "$multus" "$bin/multus"
ln -s "$build/ibcni-ipam" "$bin/ibcni-ipam"
for p in ptp host-local loopback; do ln -s "/usr/lib/cni/$p" "$bin/$p"; done
if [[ $plant == no-interfaces ]]; then
  # Planted: ibcni answers without its interfaces (what Multus writes back must show the loss).
  printf '#!/bin/bash\nout=$(%q)\nrc=$?\n[[ $CNI_COMMAND == ADD && $rc -eq 0 ]] && out=$(jq -c "del(.interfaces) | del(.ips[].interface)" <<<"$out")\nprintf "%%s\\n" "$out"\nexit $rc\n' \
    "$build/ibcni" >"$bin/ibcni"
  chmod +x "$bin/ibcni"
else
  ln -s "$build/ibcni" "$bin/ibcni"
fi

# ---- the cluster side: CRD, namespace, NADs, Multus's ServiceAccount and RBAC -----------------
check "the NetworkAttachmentDefinition CRD is installed and established" \
  bash -c "'$CP_KUBECTL' --kubeconfig '$CP_ADMIN' apply --server-side -f '$repo/tests/deploy/crds/network-attachment-definition.yaml' >/dev/null &&
           '$CP_KUBECTL' --kubeconfig '$CP_ADMIN' wait --for condition=established --timeout 60s crd/network-attachment-definitions.k8s.cni.cncf.io >/dev/null" ||
  finish_checks
kc create namespace "$ns" >/dev/null
kc create serviceaccount default -n "$ns" >/dev/null
kc create namespace kube-system >/dev/null 2>&1
kc create serviceaccount multus -n kube-system >/dev/null
# Multus's ClusterRole as its deployment (deployments/multus-daemonset.yml) grants it.
kc apply -f - >/dev/null <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: multus}
rules:
- apiGroups: [k8s.cni.cncf.io]
  resources: ['*']
  verbs: ['*']
- apiGroups: ['']
  resources: [pods, pods/status]
  verbs: [get, list, update, watch]
- apiGroups: ['', events.k8s.io]
  resources: [events]
  verbs: [create, patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: multus}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: multus}
subjects:
- {kind: ServiceAccount, name: multus, namespace: kube-system}
EOF
control_plane_kubeconfig "$work/multus.kubeconfig" kube-system multus

nad_type=ibcni
[[ $plant == other-type ]] && nad_type=ptp
nad_config=$(jq -nc --arg type "$nad_type" --arg state "$work/ibcni-state" --arg log "$work/ibcni.log" \
  --arg ipam "$work/ipam" \
  '{cniVersion: "1.0.0", name: "ib-sriov", type: $type, mode: "sriov",
    capabilities: {ips: true, mac: true, infinibandGUID: true, CNIDeviceInfoFile: true},
    stateDir: $state, logLevel: "info", logFile: $log,
    ipam: {type: (if $type == "ibcni" then "ibcni-ipam" else "host-local" end),
           subnet: "10.98.0.0/24", dataDir: $ipam}}')
kc apply -f - >/dev/null <<EOF
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: ib-sriov
  namespace: $ns
  annotations: {k8s.v1.cni.cncf.io/resourceName: $resource}
spec:
  config: '$nad_config'
EOF
check "the NAD of type $nad_type is in the API server" \
  test "$(kc get net-attach-def ib-sriov -n "$ns" -o jsonpath='{.spec.config}' | jq -r .type)" = "$nad_type"

# ---- Multus's configuration: the cluster network first, the NADs through the API server -----------
cat >"$netconf/10-cluster.conf" <<EOF
{"cniVersion": "1.0.0", "name": "cluster", "type": "ptp",
 "ipam": {"type": "host-local", "subnet": "10.97.0.0/24", "dataDir": "$work/cluster-ipam"}}
EOF
cat >"$netconf/00-multus.conf" <<EOF
{"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "multus",
 "kubeconfig": "$work/multus.kubeconfig", "confDir": "$netconf", "cniDir": "$work/multus-cache",
 "binDir": "$bin", "clusterNetwork": "$netconf/10-cluster.conf",
 "logFile": "$work/multus.log", "logLevel": "verbose"}
EOF

# ---- the stand-in VF and its PCI function -------------------------------------------------------
ip link add "$vf" type veth peer name "${vf}p"
mkdir -p "/sys/bus/pci/devices/$pci/net/$vf"
vf_mac=$(cat "/sys/class/net/$vf/address")

# pod NAME ANNOTATION: a Pod object on $node (no kubelet: it stays Pending, which Multus does not
# mind); prints its UID.
pod() {
  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $ns
  annotations: {k8s.v1.cni.cncf.io/networks: '$2'}
spec:
  nodeName: $node
  containers:
  - name: c
    image: registry.example.com/rdma-test:1
    resources: {limits: {$resource: "1"}}
EOF
  kc get pod "$1" -n "$ns" -o jsonpath='{.metadata.uid}'
}

# checkpoint UID: the kubelet's device plugin checkpoint with the pod's allocation of one VF of
# $resource on NUMA node 0, written by the kubelet's own code (tests/upstream/kubelet:
# devicemanager/checkpoint and checkpointmanager, checksum included), where the kubelet keeps it.
checkpoint() {
  "$kubelet_checkpoint" /var/lib/kubelet/device-plugins "$1" c "$resource" 0 "$pci"
}

# cni VERB NETNS POD UID: Multus through libcni, with the CRI's CNI_ARGS; its output in $out (its
# stderr in $work/cni.err), status $rc
cni() {
  local cid
  cid=cnitool-$(printf '%s' "/run/netns/$2" | sha512sum | cut -c1-20)  # as cnitool derives it
  out=$(CNI_PATH=$bin NETCONFPATH=$netconf \
    CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=$ns;K8S_POD_NAME=$3;K8S_POD_INFRA_CONTAINER_ID=$cid;K8S_POD_UID=$4" \
    "$cnitool" "$1" multus-cni-network "/run/netns/$2" 2>"$work/cni.err")
  rc=$?
}

status_of() { kc get pod "$1" -n "$ns" -o jsonpath='{.metadata.annotations.k8s\.v1\.cni\.cncf\.io/network-status}'; }
pod_links() { ip netns exec "$1" ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | sort | tr '\n' ' '; }
pod_addr() { ip netns exec "$1" ip -o -4 addr show dev "$2" 2>/dev/null | awk '{print $4}'; }
pod_mac() { ip netns exec "$1" ip -o link show "$2" | grep -o 'link/ether [^ ]*' | cut -d' ' -f2; }
held_addresses() { find "$work"/ipam/*/attachments -type f 2>/dev/null | wc -l; }  # ibcni-ipam's allocations
records() { find "$work/ibcni-state/attachments" -type f 2>/dev/null | wc -l; }     # ibcni's attachment records
devinfo_files() { find /run/k8s.cni.cncf.io -type f 2>/dev/null | wc -l; }

# round TAG POD ANNOTATION IFNAME IP MAC: one pod through ADD and DEL.
round() {
  local tag=$1 name=$2 annotation=$3 ifname=$4 ip=$5 mac=$6 netns uid status
  netns=pod-$name
  ip netns add "$netns"
  uid=$(pod "$name" "$annotation")
  check "[$tag] the Pod object exists (uid $uid)" test -n "$uid"
  checkpoint "$uid"

  cni add "$netns" "$name" "$uid"
  check "[$tag] ADD through Multus exits 0" test "$rc" -eq 0 || sed 's/^/    /' "$work/cni.err"
  # Multus answers the runtime with the cluster network's result; the others go to network-status.
  check "[$tag] ... its result is the cluster network's: eth0 in the pod, 10.97.0.0/24" \
    jq -e --arg s "/run/netns/$netns" \
      '(.interfaces | map(select(.sandbox == $s) | .name) == ["eth0"]) and (.ips[0].address | startswith("10.97.0."))' \
      <<<"$out" >/dev/null
  check "[$tag] the VF ($vf, $pci) left the host" bash -c "! ip link show '$vf' >/dev/null 2>&1"
  check "[$tag] the pod holds lo, eth0 and $ifname" test "$(pod_links "$netns")" = "$(printf '%s\n' lo eth0 "$ifname" | sort | tr '\n' ' ')"
  if [[ -n $ip ]]; then
    check "[$tag] ... $ifname has $ip" test "$(pod_addr "$netns" "$ifname")" = "$ip"
  fi
  if [[ -n $mac ]]; then
    check "[$tag] ... and the MAC $mac" test "$(pod_mac "$netns" "$ifname")" = "$mac"
  fi
  status=$(status_of "$name")
  echo "    network-status: $status"
  check "[$tag] Multus wrote the pod's network-status: $ns/ib-sriov on $ifname, its IP and MAC" \
    jq -e --arg n "$ns/ib-sriov" --arg i "$ifname" --arg ip "${ip%/*}" --arg mac "$mac" \
      'map(select(.name == $n))[0] | .interface == $i and (.ips | length == 1) and
       ($ip == "" or .ips[0] == $ip) and ($mac == "" or .mac == $mac)' <<<"$status" >/dev/null
  check "[$tag] ... with ibcni's device-info: the VF's PCI address $pci" \
    jq -e --arg n "$ns/ib-sriov" --arg pci "$pci" \
      'map(select(.name == $n))[0]."device-info" | .type == "pci" and .pci."pci-address" == $pci' <<<"$status" >/dev/null
  check "[$tag] ... and the cluster network first, as the default" \
    jq -e '.[0].default == true and .[0].interface == "eth0"' <<<"$status" >/dev/null
  check "[$tag] ibcni's attachment record and one address of the IPAM are held" \
    test "$(records) $(held_addresses)" = "1 1"

  cni del "$netns" "$name" "$uid"
  check "[$tag] DEL through Multus exits 0" test "$rc" -eq 0 || sed 's/^/    /' "$work/cni.err"
  check "[$tag] the VF is back on the host as $vf, with its MAC" \
    test "$(cat "/sys/class/net/$vf/address" 2>/dev/null)" = "$vf_mac"
  check "[$tag] the pod holds only lo" test "$(pod_links "$netns")" = "lo "
  check "[$tag] nothing is left: no address held, no ibcni record, no device-info file, no Multus cache" \
    test "$(held_addresses) $(records) $(devinfo_files) $(find "$work/multus-cache" -type f | wc -l)" = "0 0 0 0"
  ip netns del "$netns"
  kc delete pod "$name" -n "$ns" --wait=false >/dev/null
}

round "by name" pod-a 'ib-sriov' net1 "" ""
round "selection element: interface, ips, mac" pod-b \
  '[{"name": "ib-sriov", "interface": "ib0", "ips": ["10.98.0.9/24"], "mac": "02:98:00:00:00:09"}]' \
  ib0 10.98.0.9/24 02:98:00:00:00:09

# guid_round: the annotation's infiniband-guid reaches ibcni (runtimeConfig infinibandGUID), which
# refuses it for a function that is no SR-IOV VF (no PF sets a GUID): Multus fails the ADD with
# ibcni's error, and the runtime's DEL after it leaves nothing.
guid_round() {
  local tag="infiniband-guid" name=pod-c netns=pod-pod-c uid
  ip netns add "$netns"
  uid=$(pod "$name" '[{"name": "ib-sriov", "infiniband-guid": "02:00:00:00:00:98:00:0c"}]')
  checkpoint "$uid"
  cni add "$netns" "$name" "$uid"
  sed 's/^/    /' "$work/cni.err"
  check "[$tag] ADD through Multus fails with ibcni's error naming the GUID" \
    bash -c "test '$rc' -ne 0 && grep -q 'runtimeConfig.infinibandGUID' '$work/cni.err'"
  check "[$tag] ... and the VF stayed on the host" bash -c "ip link show '$vf' >/dev/null"
  cni del "$netns" "$name" "$uid"
  check "[$tag] the runtime's DEL after it exits 0 and leaves nothing" \
    test "$rc $(pod_links "$netns")$(held_addresses) $(records) $(devinfo_files)" = "0 lo 0 0 0"
  ip netns del "$netns"
}
guid_round

# ipoib_round: a NAD in ipoib mode, delegated by Multus as any other. The host kernel has no
# InfiniBand link (nor has the kernel lab: rxe is RoCE), so its parent is a veth: ibcni refuses it
# with error 7 naming `master`, which Multus passes on; nothing is left. (A pkey child is created
# for real only on InfiniBand hardware: e2e/hw.)
ipoib_round() {
  local tag="ipoib mode" name=pod-d netns=pod-pod-d uid config
  ip link add ibpar0 type veth peer name ibpar0p
  config=$(jq -nc --arg state "$work/ibcni-state" --arg log "$work/ibcni.log" --arg ipam "$work/ipam" \
    '{cniVersion: "1.0.0", name: "ib-ipoib", type: "ibcni", mode: "ipoib", master: "ibpar0",
      stateDir: $state, logFile: $log, ipam: {type: "ibcni-ipam", subnet: "10.96.5.0/24", dataDir: $ipam}}')
  kc apply -f - >/dev/null <<EOF
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: ib-ipoib, namespace: $ns}
spec:
  config: '$config'
EOF
  ip netns add "$netns"
  uid=$(pod "$name" 'ib-ipoib')
  cni add "$netns" "$name" "$uid"
  sed 's/^/    /' "$work/cni.err"
  check "[$tag] ADD through Multus fails with ibcni's error naming master (ibpar0 is no IPoIB link)" \
    bash -c "test '$rc' -ne 0 && grep -q 'master' '$work/cni.err' && grep -q 'ibpar0' '$work/cni.err'"
  cni del "$netns" "$name" "$uid"
  check "[$tag] the runtime's DEL after it exits 0 and leaves nothing" \
    test "$rc $(pod_links "$netns")$(held_addresses) $(records)" = "0 lo 0 0"
  ip netns del "$netns"
  ip link del ibpar0
}
ipoib_round

if ((failed)); then
  echo "--- multus log (tail)"; tail -30 "$work/multus.log" 2>/dev/null
  echo "--- ibcni log (tail)"; tail -10 "$work/ibcni.log" 2>/dev/null
fi
finish_checks
