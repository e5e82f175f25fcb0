#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Hardware validation of sriov mode's GUID pool (guidPool) on a real InfiniBand Kubernetes cluster
# (Multus + SR-IOV network device plugin + mlx5 IB VFs + a subnet manager with virtualization).
#
# It applies manifests/nad-ib-sriov-guidpool.yaml, starts two pods from manifests/pod-template.yaml
# (without the GUID request: each VF gets its GUID from the pool), and checks that the two VFs got
# distinct GUIDs of the pool's range, that ibstat (or ibv_devinfo) in each pod shows that GUID as
# the port GUID with the port ACTIVE (the subnet manager admitted it), that `ibcni pools CONFIG
# --json` on each pod's node has a row holding it, and, after deleting the pods, that the VFs'
# GUIDs are back as before and `ibcni pools` holds neither GUID any more.
#
# See README.md next to this file. Output: PASS/FAIL/SKIP lines, then "N passed, M failed".
# Exit 0 if nothing failed, 1 if a check failed, 2 on a usage or setup error.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAD_MANIFEST=$HERE/manifests/nad-ib-sriov-guidpool.yaml
POD_TEMPLATE=$HERE/manifests/pod-template.yaml
HELPER_POD_PREFIX=ibcni-hw-guid
# shellcheck source=e2e/lib/hw-validate.sh
. "$HERE/../lib/hw-validate.sh"

usage() {
  cat <<'EOF'
Usage: validate-sriov-guid-pool.sh --node-a NODE --node-b NODE [options]

      --node-a NODE       node of the first pod (required)
      --node-b NODE       node of the second pod (required; another node than --node-a)
  -n, --nad NAME          NetworkAttachmentDefinition, NAME or NAMESPACE/NAME (default: ib-sriov-guidpool-hw)
      --no-nad-apply      do not apply manifests/nad-ib-sriov-guidpool.yaml; validate the existing NAD
  -r, --resource NAME     IB VF resource of the SR-IOV device plugin (default: the NAD's annotation)
  -N, --namespace NS      namespace of the test and helper pods (default: default)
  -i, --image IMAGE       test image with sh, sleep, ibstat or ibv_devinfo
                          (default: docker.io/mellanox/rping-test:latest)
      --host-image IMAGE  node helper image with sh, ip (default: docker.io/nicolaka/netshoot:latest)
      --cni-bin-dir DIR   the nodes' CNI binary directory, where ibcni is (default: /opt/cni/bin)
      --ip-a CIDR         address requested for the first pod  (default: 192.168.101.201/24)
      --ip-b CIDR         address requested for the second pod (default: 192.168.101.202/24)
  -t, --timeout SECONDS   wait for pods, deletion and the GUIDs' release (default: 180)
      --keep              leave the test pods (and the NAD) for debugging; no teardown checks
      --kubectl CMD       kubectl to use (default: kubectl; e.g. "oc")
  -h, --help
EOF
}

die() { echo "validate-sriov-guid-pool: $*" >&2; exit 2; }

NAD=ib-sriov-guidpool-hw NAD_APPLY=1 RESOURCE="" NS=default IMAGE=docker.io/mellanox/rping-test:latest
HOST_IMAGE=docker.io/nicolaka/netshoot:latest NODE_A="" NODE_B="" CNI_BIN_DIR=/opt/cni/bin
IP_A=192.168.101.201/24 IP_B=192.168.101.202/24 TIMEOUT=180 KEEP=0 KUBECTL=kubectl
IFN=net1 # the interface name the pod template asks Multus for

while (($#)); do
  common_opt "$@" && { shift "$OPT_TAKEN"; continue; }
  case $1 in
    -r | --resource) RESOURCE=${2-}; shift ;;
    --cni-bin-dir) CNI_BIN_DIR=${2-}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

[[ -n $NODE_A && -n $NODE_B && $NODE_A != "$NODE_B" ]] || die "give two different nodes: --node-a and --node-b"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout must be a number of seconds"
[[ $CNI_BIN_DIR =~ ^/[A-Za-z0-9._/-]*$ ]] || die "--cni-bin-dir must be an absolute path"
[[ -z $RESOURCE || $RESOURCE =~ ^[A-Za-z0-9.-]+/[A-Za-z0-9._-]+$ ]] || die "--resource '$RESOURCE': expected DOMAIN/NAME"
check_common_args 192.168.101.201/24

start_run ibcni-guid
LOG_FILE=""
declare -A HELPER HELPER_ERR SNAPSHOT FACTS GUID NODE WANT_IP PCI

trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# --- the NetworkAttachmentDefinition and its guidPool ---------------------------------------------

NADS=network-attachment-definitions.k8s.cni.cncf.io
if ((NAD_APPLY)); then
  existing=$(kc -n "$NAD_NS" get "$NADS" "$NAD_NAME" -o json 2>/dev/null)
  [[ -z $existing || $(jq -r '.metadata.labels["app.kubernetes.io/created-by"] // ""' <<<"$existing") == "$CREATED_BY" ]] \
    || die "NAD $NAD_NS/$NAD_NAME exists and was not created by this kit; validate it with --no-nad-apply or choose another --nad"
  manifest=$(kc create --dry-run=client -o json -f "$NAD_MANIFEST" 2>&1) \
    || die "cannot read $NAD_MANIFEST (is the NetworkAttachmentDefinition CRD, i.e. Multus, installed?): $manifest"
  manifest=$(jq --arg n "$NAD_NAME" --arg ns "$NAD_NS" --arg r "$RESOURCE" '
      .metadata.name = $n | .metadata.namespace = $ns
      | if $r == "" then . else .metadata.annotations["k8s.v1.cni.cncf.io/resourceName"] = $r end
      | .spec.config |= (fromjson | .name = $n | tojson)' <<<"$manifest") || die "cannot adapt $NAD_MANIFEST"
  out=$(kc apply -f - <<<"$manifest" 2>&1) || die "applying the NAD failed: $out"
  [[ -z $existing ]] && NAD_CREATED=1
  pass nad_applied "$NAD_NS/$NAD_NAME from manifests/nad-ib-sriov-guidpool.yaml"
fi
nad_json=$(kc -n "$NAD_NS" get "$NADS" "$NAD_NAME" -o json 2>&1) || die "cannot read NAD $NAD_NS/$NAD_NAME: $nad_json"
[[ -n $RESOURCE ]] || RESOURCE=$(jq -r '.metadata.annotations["k8s.v1.cni.cncf.io/resourceName"] // ""' <<<"$nad_json")
[[ -n $RESOURCE ]] || die "--resource not given and the NAD has no k8s.v1.cni.cncf.io/resourceName annotation"
# The whole network config (what `ibcni pools` reads), and its ibcni plugin object.
NETCONF=$(jq -c '.spec.config // "{}" | fromjson' <<<"$nad_json" 2>/dev/null) || die "the NAD's spec.config is not JSON"
CONF=$(jq -c 'if has("plugins") then ([.plugins[] | select(.type == "ibcni")][0] // {}) else . end' <<<"$NETCONF")
LOG_FILE=$(conf '.logFile // ""')
RANGE=$(conf '.guidPool.range // ""')
RANGE_LO=$(guid_hex "${RANGE%%-*}") RANGE_HI=$(guid_hex "${RANGE#*-}")

problems=()
[[ $(conf '.type // ""') == ibcni ]] || problems+=("type is not ibcni")
[[ $(conf '.mode // "sriov"') == sriov ]] || problems+=("mode is not sriov")
[[ $(conf '.capabilities.deviceID // false') == true ]] || problems+=("capabilities.deviceID is not true (Multus will not pass the VF)")
[[ $RANGE_LO =~ ^[0-9a-f]{16}$ && $RANGE_HI =~ ^[0-9a-f]{16}$ ]] || problems+=("no guidPool.range of two GUIDs")
[[ $(conf '.guidPool.cluster | type') == object ]] || problems+=("guidPool has no cluster object: a node-local pool gives two nodes the same GUIDs")
if ((${#problems[@]})); then
  fail nad_config "$(IFS=';'; echo "${problems[*]}")"
  finish
fi
pass nad_config "guidPool $(conf '.guidPool.pool // "(the network name)"') range $RANGE, blocks of $(conf '.guidPool.blockSize // 256'), assign $(conf '.guidPool.assign // "when-unset"'), backend $(conf '.guidPool.cluster.backend // "kubernetes"'), pkey $(conf '.pkey // "none"')"
echo "NAD $NAD_NS/$NAD_NAME, resource $RESOURCE, namespace $NS, image $IMAGE, run $RUN"

# in_range HEX: whether the 16 hex digits HEX lie in the pool's range (fixed width: text order).
in_range() { [[ ! $1 < $RANGE_LO && ! $1 > $RANGE_HI ]]; }
# no_guid HEX: all ones is how a VF without a GUID reads after a DEL; compare it as all zeros.
no_guid() { sed 's/ffffffffffffffff/0000000000000000/g'; }

# pools NODE: `ibcni pools CONFIG --json` as run on NODE, in the node's mount and network namespaces
# through ibcni's DaemonSet pod there (hostPID, as its reconcile agent), the config in a temporary
# file of the node; nothing on stdout when it cannot run, the reason on stderr.
pools() {
  local node=$1 pod out
  pod=$(kc get pods -A -l app.kubernetes.io/name=ibcni --field-selector "spec.nodeName=$node" \
    -o jsonpath='{range .items[0]}{.metadata.namespace}/{.metadata.name}{end}' 2>/dev/null)
  if [[ -z $pod ]]; then
    echo "no ibcni DaemonSet pod (app.kubernetes.io/name=ibcni) on $node; on the node: $CNI_BIN_DIR/ibcni pools CONFIG --json" >&2
    return
  fi
  # shellcheck disable=SC2016 # expanded by the node's shell
  if ! out=$(kc -n "${pod%%/*}" exec -i "${pod#*/}" -- nsenter --target 1 --mount --net -- sh -c \
    'f=$(mktemp) && cat >"$f" && "$1/ibcni" pools "$f" --json; rc=$?; rm -f "$f"; exit $rc' sh "$CNI_BIN_DIR" \
    <<<"$NETCONF" 2>&1) || ! jq -e . >/dev/null 2>&1 <<<"$out"; then
    echo "ibcni pools in $pod failed: $(head -c 400 <<<"$out" | tr '\n' ' ')" >&2
    return
  fi
  printf '%s\n' "$out"
}

# holder_rows GUIDHEX: the rows (objects) of `ibcni pools --json` on stdin with a value that is the GUID.
holder_rows() {
  jq -c --arg g "$1" '[.. | objects | select(any(.[]; type == "string" and (ascii_downcase | gsub(":"; "")) == $g))]'
}

# --- before: each node's VF table ------------------------------------------------------------------

for node in "$NODE_A" "$NODE_B"; do
  kc get node "$node" >/dev/null 2>&1 || die "node $node not found"
  if ! ensure_helper "$node"; then
    note "no VF snapshot of $node: ${HELPER_ERR[$node]}"
    continue
  fi
  SNAPSHOT[$node]=$(on_host "$node" "$HOST_VF_TABLE" | vf_rows)
  used=$(awk '{print $4}' <<<"${SNAPSHOT[$node]}" | while read -r g; do in_range "$g" && echo "$g"; done | tr '\n' ' ')
  if [[ -z ${SNAPSHOT[$node]} ]]; then
    note "no IPoIB PF with VFs found on $node by the helper; VF before/after comparison unavailable"
  elif [[ -n $used ]]; then
    note "VFs on $node carry GUIDs of the pool's range before the test ($used): left by another run, or in use"
  fi
done

# --- the two pods: no GUID requested -----------------------------------------------------------------

# render_pod NAME NODE IP: the pod template without the GUID request, placeholders replaced.
render_pod() {
  local name=$1 node=$2 ip=$3 t host
  host=$(kc get node "$node" -o jsonpath='{.metadata.labels.kubernetes\.io/hostname}' 2>/dev/null)
  [[ -n $host ]] || die "node $node has no kubernetes.io/hostname label"
  t=$(grep -v '^[[:space:]]*#' "$POD_TEMPLATE")
  # shellcheck disable=SC2016 # the placeholder is literal
  t=${t//'"infiniband-guid": "${GUID}", '/}
  fill_placeholders "$t" NAME "$name" RUN "$RUN" NAD_NAMESPACE "$NAD_NS" NAD "$NAD_NAME" IP "$ip" IMAGE "$IMAGE" \
    RESOURCE "$RESOURCE" NODE "$host" \
    || die "pod template has a placeholder the script does not know (or a GUID request it cannot drop)"
}

NODE[$POD_A]=$NODE_A NODE[$POD_B]=$NODE_B WANT_IP[$POD_A]=$IP_A WANT_IP[$POD_B]=$IP_B
for p in "$POD_A" "$POD_B"; do
  kc -n "$NS" apply -f - >"$TMP/apply.out" 2>&1 <<<"$(render_pod "$p" "${NODE[$p]}" "${WANT_IP[$p]}")" \
    || die "creating pod $p failed: $(cat "$TMP/apply.out")"
done
all_ready=1
for p in "$POD_A" "$POD_B"; do
  kc -n "$NS" wait --for=condition=Ready "pod/$p" --timeout="${TIMEOUT}s" >/dev/null 2>&1 \
    && { pass "pod_ready_$p" "on node ${NODE[$p]}, no GUID requested"; continue; }
  all_ready=0
  fail "pod_ready_$p" "not Ready within ${TIMEOUT}s; last events (error 108: the pool is full; 11: backend unreachable; 7 naming the pkey: the SM has not admitted the pool GUID):"
  kc -n "$NS" get events --field-selector "involvedObject.name=$p" --sort-by=.lastTimestamp 2>/dev/null \
    | tail -n 8 | sed 's/^/     /'
  ensure_helper "${NODE[$p]}"
done
((all_ready)) || finish

# --- inside each pod: the port GUID and its state ------------------------------------------------

# Facts about net1's RDMA device and port 1, as key=value lines: ibstat's, else ibv_devinfo's, and sysfs.
# shellcheck disable=SC2016 # expanded by the pod's shell
POD_PROBE='
d=/sys/class/net/$1
[ -e $d/device ] && echo "pci=$(basename "$(readlink -f $d/device)")"
dev=$(ls $d/device/infiniband 2>/dev/null | head -n 1)
[ -n "$dev" ] || dev=$(ls /sys/class/infiniband 2>/dev/null | head -n 1)
echo "dev=$dev"
[ -n "$dev" ] || exit 0
echo "node_guid=$(cat /sys/class/infiniband/$dev/node_guid)"
echo "gid0=$(cat /sys/class/infiniband/$dev/ports/1/gids/0)"
echo "pkeys=$(cat /sys/class/infiniband/$dev/ports/1/pkeys/* 2>/dev/null | grep -v "^0x0000$" | sort -u | tr "\n" " ")"
if command -v ibstat >/dev/null 2>&1; then
  ibstat "$dev" 1 | awk -F": *" "/Port GUID/ {print \"tool=ibstat\"; print \"port_guid=\" \$2} /^[[:space:]]*State/ {print \"state=\" \$2}
    /^[[:space:]]*Base lid/ {print \"lid=\" \$2} /^[[:space:]]*SM lid/ {print \"sm_lid=\" \$2}"
elif command -v ibv_devinfo >/dev/null 2>&1; then
  ibv_devinfo -v -d "$dev" -i 1 | awk "/GID\\[ *0\\]:/ {print \"tool=ibv_devinfo\"; print \"port_guid=\" \$NF}
    \$1 == \"state:\" {print \"state=\" \$2} \$1 == \"port_lid:\" {print \"lid=\" \$2} \$1 == \"sm_lid:\" {print \"sm_lid=\" \$2}"
fi'

for p in "$POD_A" "$POD_B"; do
  FACTS[$p]=$(kc -n "$NS" exec "$p" -- sh -c "$POD_PROBE" sh "$IFN" 2>&1 | tr -d '\r')
  PCI[$p]=$(fact "$p" pci)
  dev=$(fact "$p" dev) tool=$(fact "$p" tool)
  port=$(guid_hex "$(fact "$p" port_guid)") port=${port#0x} port=${port: -16}
  [[ -n $tool ]] || { port=$(guid_hex "$(fact "$p" gid0)") port=${port: -16} tool=sysfs; }
  node=$(guid_hex "$(fact "$p" node_guid)")
  GUID[$p]=$port
  if [[ -z $dev ]]; then
    fail "port_guid_$p" "no RDMA device visible in the pod"
    continue
  elif ! in_range "$port"; then
    fail "port_guid_$p" "$dev port GUID ${port:-?} ($tool) is not in the pool's range $RANGE"
  elif [[ $node != "$port" ]]; then
    fail "port_guid_$p" "$dev node GUID $node differs from its port GUID $port: the pool GUID sets both"
  else
    pass "port_guid_$p" "$dev port GUID $port ($tool) = node GUID, in $RANGE"
  fi
  state=$(fact "$p" state) lid=$(fact "$p" lid) smlid=$(fact "$p" sm_lid)
  if [[ $state != *[Aa][Cc][Tt][Ii][Vv][Ee]* || $lid =~ ^(0|0x0+)?$ || $smlid =~ ^(0|0x0+)?$ ]]; then
    fail "port_active_$p" "$dev port 1: state ${state:-?}, lid ${lid:-?}, sm_lid ${smlid:-?}: the SM did not bring the port with GUID $port up (virtualization off in the SM, or the GUID clashes on the fabric)"
  else
    pass "port_active_$p" "$dev port 1: $state, lid $lid, sm_lid $smlid: the SM admitted GUID $port"
  fi
  pkey=$(conf '.pkey // ""')
  if [[ -z $pkey ]]; then
    skip "pkey_$p" "the NAD sets no pkey"
  elif found=$(pkey_member "$pkey" "$(fact "$p" pkeys)"); then
    pass "pkey_$p" "$found in the pkey table of GUID $port: the SM admitted it to the partition"
  else
    fail "pkey_$p" "pkey $pkey not in the pkey table of $dev ($(fact "$p" pkeys)): list GUID $port in the partition (OpenSM partitions.conf: single GUIDs, no ranges; UFM: add it to the PKey)"
  fi
done
if [[ -n ${GUID[$POD_A]} && ${GUID[$POD_A]} == "${GUID[$POD_B]}" ]]; then
  fail guids_distinct "both pods' VFs have GUID ${GUID[$POD_A]}"
else
  pass guids_distinct "${GUID[$POD_A]:-?} on ${NODE[$POD_A]}, ${GUID[$POD_B]:-?} on ${NODE[$POD_B]}"
fi

# --- ibcni pools on each pod's node: a row holds the pod's GUID --------------------------------------

declare -A POOLS_OK
for p in "$POD_A" "$POD_B"; do
  report=$(pools "${NODE[$p]}" 2>"$TMP/pools.err")
  if [[ -z $report ]]; then
    skip "pool_holder_$p" "$(cat "$TMP/pools.err")"
    continue
  fi
  POOLS_OK[${NODE[$p]}]=1
  rows=$(holder_rows "${GUID[$p]}" <<<"$report")
  if [[ $rows == "[]" ]]; then
    fail "pool_holder_$p" "ibcni pools on ${NODE[$p]} has no row holding ${GUID[$p]}"
  else
    pass "pool_holder_$p" "ibcni pools on ${NODE[$p]}: $(head -c 300 <<<"$rows")"
  fi
done

# --- teardown: VF GUIDs restored, the pool holds neither GUID ---------------------------------------

delete_test_pods "GUID release"

for p in "$POD_A" "$POD_B"; do
  node=${NODE[$p]} pci=${PCI[$p]} want=${GUID[$p]}
  if [[ -z $pci || -z $want ]] || ! ensure_helper "$node"; then
    skip "vf_guid_restored_$p" "VF or its GUID unknown, or no helper on $node (${HELPER_ERR[$node]:-}): on $node, ip link show <PF>"
  else
    # kubelet runs CNI DEL asynchronously: poll until the pool GUID is off the VF or the timeout.
    deadline=$((SECONDS + TIMEOUT))
    while :; do
      h=$(on_host "$node" "$HOST_VF_PROBE" "$pci")
      rows=$(vf_rows <<<"$(sed -n '/^== /,$p' <<<"$h")")
      holders=$(awk -v g="$want" '$3 == g || $4 == g {print "vf " $2}' <<<"$rows" | tr '\n' ' ')
      [[ -n $rows && -z $holders ]] && break
      ((SECONDS >= deadline)) && break
      sleep 3
    done
    pf=$(hfact "$h" pf) idx=$(hfact "$h" vf_index)
    mine=$(awk -v i="$idx" '$2 == i' <<<"$rows" | no_guid)
    before=$(awk -v pf="$pf" -v i="$idx" '$1 == pf && $2 == i' <<<"${SNAPSHOT[$node]:-}" | no_guid)
    if [[ -z $rows ]]; then
      fail "vf_guid_restored_$p" "VF $pci on $node: no VF lines for ${pf:-its PF} after ${TIMEOUT}s"
    elif [[ -n $holders ]]; then
      fail "vf_guid_restored_$p" "pool GUID $want still on $pf ${holders% } after ${TIMEOUT}s"
    elif [[ -n $before && $before != "$mine" ]]; then
      fail "vf_guid_restored_$p" "$pf vf $idx was '$before', is '$mine' (PF VF NODE_GUID PORT_GUID link-state; all ones read as zeros)"
    else
      pass "vf_guid_restored_$p" "$pf vf $idx: ${mine:-?}${before:+ (as before the test)}"
    fi
  fi
  if [[ -z ${POOLS_OK[$node]:-} ]]; then
    skip "pool_released_$p" "ibcni pools did not run on $node"
    continue
  fi
  deadline=$((SECONDS + TIMEOUT))
  while :; do
    rows=$(pools "$node" 2>"$TMP/pools.err" | holder_rows "$want")
    [[ $rows == "[]" ]] || ((SECONDS >= deadline)) && break
    sleep 3
  done
  if [[ $rows == "[]" ]]; then
    pass "pool_released_$p" "ibcni pools on $node: no row holds $want"
  elif [[ -z $rows ]]; then
    fail "pool_released_$p" "$(cat "$TMP/pools.err")"
  else
    fail "pool_released_$p" "ibcni pools on $node still holds $want after ${TIMEOUT}s: $(head -c 300 <<<"$rows")"
  fi
done

finish
