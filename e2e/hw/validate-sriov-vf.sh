#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Hardware validation of ibcni's sriov mode on a real InfiniBand Kubernetes cluster
# (Multus + SR-IOV network device plugin + IB VFs + a subnet manager with virtualization).
#
# It applies manifests/nad-ib-sriov.yaml, starts two pods from manifests/pod-template.yaml, each
# with one VF and its own InfiniBand GUID, and checks inside each pod that net1 is IPoIB with the
# requested GUID, that exactly the VF's RDMA device is visible, that its port is ACTIVE with a
# LID from the SM and the configured pkey, pings and runs ib_write_bw between the pods, deletes
# them and checks on each node (hostNetwork helper pod) that the VF's netdev, RDMA device, GUIDs
# and link state are back as they were.
#
# See README.md next to this file. Output: PASS/FAIL/SKIP lines, then "N passed, M failed".
# Exit 0 if nothing failed, 1 if a check failed, 2 on a usage or setup error.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAD_MANIFEST=$HERE/manifests/nad-ib-sriov.yaml
POD_TEMPLATE=$HERE/manifests/pod-template.yaml
# The checks' reporting (pass/fail/skip, finish), cleanup, and the nodes' helper pods.
HELPER_POD_PREFIX=ibcni-hw-host
# shellcheck source=e2e/lib/hw-validate.sh
. "$HERE/../lib/hw-validate.sh"

usage() {
  cat <<'EOF'
Usage: validate-sriov-vf.sh [options]

  -n, --nad NAME          NetworkAttachmentDefinition, NAME or NAMESPACE/NAME (default: ib-sriov-hw)
      --no-nad-apply      do not apply manifests/nad-ib-sriov.yaml; validate the existing NAD
  -r, --resource NAME     IB VF resource of the SR-IOV device plugin (default: the manifest's
                          annotation, nvidia.com/mlnx_ib_vf; with --no-nad-apply: the NAD's)
  -N, --namespace NS      namespace of the test and helper pods (default: default)
  -i, --image IMAGE       test image with sh, sleep, ibv_devinfo, ib_write_bw, ping, ip
                          (default: docker.io/mellanox/rping-test:latest)
      --host-image IMAGE  node helper image with sh, ip (iproute2), rdma optional
                          (default: docker.io/nicolaka/netshoot:latest)
      --node-a NODE       node of the first pod  (default: the scheduler decides)
      --node-b NODE       node of the second pod (use another node than --node-a to cross the
                          fabric; giving both also enables the before/after VF comparison)
      --guid-a GUID       InfiniBand GUID of the first pod's VF  (default: 02:00:00:00:ac:00:00:01)
      --guid-b GUID       InfiniBand GUID of the second pod's VF (default: 02:00:00:00:ac:00:00:02)
      --ip-a CIDR         address requested for the first pod  (default: 192.168.100.201/24)
      --ip-b CIDR         address requested for the second pod (default: 192.168.100.202/24)
      --min-bw GBPS       ib_write_bw average must exceed this, in Gb/s (default: 0)
  -t, --timeout SECONDS   wait for pods, deletion and the VF's return (default: 180)
      --keep              leave the test pods (and the NAD) for debugging; no teardown checks
      --kubectl CMD       kubectl to use (default: kubectl; e.g. "oc")
  -h, --help
EOF
}

die() { echo "validate-sriov-vf: $*" >&2; exit 2; }

NAD=ib-sriov-hw NAD_APPLY=1 RESOURCE="" NS=default IMAGE=docker.io/mellanox/rping-test:latest
HOST_IMAGE=docker.io/nicolaka/netshoot:latest NODE_A="" NODE_B=""
GUID_A=02:00:00:00:ac:00:00:01 GUID_B=02:00:00:00:ac:00:00:02
IP_A=192.168.100.201/24 IP_B=192.168.100.202/24 MIN_BW=0 TIMEOUT=180 KEEP=0 KUBECTL=kubectl
IFN=net1 # the interface name the pod template asks Multus for

while (($#)); do
  common_opt "$@" && { shift "$OPT_TAKEN"; continue; }
  case $1 in
    -r | --resource) RESOURCE=${2-}; shift ;;
    --guid-a) GUID_A=${2-}; shift ;;
    --guid-b) GUID_B=${2-}; shift ;;
    --min-bw) MIN_BW=${2-}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

# --- argument checks ------------------------------------------------------------------------------

[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout must be a number of seconds"
[[ $MIN_BW =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--min-bw must be a number of Gb/s"
for g in "$GUID_A" "$GUID_B"; do
  [[ $g =~ ^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){7}$ ]] || die "GUID '$g': must be 8 colon-separated hex octets"
  [[ $(guid_hex "$g") != 0000000000000000 && $(guid_hex "$g") != ffffffffffffffff ]] \
    || die "GUID '$g': all-zero and all-ones GUIDs are not valid port GUIDs"
done
[[ $(guid_hex "$GUID_A") != "$(guid_hex "$GUID_B")" ]] || die "--guid-a and --guid-b must differ"
[[ -z $RESOURCE || $RESOURCE =~ ^[A-Za-z0-9.-]+/[A-Za-z0-9._-]+$ ]] || die "--resource '$RESOURCE': expected DOMAIN/NAME"
check_common_args 192.168.100.201/24

start_run ibcni-hw

trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# --- the NetworkAttachmentDefinition --------------------------------------------------------------

NADS=network-attachment-definitions.k8s.cni.cncf.io
existing=$(kc -n "$NAD_NS" get "$NADS" "$NAD_NAME" -o json 2>/dev/null)
if ((NAD_APPLY)); then
  if [[ -n $existing ]] \
    && [[ $(jq -r '.metadata.labels["app.kubernetes.io/created-by"] // ""' <<<"$existing") != "$CREATED_BY" ]]; then
    die "NAD $NAD_NS/$NAD_NAME exists and was not created by this kit; validate it with --no-nad-apply or choose another --nad"
  fi
  manifest=$(kc create --dry-run=client -o json -f "$NAD_MANIFEST" 2>&1) \
    || die "cannot read $NAD_MANIFEST (is the NetworkAttachmentDefinition CRD, i.e. Multus, installed?): $manifest"
  manifest=$(jq --arg n "$NAD_NAME" --arg ns "$NAD_NS" --arg r "$RESOURCE" '
      .metadata.name = $n | .metadata.namespace = $ns
      | if $r == "" then . else .metadata.annotations["k8s.v1.cni.cncf.io/resourceName"] = $r end
      | if (.spec.config | fromjson | .name) == $n then . else .spec.config |= (fromjson | .name = $n | tojson) end
    ' <<<"$manifest") || die "cannot adapt $NAD_MANIFEST"
  out=$(kc apply -f - <<<"$manifest" 2>&1) || die "applying the NAD failed: $out"
  [[ -z $existing ]] && NAD_CREATED=1
  pass nad_applied "$NAD_NS/$NAD_NAME from manifests/nad-ib-sriov.yaml"
fi
nad_json=$(kc -n "$NAD_NS" get "$NADS" "$NAD_NAME" -o json 2>&1) \
  || die "cannot read NetworkAttachmentDefinition $NAD_NS/$NAD_NAME: $nad_json"
[[ -n $RESOURCE ]] || RESOURCE=$(jq -r '.metadata.annotations["k8s.v1.cni.cncf.io/resourceName"] // ""' <<<"$nad_json")
[[ -n $RESOURCE ]] || die "--resource not given and the NAD has no k8s.v1.cni.cncf.io/resourceName annotation"
CONF=$(jq -c '.spec.config // "{}" | fromjson | if has("plugins") then ([.plugins[] | select(.type == "ibcni")][0] // {}) else . end' \
  <<<"$nad_json" 2>/dev/null) || die "the NAD's spec.config is not JSON"
PKEY=$(conf '.pkey // "0x7fff"')
RDMA_ISOLATION=$(conf 'if has("rdmaIsolation") then .rdmaIsolation | tostring else "auto" end')
LOG_FILE=$(conf '.logFile // ""')
LINK_STATE=$(conf '.linkState // "auto"')
[[ $PKEY =~ ^0x[0-9a-fA-F]{1,4}$ ]] || die "the NAD's pkey '$PKEY' is not a 16-bit hex number (0x7fff)"

problems=()
[[ $(conf '.type // ""') == ibcni ]] || problems+=("type is not ibcni")
[[ $(conf '.mode // "sriov"') == sriov ]] || problems+=("mode is not sriov")
[[ $(conf '.capabilities.deviceID // false') == true ]] || problems+=("capabilities.deviceID is not true (Multus will not pass the VF)")
[[ $(conf '.capabilities.infinibandGUID // false') == true ]] || problems+=("capabilities.infinibandGUID is not true (Multus will not pass the GUID)")
if ((${#problems[@]})); then
  fail nad_config "$(IFS=';'; echo "${problems[*]}")"
else
  pass nad_config "type ibcni, mode sriov, pkey $PKEY, rdmaIsolation $RDMA_ISOLATION, linkState $LINK_STATE, log ${LOG_FILE:-stderr}"
fi
IPS_CAP=$(conf '.capabilities.ips // false')
[[ $IPS_CAP == true ]] || note "the NAD has no capabilities.ips: the IPAM picks the addresses, not --ip-a/--ip-b"
echo "NAD $NAD_NS/$NAD_NAME, resource $RESOURCE, namespace $NS, image $IMAGE, run $RUN"

# --- node helper pods (hostNetwork: they see the node's host network and RDMA namespace) ---------

declare -A HELPER HELPER_ERR SNAPSHOT PREFLIGHTED

# node_image_check NODE: the node's architecture (amd64, or arm64 on Grace nodes: GH200, GB200,
# GB300) and, where ibcni's DaemonSet runs on it, that the image the node pulled from the manifest
# list is its own platform's: the image's ibcni runs there.
node_image_check() {
  local node=$1 arch pod out
  arch=$(kc get node "$node" -o jsonpath='{.status.nodeInfo.architecture}' 2>/dev/null)
  pod=$(kc get pods -A -l app.kubernetes.io/name=ibcni --field-selector "spec.nodeName=$node" \
    -o jsonpath='{range .items[0]}{.metadata.namespace}/{.metadata.name}{end}' 2>/dev/null)
  if [[ -z $pod ]]; then
    skip "node_ibcni_image_$node" "no ibcni DaemonSet pod (app.kubernetes.io/name=ibcni) on this ${arch:-?} node"
  elif out=$(kc -n "${pod%%/*}" exec "${pod#*/}" -- /opt/ibcni/bin/ibcni version 2>&1); then
    pass "node_ibcni_image_$node" "${arch:-?} node, $pod runs the image's $out"
  else
    fail "node_ibcni_image_$node" "the image's ibcni does not run in $pod on this ${arch:-?} node: ${out//$'\n'/ } (does the image's manifest list hold linux/${arch:-?}? podman manifest inspect / docker buildx imagetools inspect)"
  fi
}

# node_preflight NODE BEFORE: helper pod, RDMA namespace mode and, when BEFORE is 1 (no test pod
# has been created yet), the snapshot of the node's VF table to compare with after the test.
node_preflight() {
  local node=$1 before=$2 out used
  PREFLIGHTED[$node]=1
  node_image_check "$node"
  if ! ensure_helper "$node"; then
    skip "node_rdma_netns_$node" "${HELPER_ERR[$node]}"
    return
  fi
  # shellcheck disable=SC2016 # expanded by the remote shell
  out=$(on_host "$node" 'rdma system show 2>/dev/null || echo "ib_core netns_mode=$(cat /sys/module/ib_core/parameters/netns_mode 2>/dev/null)"')
  if [[ $RDMA_ISOLATION != true ]]; then
    skip "node_rdma_netns_$node" "rdmaIsolation is $RDMA_ISOLATION; node reports: $out"
  elif [[ $out == *"netns exclusive"* || $out == *"netns_mode=N"* || $out == *"netns_mode=0"* ]]; then
    pass "node_rdma_netns_$node" "$out"
  else
    fail "node_rdma_netns_$node" "rdmaIsolation true needs exclusive RDMA netns mode, node reports: ${out:-nothing} (options ib_core netns_mode=0, or rdma system set netns exclusive)"
  fi
  ((before)) || return
  SNAPSHOT[$node]=$(on_host "$node" "$HOST_VF_TABLE" | vf_rows)
  if [[ -z ${SNAPSHOT[$node]} ]]; then
    note "no IPoIB PF with VFs found on $node by the helper; VF before/after comparison unavailable"
    return
  fi
  # A VF that already carries a test GUID is a leftover of an earlier run (or a clash).
  used=$(awk -v a="$(guid_hex "$GUID_A")" -v b="$(guid_hex "$GUID_B")" \
    '$3 == a || $4 == a || $3 == b || $4 == b {print $1 " vf " $2}' <<<"${SNAPSHOT[$node]}" | tr '\n' ' ')
  if [[ -n $used ]]; then
    fail "guids_unused_$node" "a test GUID is already set on ${used% } before the test (leftover of a failed DEL?)"
  else
    pass "guids_unused_$node" "$(wc -l <<<"${SNAPSHOT[$node]}" | tr -d ' ') VFs, none with $GUID_A or $GUID_B"
  fi
}

if [[ -n $NODE_A || -n $NODE_B ]]; then
  for node in $(printf '%s\n' "$NODE_A" "$NODE_B" | sort -u); do
    kc get node "$node" >/dev/null 2>&1 || die "node $node not found"
    node_preflight "$node" 1
  done
fi

# --- test pods ------------------------------------------------------------------------------------

# render_pod NAME NODE GUID IP: the pod template with its placeholders replaced.
render_pod() {
  local name=$1 node=$2 guid=$3 ip=$4 t host=""
  t=$(grep -v '^[[:space:]]*#' "$POD_TEMPLATE") # comments would get substituted too
  if [[ -n $node ]]; then
    host=$(kc get node "$node" -o jsonpath='{.metadata.labels.kubernetes\.io/hostname}' 2>/dev/null)
    [[ -n $host ]] || die "node $node has no kubernetes.io/hostname label"
  else
    # shellcheck disable=SC2016 # the placeholder is literal
    t=$(grep -v 'kubernetes.io/hostname: "${NODE}"' <<<"$t")
  fi
  # shellcheck disable=SC2016 # the placeholders are literal
  {
    t=${t//'${NAME}'/"$name"}
    t=${t//'${RUN}'/"$RUN"}
    t=${t//'${NAD_NAMESPACE}'/"$NAD_NS"}
    t=${t//'${NAD}'/"$NAD_NAME"}
    t=${t//'${GUID}'/"$guid"}
    t=${t//'${IP}'/"$ip"}
    t=${t//'${IMAGE}'/"$IMAGE"}
    t=${t//'${RESOURCE}'/"$RESOURCE"}
    t=${t//'${NODE}'/"$host"}
  }
  # shellcheck disable=SC2016 # a literal "${"
  [[ $t != *'${'* ]] || die "pod template has a placeholder the script does not know"
  printf '%s\n' "$t"
}

declare -A GUID WANT_IP NODE
GUID[$POD_A]=$GUID_A GUID[$POD_B]=$GUID_B WANT_IP[$POD_A]=$IP_A WANT_IP[$POD_B]=$IP_B
NODE[$POD_A]=$NODE_A NODE[$POD_B]=$NODE_B
for p in "$POD_A" "$POD_B"; do
  manifest=$(render_pod "$p" "${NODE[$p]}" "${GUID[$p]}" "${WANT_IP[$p]}") || exit 2
  out=$(kc -n "$NS" apply -f - <<<"$manifest" 2>&1) || die "creating pod $p failed: $out"
done

ready=1
for p in "$POD_A" "$POD_B"; do
  if kc -n "$NS" wait --for=condition=Ready "pod/$p" --timeout="${TIMEOUT}s" >/dev/null 2>&1; then
    NODE[$p]=$(kc -n "$NS" get pod "$p" -o jsonpath='{.spec.nodeName}')
    pass "pod_ready_$p" "on node ${NODE[$p]}, GUID ${GUID[$p]}"
  else
    ready=0
    NODE[$p]=$(kc -n "$NS" get pod "$p" -o jsonpath='{.spec.nodeName}' 2>/dev/null)
    fail "pod_ready_$p" "not Ready within ${TIMEOUT}s on node ${NODE[$p]:-<not scheduled>}; last events:"
    kc -n "$NS" get events --field-selector "involvedObject.name=$p" --sort-by=.lastTimestamp 2>/dev/null \
      | tail -n 8 | sed 's/^/     /'
    [[ -n ${NODE[$p]} ]] && ensure_helper "${NODE[$p]}"
  fi
done
((ready)) || finish

if [[ ${NODE[$POD_A]} == "${NODE[$POD_B]}" ]]; then
  note "both pods run on ${NODE[$POD_A]}: traffic does not leave the HCA; use --node-a/--node-b on two nodes to cross the fabric"
fi
for p in "$POD_A" "$POD_B"; do
  [[ -n ${PREFLIGHTED[${NODE[$p]}]:-} ]] && continue
  note "node ${NODE[$p]} was not given with --node-a/--node-b: no VF snapshot from before the test"
  node_preflight "${NODE[$p]}" 0
done

# --- Multus network-status ------------------------------------------------------------------------

declare -A IPADDR PCI DI_RDMA
for p in "$POD_A" "$POD_B"; do
  ann=$(kc -n "$NS" get pod "$p" -o json | jq -r '.metadata.annotations["k8s.v1.cni.cncf.io/network-status"]
          // .metadata.annotations["k8s.v1.cni.cncf.io/networks-status"] // ""')
  entry=$(jq -c --arg a "$NAD_NS/$NAD_NAME" --arg b "$NAD_NAME" \
    '[.[] | select(.name == $a or .name == $b)][0] // empty' <<<"$ann" 2>/dev/null)
  if [[ -z $entry ]]; then
    fail "network_status_$p" "no entry for $NAD_NS/$NAD_NAME in the network-status annotation: ${ann:-<none>}"
    continue
  fi
  ifname=$(jq -r '.interface // ""' <<<"$entry")
  IPADDR[$p]=$(jq -r '[.ips[]? | select(test("^[0-9.]+$"))][0] // ""' <<<"$entry")
  PCI[$p]=$(jq -r '.["device-info"].pci["pci-address"] // ""' <<<"$entry")
  DI_RDMA[$p]=$(jq -r '.["device-info"].pci["rdma-device"] // ""' <<<"$entry")
  if [[ $ifname != "$IFN" || -z ${IPADDR[$p]} ]]; then
    fail "network_status_$p" "expected interface $IFN with an IPv4 address: $entry"
  elif [[ $IPS_CAP == true && ${IPADDR[$p]} != "${WANT_IP[$p]%/*}" ]]; then
    fail "network_status_$p" "got ${IPADDR[$p]}, requested ${WANT_IP[$p]} (the NAD's IPAM range must contain --ip-a/--ip-b)"
  else
    pass "network_status_$p" "$ifname ${IPADDR[$p]} pci=${PCI[$p]:-<no device-info>}"
  fi
done
if [[ -n ${IPADDR[$POD_A]:-} && ${IPADDR[$POD_A]} == "${IPADDR[$POD_B]:-}" ]]; then
  fail ip_distinct "both pods got ${IPADDR[$POD_A]}: node-local IPAM on two nodes; enable capabilities.ips in the NAD or give per-node ranges"
fi

# --- inside each pod ------------------------------------------------------------------------------

# Facts about net1 and the RDMA devices the pod sees, as key=value lines.
# shellcheck disable=SC2016 # expanded by the remote shell
POD_PROBE='
ifn=$1 d=/sys/class/net/$1
printf "tools="; for t in ibv_devinfo ib_write_bw ping ip timeout; do command -v $t >/dev/null 2>&1 && printf "%s " $t; done; echo
if [ -e "$d" ]; then
  echo "if_type=$(cat $d/type)"
  echo "if_flags=$(cat $d/flags)"
  echo "if_addr=$(cat $d/address)"
  echo "if_mtu=$(cat $d/mtu)"
  [ -e $d/device ] && echo "if_pci=$(basename "$(readlink -f $d/device)")"
  command -v ip >/dev/null 2>&1 && echo "if_ipv4=$(ip -o -4 addr show dev "$ifn" | tr "\n" " ")"
  dev=$(ls $d/device/infiniband 2>/dev/null | head -n 1)
fi
echo "ib_devs=$(ls /sys/class/infiniband 2>/dev/null | tr "\n" " ")"
[ -n "${dev:-}" ] || dev=$(ls /sys/class/infiniband 2>/dev/null | head -n 1)
echo "dev=$dev"
[ -n "$dev" ] || exit 0
p=/sys/class/infiniband/$dev/ports/1
echo "node_guid=$(cat /sys/class/infiniband/$dev/node_guid)"
echo "port_state=$(cat $p/state)"
echo "port_phys=$(cat $p/phys_state)"
echo "port_layer=$(cat $p/link_layer)"
echo "port_lid=$(cat $p/lid)"
echo "port_sm_lid=$(cat $p/sm_lid)"
echo "port_gid0=$(cat $p/gids/0)"
echo "pkeys=$(cat $p/pkeys/* 2>/dev/null | grep -v "^0x0000$" | sort -u | tr "\n" " ")"
echo "uverbs=$(ls /dev/infiniband 2>/dev/null | tr "\n" " ")"'

# fact POD KEY: a value from the pod's probe.
declare -A FACTS DEV
# last8 TEXT: the last 8 bytes (16 hex digits) of a ':'-separated hex string.
last8() { local h; h=$(guid_hex "$1"); echo "${h: -16}"; }
trim_list() { local -a a; read -r -a a <<<"$1"; echo "${#a[@]}"; }

for p in "$POD_A" "$POD_B"; do
  FACTS[$p]=$(kc -n "$NS" exec "$p" -- sh -c "$POD_PROBE" sh "$IFN" 2>&1 | tr -d '\r')
  want=$(guid_hex "${GUID[$p]}")
  DEV[$p]=$(fact "$p" dev)
  [[ -z ${PCI[$p]:-} ]] && PCI[$p]=$(fact "$p" if_pci)

  tools=$(fact "$p" tools)
  missing=""
  for t in ibv_devinfo ib_write_bw ping; do [[ " $tools " == *" $t "* ]] || missing+=" $t"; done
  if [[ -z $missing ]]; then pass "tools_$p" "$tools"; else fail "tools_$p" "image $IMAGE lacks:$missing"; fi

  # net1 is the VF's IPoIB netdev, up, with the address from network-status.
  type=$(fact "$p" if_type) flags=$(fact "$p" if_flags) ipv4=$(fact "$p" if_ipv4)
  if [[ -z $type ]]; then
    fail "net1_ipoib_$p" "$IFN does not exist in the pod: $(head -n 3 <<<"${FACTS[$p]}" | tr '\n' ' ')"
  elif [[ $type != 32 ]]; then
    fail "net1_ipoib_$p" "$IFN has ARPHRD type $type, not 32 (link/infiniband)"
  elif (((flags & 1) == 0)); then
    fail "net1_ipoib_$p" "$IFN is not up (flags $flags)"
  elif [[ " $tools " == *" ip "* && -n ${IPADDR[$p]:-} && $ipv4 != *" ${IPADDR[$p]}/"* ]]; then
    fail "net1_ipoib_$p" "$IFN lacks ${IPADDR[$p]}: $ipv4"
  else
    pass "net1_ipoib_$p" "link/infiniband, up, mtu $(fact "$p" if_mtu), pci $(fact "$p" if_pci)"
  fi

  # The IPoIB hardware address is QPN(4) + GID(16); the GID's last 8 bytes are the port GUID.
  addr=$(fact "$p" if_addr)
  if [[ -z $addr ]]; then
    fail "net1_guid_$p" "no hardware address for $IFN"
  elif [[ $(last8 "$addr") == "$want" ]]; then
    pass "net1_guid_$p" "$addr ends with ${GUID[$p]}"
  else
    fail "net1_guid_$p" "$addr does not end with ${GUID[$p]} (GUID not set, or the VF was not rebound after setting it)"
  fi

  # Isolation: the pod's netns holds the VF's RDMA device and nothing else.
  devs=$(fact "$p" ib_devs)
  ndevs=$(trim_list "$devs")
  if [[ -z ${DEV[$p]} ]]; then
    fail "rdma_isolation_$p" "no RDMA device visible in the pod (/sys/class/infiniband empty)"
  elif ((ndevs == 1)); then
    pass "rdma_isolation_$p" "only ${DEV[$p]} visible"
  elif [[ $RDMA_ISOLATION == true ]]; then
    fail "rdma_isolation_$p" "$ndevs RDMA devices visible ($devs): the node's RDMA subsystem is in shared mode or the device was not moved"
  else
    skip "rdma_isolation_$p" "rdmaIsolation is $RDMA_ISOLATION and $ndevs devices are visible ($devs)"
  fi

  if [[ -z ${DEV[$p]} ]]; then
    for c in rdma_guid rdma_port verbs pkey; do skip "${c}_$p" "no RDMA device in the pod"; done
    continue
  fi
  d=${DEV[$p]}

  # network-status names the RDMA device behind net1 (device-info: the device plugin's file, or the
  # one ibcni writes when there is none, capabilities.CNIDeviceInfoFile): what a pod reads to set
  # NCCL_IB_HCA. The NAD's verbsCheck "require" made the pod's ADD prove that device usable.
  if [[ -z ${DI_RDMA[$p]:-} ]]; then
    fail "device_info_$p" "network-status has no device-info.pci.rdma-device for $IFN (the NAD must declare capabilities.CNIDeviceInfoFile; Multus 4+ passes runtimeConfig.CNIDeviceInfoFile)"
  elif [[ ${DI_RDMA[$p]} != "$d" ]]; then
    fail "device_info_$p" "network-status says rdma-device ${DI_RDMA[$p]}, the pod sees $d"
  elif [[ -n $(fact "$p" if_pci) && ${PCI[$p]} != "$(fact "$p" if_pci)" ]]; then
    fail "device_info_$p" "network-status says pci-address ${PCI[$p]}, $IFN's PCI function is $(fact "$p" if_pci)"
  else
    pass "device_info_$p" "rdma-device $d, pci-address ${PCI[$p]}"
  fi

  # The RDMA device's node GUID and GID[0] (port GUID) are the requested GUID.
  ng=$(guid_hex "$(fact "$p" node_guid)") gid0=$(fact "$p" port_gid0)
  if [[ $ng == "$want" && $(last8 "$gid0") == "$want" ]]; then
    pass "rdma_guid_$p" "$d node_guid $(fact "$p" node_guid), gid[0] $gid0"
  else
    fail "rdma_guid_$p" "$d node_guid $(fact "$p" node_guid), gid[0] ${gid0:-?}; want ${GUID[$p]}"
  fi

  # The port is ACTIVE: the SM saw the (virtual) port, gave it a LID, and the SM has a LID.
  state=$(fact "$p" port_state) phys=$(fact "$p" port_phys) layer=$(fact "$p" port_layer)
  lid=$(fact "$p" port_lid) smlid=$(fact "$p" port_sm_lid)
  desc="$d port 1: $state, $phys, $layer, lid $lid, sm_lid $smlid"
  if [[ $layer != InfiniBand ]]; then
    fail "rdma_port_$p" "$desc: link layer is not InfiniBand"
  elif [[ $state != *ACTIVE* ]]; then
    fail "rdma_port_$p" "$desc: not ACTIVE (INIT: the SM did not configure the port - virtualization off in the SM, or GUID not accepted; DOWN: link/linkState)"
  elif [[ ! $lid =~ ^0x[0-9a-fA-F]+$ || ! $smlid =~ ^0x[0-9a-fA-F]+$ ]] || ((lid == 0 || smlid == 0)); then
    fail "rdma_port_$p" "$desc: LID or SM LID is zero (no subnet manager?)"
  else
    pass "rdma_port_$p" "$desc"
  fi

  # User space can open the device (device plugin mounted /dev/infiniband, isRdma: true).
  out=$(kc -n "$NS" exec "$p" -- ibv_devinfo -d "$d" -i 1 2>&1 | tr -d '\r')
  plid=$(awk '$1 == "port_lid:" {print $2; exit}' <<<"$out")
  psm=$(awk '$1 == "sm_lid:" {print $2; exit}' <<<"$out")
  if [[ $out != *PORT_ACTIVE* ]]; then
    fail "verbs_$p" "ibv_devinfo -d $d: no PORT_ACTIVE (/dev/infiniband in pod: $(fact "$p" uverbs)): $(head -n 3 <<<"$out" | tr '\n' ' ')"
  elif [[ ! $plid =~ ^[0-9]+$ || ! $psm =~ ^[0-9]+$ ]] || ((plid == 0 || psm == 0)); then
    fail "verbs_$p" "ibv_devinfo -d $d: port_lid '${plid}', sm_lid '${psm}' (must be non-zero)"
  else
    pass "verbs_$p" "ibv_devinfo -d $d: PORT_ACTIVE, port_lid $plid, sm_lid $psm"
  fi

  # The configured partition is in the VF's pkey table (full or limited membership).
  pkeys=$(fact "$p" pkeys) found=""
  for k in $pkeys; do
    [[ $k =~ ^0x[0-9a-fA-F]+$ ]] && (((k & 0x7fff) == (PKEY & 0x7fff))) && found=$k
  done
  if [[ -n $found ]]; then
    pass "pkey_$p" "$found in the pkey table ($( ((found & 0x8000)) && echo full || echo limited) member)"
  else
    fail "pkey_$p" "pkey $PKEY not in the pkey table of $d (${pkeys:-empty}): add it to the SM's partitions for this GUID"
  fi
done

# --- traffic between the pods ---------------------------------------------------------------------

for pair in "$POD_A:$POD_B" "$POD_B:$POD_A"; do
  src=${pair%%:*} dst=${pair#*:}
  if [[ -z ${IPADDR[$dst]:-} ]]; then
    skip "ping_${src}_to_$dst" "address of $dst unknown (see network_status)"
    continue
  fi
  if out=$(kc -n "$NS" exec "$src" -- ping -c 3 -W 3 -I "$IFN" "${IPADDR[$dst]}" 2>&1); then
    pass "ping_${src}_to_$dst" "$(grep -E 'packet loss' <<<"$out")"
  else
    fail "ping_${src}_to_$dst" "$(tail -n 2 <<<"$out" | tr '\n' ' ')"
  fi
done

# ib_write_bw: server in pod A, client in pod B; the out-of-band exchange (QP numbers, LIDs) goes
# over TCP to A's net1 address, the measurement is RDMA writes between the two VFs.
if [[ -z ${DEV[$POD_A]:-} || -z ${DEV[$POD_B]:-} || -z ${IPADDR[$POD_A]:-} ]]; then
  skip rdma_write_bw "RDMA device or address unknown (see the checks above)"
else
  # shellcheck disable=SC2016 # expanded by the remote shell
  bounded='if command -v timeout >/dev/null 2>&1; then exec timeout 60 "$@"; else exec "$@"; fi'
  kc -n "$NS" exec "$POD_A" -- sh -c "$bounded" sh \
    ib_write_bw -d "${DEV[$POD_A]}" -F --report_gbits -D 5 >"$TMP/bw-server.log" 2>&1 &
  BW_SERVER_PID=$!
  sleep 3
  for attempt in 1 2 3; do
    out=$(kc -n "$NS" exec "$POD_B" -- sh -c "$bounded" sh \
      ib_write_bw -d "${DEV[$POD_B]}" -F --report_gbits -D 5 "${IPADDR[$POD_A]}" 2>&1) && break
    ((attempt < 3)) && sleep 3
  done
  for ((i = 0; i < 30; i++)); do kill -0 "$BW_SERVER_PID" 2>/dev/null || break; sleep 1; done
  kill "$BW_SERVER_PID" 2>/dev/null
  BW_SERVER_PID=""
  bw=$(awk '/BW average/ {h = 1; next} h && $1 ~ /^[0-9]+$/ && NF >= 4 {print $4; exit}' <<<"$out")
  if [[ -z $bw ]]; then
    fail rdma_write_bw "no result from ib_write_bw $POD_B -> ${IPADDR[$POD_A]}: $(tail -n 4 <<<"$out" | tr '\n' ' ')"
    note "server side: $(tail -n 4 "$TMP/bw-server.log" | tr '\n' ' ')"
  elif awk -v a="$bw" -v m="$MIN_BW" 'BEGIN { exit !(a + 0 > m + 0) }'; then
    pass rdma_write_bw "$POD_B -> $POD_A: BW average $bw Gb/s (65536-byte writes, 5 s)"
  else
    fail rdma_write_bw "BW average $bw Gb/s, not above $MIN_BW Gb/s"
  fi
fi

# --- teardown: everything back on the host --------------------------------------------------------

delete_test_pods "VF return"

for p in "$POD_A" "$POD_B"; do
  node=${NODE[$p]} pci=${PCI[$p]:-} want=$(guid_hex "${GUID[$p]}")
  if [[ -z $pci ]]; then
    for c in vf_netdev_returned vf_rdma_returned vf_guid_restored; do
      skip "${c}_$p" "VF PCI address unknown (no device-info in network-status, no netdev in the pod)"
    done
    continue
  fi
  if ! ensure_helper "$node"; then
    for c in vf_netdev_returned vf_rdma_returned vf_guid_restored; do
      skip "${c}_$p" "${HELPER_ERR[$node]}; on $node check /sys/bus/pci/devices/$pci/{net,infiniband}/ and 'ip link show <PF>'"
    done
    continue
  fi
  # kubelet runs CNI DEL asynchronously: poll until the VF is complete again or the timeout.
  deadline=$((SECONDS + TIMEOUT))
  while :; do
    h=$(on_host "$node" "$HOST_VF_PROBE" "$pci")
    [[ -n $(hfact "$h" netdev) && -n $(hfact "$h" ibdev) ]] && break
    ((SECONDS >= deadline)) && break
    sleep 3
  done
  nd=$(hfact "$h" netdev) ib=$(hfact "$h" ibdev) pf=$(hfact "$h" pf) idx=$(hfact "$h" vf_index)

  if [[ -z $nd ]]; then
    fail "vf_netdev_returned_$p" "VF $pci on $node has no netdev in the host netns after ${TIMEOUT}s"
  elif [[ $(hfact "$h" netdev_type) != 32 ]]; then
    fail "vf_netdev_returned_$p" "VF $pci is back as $nd but not link/infiniband (type $(hfact "$h" netdev_type))"
  elif [[ $nd == "$IFN" ]]; then
    fail "vf_netdev_returned_$p" "VF $pci is back but still named $IFN (original name not restored)"
  else
    pass "vf_netdev_returned_$p" "VF $pci back on $node as $nd"
  fi

  rd=$(hfact "$h" rdma_dev)
  if [[ -z $ib ]]; then
    fail "vf_rdma_returned_$p" "VF $pci on $node has no RDMA device in the host netns after ${TIMEOUT}s"
  elif [[ -n $rd && $rd != *"$ib"* ]]; then
    fail "vf_rdma_returned_$p" "$ib is in sysfs but 'rdma dev show $ib' says: $rd"
  else
    pass "vf_rdma_returned_$p" "$ib in the host${rd:+ (rdma dev: $rd)}"
  fi

  # GUIDs: the requested GUID is on no VF of the PF any more, this VF's GUIDs and link state are
  # the ones from before the test (when a snapshot exists), and the host's RDMA device no longer
  # runs with the pod's GUID (the VF was rebound after the GUID was restored).
  rows=$(vf_rows <<<"$(sed -n '/^== /,$p' <<<"$h")")
  mine=$(awk -v i="$idx" '$2 == i' <<<"$rows")
  before=$(awk -v pf="$pf" -v i="$idx" '$1 == pf && $2 == i' <<<"${SNAPSHOT[$node]:-}")
  problems=()
  [[ -n $pf && -n $idx ]] || problems+=("PF or VF index of $pci not found")
  [[ -z $rows ]] && problems+=("'ip link show dev ${pf:-?}' printed no VF lines")
  holders=$(awk -v g="$want" '$3 == g || $4 == g {print "vf " $2}' <<<"$rows" | tr '\n' ' ')
  [[ -n $holders ]] && problems+=("${GUID[$p]} still set on $pf ${holders% }")
  [[ $(guid_hex "$(hfact "$h" ib_node_guid)") == "$want" ]] \
    && problems+=("host RDMA device $ib still has node_guid ${GUID[$p]} (VF not rebound after the GUID was restored?)")
  if [[ -n $before && -n $mine && $before != "$mine" ]]; then
    problems+=("vf $idx was '$before', is '$mine' (PF VF NODE_GUID PORT_GUID link-state)")
  fi
  if ((${#problems[@]})); then
    fail "vf_guid_restored_$p" "$(IFS=';'; echo "${problems[*]}")"
  elif [[ -n $before ]]; then
    pass "vf_guid_restored_$p" "$pf vf $idx as before the test: $mine"
  else
    pass "vf_guid_restored_$p" "${GUID[$p]} on no VF of $pf; vf $idx now: ${mine:-?} (no before-snapshot: give --node-a/--node-b)"
  fi
done

finish
