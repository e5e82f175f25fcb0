#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Validates ibcni on a real InfiniBand Kubernetes cluster (Multus + SR-IOV device plugin).
# It creates two test pods that request the NetworkAttachmentDefinition and one IB VF each,
# checks Multus's network-status annotation, the IPoIB interface inside each pod, pings between
# the pods over that interface, runs ibv_devinfo if the image has it, deletes the pods and
# checks that each VF's netdev is back in the node's host network namespace. With the ibcni
# DaemonSet's reconcile agent, it also runs the agent's `ibcni reconcile --dry-run` while the pods
# live (it must count their attachments alive) and checks the agent's log for failed passes.
# With --cluster-ipam it also checks ibcni-ipam's cluster mode (kubernetes backend): an IPoIB
# network whose pool is shared by two pods on two nodes; --nad may then be left out.
#
# See README.md next to this file for the parameters and what each check means.
# Output: PASS/FAIL/SKIP lines, then "N passed, M failed". Exit 0 if nothing failed, 1 if a
# check failed, 2 on a usage or setup error.
set -uo pipefail

usage() {
  cat <<'EOF'
Usage: validate-ib-cluster.sh --nad NAME [options]
       validate-ib-cluster.sh --cluster-ipam --node-a NODE --node-b NODE [--nad NAME] [options]

  -n, --nad NAME          NetworkAttachmentDefinition: NAME or NAMESPACE/NAME (required)
  -r, --resource NAME     extended resource of the IB VFs (e.g. nvidia.com/mlnx_ib_vf);
                          default: the NAD's k8s.v1.cni.cncf.io/resourceName annotation
  -N, --namespace NS      namespace of the test pods (default: default)
  -i, --image IMAGE       test image with sh, sleep, ip (iproute2), ping; ibv_devinfo optional
                          (default: docker.io/nicolaka/netshoot:latest)
      --node-a NODE       pin the first pod to NODE   (default: the scheduler decides)
      --node-b NODE       pin the second pod to NODE  (use two nodes to cross the fabric)
      --ifname NAME       ask Multus for this pod interface name (default: Multus's, net1)
      --caps "CAP ..."    capabilities added to the test containers (default: "NET_RAW")
  -t, --timeout SECONDS   wait for pods / deletion / VF return (default: 180)
      --host-check MODE   pod: check VF return with a hostNetwork helper pod per node (default)
                          skip: do not; print the manual check instead
      --keep              leave the test pods running (for debugging); skips the return check
      --agent NS/NAME     the ibcni DaemonSet (reconcile agent) to check; "none" to skip
                          (default: kube-system/ibcni)
      --kubectl CMD       kubectl to use (default: kubectl; e.g. "oc")
  cluster IPAM check (opt-in; needs --node-a and --node-b, two different nodes):
      --cluster-ipam      create an IPoIB NAD with ibcni-ipam's cluster mode (kubernetes backend,
                          blockSize 32) and a pod on each node; check distinct addresses from the
                          one pool, in blocks whose Leases the two nodes hold; then clean up
      --cluster-subnet CIDR   the pool, IPv4 (default: 10.250.0.0/24; must be free on the fabric)
      --cluster-parent P  the IPoIB parent: RDMA_DEVICE:PORT (e.g. mlx5_0:1) or a netdev (ib0)
                          (default: mlx5_0:1)
      --cluster-pkey PKEY the children's partition key (default: the parent's)
      --lease-namespace NS    the Leases' namespace: the chart's clusterIPAM.leaseNamespace
                          (default: kube-system)
  -h, --help
EOF
}

die() { echo "validate-ib-cluster: $*" >&2; exit 2; }

NAD="" RESOURCE="" NS=default IMAGE=docker.io/nicolaka/netshoot:latest NODE_A="" NODE_B=""
IFNAME="" CAPS="NET_RAW" TIMEOUT=180 HOST_CHECK=pod KEEP=0 KUBECTL=kubectl AGENT=kube-system/ibcni
CLUSTER=0 CLUSTER_SUBNET=10.250.0.0/24 CLUSTER_PARENT=mlx5_0:1 CLUSTER_PKEY="" LEASE_NS=kube-system

while (($#)); do
  case $1 in
    -n | --nad) NAD=${2-}; shift ;;
    -r | --resource) RESOURCE=${2-}; shift ;;
    -N | --namespace) NS=${2-}; shift ;;
    -i | --image) IMAGE=${2-}; shift ;;
    --node-a) NODE_A=${2-}; shift ;;
    --node-b) NODE_B=${2-}; shift ;;
    --ifname) IFNAME=${2-}; shift ;;
    --caps) CAPS=${2-}; shift ;;
    -t | --timeout) TIMEOUT=${2-}; shift ;;
    --host-check) HOST_CHECK=${2-}; shift ;;
    --keep) KEEP=1 ;;
    --kubectl) KUBECTL=${2-}; shift ;;
    --agent) AGENT=${2-}; shift ;;
    --cluster-ipam) CLUSTER=1 ;;
    --cluster-subnet) CLUSTER_SUBNET=${2-}; shift ;;
    --cluster-parent) CLUSTER_PARENT=${2-}; shift ;;
    --cluster-pkey) CLUSTER_PKEY=${2-}; shift ;;
    --lease-namespace) LEASE_NS=${2-}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

[[ -n $NAD || $CLUSTER == 1 ]] || { usage >&2; die "--nad is required (or --cluster-ipam)"; }
if ((CLUSTER)); then
  [[ -n $NODE_A && -n $NODE_B && $NODE_A != "$NODE_B" ]] ||
    die "--cluster-ipam needs --node-a and --node-b, two different nodes"
  [[ $CLUSTER_SUBNET =~ ^([0-9]{1,3}\.){3}[0-9]{1,3}/([0-9]|[12][0-9]|3[0-2])$ ]] ||
    die "--cluster-subnet must be an IPv4 CIDR (e.g. 10.250.0.0/24)"
  ((${CLUSTER_SUBNET#*/} <= 26)) || die "--cluster-subnet must hold at least two blocks of 32 (a /26 or larger)"
  [[ $LEASE_NS =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "--lease-namespace must be a namespace name"
fi
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout must be a number of seconds"
[[ $HOST_CHECK == pod || $HOST_CHECK == skip ]] || die "--host-check must be pod or skip"
[[ $AGENT == none || $AGENT == */* ]] || die "--agent must be NAMESPACE/NAME or none"
command -v jq >/dev/null 2>&1 || die "jq is required on this machine"
read -r -a KC <<<"$KUBECTL"
command -v "${KC[0]}" >/dev/null 2>&1 || die "'${KC[0]}' not found"
kc() { "${KC[@]}" "$@"; }

if [[ $NAD == */* ]]; then NAD_NS=${NAD%%/*} NAD_NAME=${NAD#*/}; else NAD_NS=$NS NAD_NAME=$NAD; fi

RUN=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
LABEL=ibcni-validate-run
POD_A=ibcni-val-a-$RUN
POD_B=ibcni-val-b-$RUN
PASSED=0 FAILED=0 SKIPPED=0
CLUSTER_NAD=ibcni-val-cluster-$RUN     # the cluster check's NAD, in $NS
CLUSTER_POOL=ibcni-val-$RUN            # its pool: this run's only, so its Leases are this run's
CLUSTER_CREATED=0

pass() { PASSED=$((PASSED + 1)); echo "PASS $1${2:+: $2}"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1: $2"; }
skip() { SKIPPED=$((SKIPPED + 1)); echo "SKIP $1: $2"; }

cleanup() {
  if ((KEEP)); then
    echo "kept: pods with label $LABEL=$RUN in namespace $NS (delete with: ${KUBECTL} -n $NS delete pod -l $LABEL=$RUN)"
    kc -n "$NS" delete pod -l "$LABEL=$RUN,role=host-check" --ignore-not-found --wait=false >/dev/null 2>&1
  else
    kc -n "$NS" delete pod -l "$LABEL=$RUN" --ignore-not-found --wait=false >/dev/null 2>&1
  fi
  if ((CLUSTER_CREATED)); then
    if ((KEEP)); then
      echo "kept: NAD $NS/$CLUSTER_NAD and the Leases of pool $CLUSTER_POOL (delete with: ${KUBECTL} -n $NS delete network-attachment-definitions.k8s.cni.cncf.io $CLUSTER_NAD; ${KUBECTL} -n $LEASE_NS delete leases -l ibcni.io/pool=$CLUSTER_POOL)"
    else
      cluster_cleanup
    fi
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# --- cluster IPAM (opt-in): one pool, two nodes -------------------------------------------------

# ip_int A.B.C.D: the address as a number
ip_int() { local a b c d; IFS=. read -r a b c d <<<"$1"; echo $(((a << 24) | (b << 16) | (c << 8) | d)); }
# pool_leases: "holder lease-name" per Lease of this run's pool (holder "-" when none)
pool_leases() {
  kc -n "$LEASE_NS" get leases -l "ibcni.io/pool=$CLUSTER_POOL" -o json |
    jq -r '.items[] | "\(.spec.holderIdentity // "-" | if . == "" then "-" else . end) \(.metadata.name)"'
}
cluster_cleanup() {
  kc -n "$NS" delete pod -l "$LABEL=$RUN,role=cluster" --ignore-not-found --wait=true --timeout="${TIMEOUT}s" >/dev/null 2>&1
  kc -n "$NS" delete network-attachment-definitions.k8s.cni.cncf.io "$CLUSTER_NAD" --ignore-not-found >/dev/null 2>&1
  # the pool is this run's own: whatever Lease is left of it (a block not yet given back) goes
  kc -n "$LEASE_NS" delete leases -l "ibcni.io/pool=$CLUSTER_POOL" --ignore-not-found >/dev/null 2>&1
  CLUSTER_CREATED=0
}

cluster_ipam_check() {
  local parent_json nad pods=() p ann entry out
  local -A CIP CNODE
  if [[ $CLUSTER_PARENT == *:* ]]; then
    parent_json=$(jq -cn --arg d "${CLUSTER_PARENT%%:*}" --argjson p "${CLUSTER_PARENT#*:}" '{rdmaDevice: $d, port: $p}') ||
      die "--cluster-parent: RDMA_DEVICE:PORT with a numeric port"
  else
    parent_json=$(jq -cn --arg m "$CLUSTER_PARENT" '{master: $m}')
  fi
  # releaseAfterSeconds 0: an empty block is given back at once (by DEL, or the agent's next pass)
  nad=$(jq -n --arg name "$CLUSTER_NAD" --arg ns "$NS" --arg run "$RUN" --arg lbl "$LABEL" --arg subnet "$CLUSTER_SUBNET" \
    --arg pool "$CLUSTER_POOL" --arg lns "$LEASE_NS" --arg pkey "$CLUSTER_PKEY" --argjson parent "$parent_json" '{
      apiVersion: "k8s.cni.cncf.io/v1", kind: "NetworkAttachmentDefinition",
      metadata: {name: $name, namespace: $ns, labels: {($lbl): $run}},
      spec: {config: ({cniVersion: "1.0.0", name: $name, type: "ibcni", mode: "ipoib"} + $parent
        + (if $pkey == "" then {} else {pkey: $pkey} end)
        + {ipam: {type: "ibcni-ipam", ranges: [[{subnet: $subnet}]],
                  cluster: {backend: "kubernetes", pool: $pool, blockSize: 32, releaseAfterSeconds: 0,
                            kubernetes: {namespace: $lns}}}} | tojson)}
    }')
  echo "cluster IPAM: NAD $NS/$CLUSTER_NAD, pool $CLUSTER_POOL ($CLUSTER_SUBNET, blocks of 32), Leases in $LEASE_NS"
  if ! out=$(kc apply -f - <<<"$nad" 2>&1); then
    fail "cluster_nad" "cannot create NAD $NS/$CLUSTER_NAD: ${out//$'\n'/ }"
    return
  fi
  CLUSTER_CREATED=1
  if [[ -n $(pool_leases 2>/dev/null) ]]; then
    fail "cluster_leases_before" "pool $CLUSTER_POOL already has Leases in $LEASE_NS before any pod"
  fi
  for p in "a:$NODE_A" "b:$NODE_B"; do
    local name=ibcni-val-c${p%%:*}-$RUN
    pods+=("$name")
    out=$(jq -n --arg name "$name" --arg ns "$NS" --arg run "$RUN" --arg lbl "$LABEL" --arg node "${p#*:}" \
      --arg image "$IMAGE" --arg nets "$(jq -cn --arg n "$CLUSTER_NAD" --arg ns "$NS" '[{name: $n, namespace: $ns}]')" \
      --argjson caps "$(jq -cn --arg c "$CAPS" '$c | split(" ") | map(select(length > 0))')" '{
        apiVersion: "v1", kind: "Pod",
        metadata: {name: $name, namespace: $ns, labels: {($lbl): $run, role: "cluster"},
                   annotations: {"k8s.v1.cni.cncf.io/networks": $nets}},
        spec: {restartPolicy: "Never", terminationGracePeriodSeconds: 5,
               nodeSelector: {"kubernetes.io/hostname": $node},
               containers: [{name: "test", image: $image, command: ["sleep", "86400"],
                             securityContext: {capabilities: {add: $caps}}}]}
      }' | kc apply -f - 2>&1) || { fail "cluster_pod_$name" "cannot create: ${out//$'\n'/ }"; return; }
  done
  local ready=1
  for p in "${pods[@]}"; do
    if ! kc -n "$NS" wait --for=condition=Ready "pod/$p" --timeout="${TIMEOUT}s" >/dev/null 2>&1; then
      ready=0
      fail "cluster_pod_ready_$p" "not Ready within ${TIMEOUT}s (cluster IPAM: the kubeconfig, RBAC, or the pool); last events:"
      kc -n "$NS" get events --field-selector "involvedObject.name=$p" --sort-by=.lastTimestamp 2>/dev/null |
        tail -n 8 | sed 's/^/     /'
    else
      CNODE[$p]=$(kc -n "$NS" get pod "$p" -o jsonpath='{.spec.nodeName}')
      pass "cluster_pod_ready_$p" "on node ${CNODE[$p]}"
    fi
  done
  ((ready)) || return
  for p in "${pods[@]}"; do
    ann=$(kc -n "$NS" get pod "$p" -o json | jq -r '.metadata.annotations["k8s.v1.cni.cncf.io/network-status"] // ""')
    entry=$(jq -c --arg a "$NS/$CLUSTER_NAD" '[.[] | select(.name == $a)][0] // empty' <<<"$ann" 2>/dev/null)
    CIP[$p]=$(jq -r '[.ips[]? | select(test("^[0-9.]+$"))][0] // ""' <<<"$entry" 2>/dev/null)
  done
  local a=${pods[0]} b=${pods[1]} net=${CLUSTER_SUBNET%/*} len=${CLUSTER_SUBNET#*/}
  if [[ -z ${CIP[$a]} || -z ${CIP[$b]} ]]; then
    fail "cluster_distinct_addresses" "no IPv4 address in the network-status of ${CIP[$a]:-$a}/${CIP[$b]:-$b}"
  else
    local mask=$(((0xffffffff << (32 - len)) & 0xffffffff)) ia ib
    ia=$(ip_int "${CIP[$a]}") ib=$(ip_int "${CIP[$b]}")
    if (((ia & mask) != ($(ip_int "$net") & mask) || (ib & mask) != ($(ip_int "$net") & mask))); then
      fail "cluster_distinct_addresses" "${CIP[$a]} or ${CIP[$b]} is outside the pool $CLUSTER_SUBNET"
    elif ((ia == ib)); then
      fail "cluster_distinct_addresses" "both pods got ${CIP[$a]}"
    else
      pass "cluster_distinct_addresses" "${CNODE[$a]}: ${CIP[$a]}, ${CNODE[$b]}: ${CIP[$b]} (pool $CLUSTER_SUBNET)"
    fi
    # each node allocates in blocks of its own: two nodes never share a block of 32
    if ((ia / 32 == ib / 32)); then
      fail "cluster_blocks_per_node" "${CIP[$a]} and ${CIP[$b]} are in the same block of 32, on two nodes"
    else
      pass "cluster_blocks_per_node" "in two different blocks of 32"
    fi
    if out=$(kc -n "$NS" exec "$a" -- ping -c 3 -W 3 "${CIP[$b]}" 2>&1); then
      pass "cluster_ping" "${CIP[$a]} -> ${CIP[$b]}: $(grep -E 'packet loss' <<<"$out")"
    else
      fail "cluster_ping" "${CIP[$a]} -> ${CIP[$b]}: $(tail -n 2 <<<"$out" | tr '\n' ' ')"
    fi
  fi
  # the pool's Leases: blocks held by exactly the two pods' nodes
  local leases holders want
  if ! leases=$(pool_leases 2>&1); then
    fail "cluster_leases" "cannot list Leases -l ibcni.io/pool=$CLUSTER_POOL in $LEASE_NS: ${leases//$'\n'/ }"
  else
    holders=$(awk '$1 != "-" {print $1}' <<<"$leases" | sort -u | tr '\n' ' ')
    want=$(printf '%s\n' "${CNODE[$a]}" "${CNODE[$b]}" | sort -u | tr '\n' ' ')
    if [[ $holders == "$want" ]]; then
      pass "cluster_leases" "$(grep -vc '^- ' <<<"$leases") block Lease(s) in $LEASE_NS held by ${holders% }"
    else
      fail "cluster_leases" "the holders of pool $CLUSTER_POOL's Leases are '${holders% }', not the pods' nodes '${want% }': $(tr '\n' ';' <<<"$leases")"
    fi
  fi
  ((KEEP)) && return
  # the pods gone, their empty blocks are given back (releaseAfterSeconds 0, minBlocksPerNode 0) by
  # the reconcile agent's next pass on each node: nothing outlives its holder
  if ! kc -n "$NS" delete pod "${pods[@]}" --wait=true --timeout="${TIMEOUT}s" >/dev/null 2>&1; then
    fail "cluster_pods_deleted" "not gone within ${TIMEOUT}s (CNI DEL failing?)"
    return
  fi
  local deadline=$((SECONDS + TIMEOUT)) left=x
  while ((SECONDS < deadline)); do
    left=$(pool_leases 2>/dev/null | awk '$1 != "-" && $2 ~ /--[ab]--/ {print $1}' | sort | uniq -c | tr '\n' ' ')
    [[ -z ${left// /} ]] && break
    sleep 5
  done
  if [[ -z ${left// /} ]]; then
    pass "cluster_blocks_released" "no node holds a block of pool $CLUSTER_POOL after its pods were deleted"
  else
    fail "cluster_blocks_released" "Leases of pool $CLUSTER_POOL still held ${TIMEOUT}s after the pods were deleted (is the reconcile agent running?): $left"
  fi
}

if ((CLUSTER)); then
  cluster_ipam_check
  ((KEEP)) || cluster_cleanup
fi
if [[ -z $NAD ]]; then
  ((SKIPPED > 0)) && echo "$SKIPPED skipped"
  echo "$PASSED passed, $FAILED failed"
  ((FAILED == 0))
  exit
fi

# --- preflight --------------------------------------------------------------------------------

nad_json=$(kc -n "$NAD_NS" get network-attachment-definitions.k8s.cni.cncf.io "$NAD_NAME" -o json 2>&1) \
  || die "cannot read NetworkAttachmentDefinition $NAD_NS/$NAD_NAME: $nad_json"
if [[ -z $RESOURCE ]]; then
  RESOURCE=$(jq -r '.metadata.annotations["k8s.v1.cni.cncf.io/resourceName"] // ""' <<<"$nad_json")
  [[ -n $RESOURCE ]] || die "--resource not given and the NAD has no k8s.v1.cni.cncf.io/resourceName annotation"
fi
nad_type=$(jq -r '.spec.config // "{}" | fromjson | (.type // ([.plugins[]?.type] | join(",")))' <<<"$nad_json" 2>/dev/null)
echo "NAD $NAD_NS/$NAD_NAME (plugin type: ${nad_type:-?}), resource $RESOURCE, namespace $NS, image $IMAGE, run $RUN"
[[ $nad_type == *ibcni* ]] || echo "note: the NAD's config does not name type ibcni; validating whatever it uses"

# The reconcile agent: the ibcni DaemonSet's pods (their selector), or why they are not checked.
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
AGENT_NS=${AGENT%%/*} AGENT_SELECTOR="" AGENT_SKIP=""
if [[ $AGENT == none ]]; then
  AGENT_SKIP="--agent none"
elif ! ds_json=$(kc -n "$AGENT_NS" get daemonset "${AGENT#*/}" -o json 2>&1); then
  AGENT_SKIP="cannot read DaemonSet $AGENT (--agent): ${ds_json//$'\n'/ }"
else
  AGENT_SELECTOR=$(jq -r '.spec.selector.matchLabels | to_entries | map("\(.key)=\(.value)") | join(",")' <<<"$ds_json")
fi
# agent_pod NODE: the agent's pod on NODE, or nothing
agent_pod() {
  kc -n "$AGENT_NS" get pods -l "$AGENT_SELECTOR" --field-selector "spec.nodeName=$1" \
    -o jsonpath='{.items[0].metadata.name}' 2>/dev/null
}
# The agent's own pass, as a dry run: its ibcni, its directories, in the node's namespaces.
# shellcheck disable=SC2016 # expanded by the agent pod's shell
AGENT_DRY_RUN='set -f; IFS=:; set --
for d in $IBCNI_STATE_DIRS; do set -- "$@" --state-dir "$d"; done
for d in $IBCNI_IPAM_DATA_DIRS; do set -- "$@" --ipam-data-dir "$d"; done
exec nsenter --target 1 --mount --net -- "${IBCNI_CNI_BIN_DIR:-/opt/cni/bin}/ibcni" reconcile --dry-run --json "$@"'

# --- pods -------------------------------------------------------------------------------------

# pod_manifest NAME NODE
pod_manifest() {
  local name=$1 node=$2 caps_json net_json
  caps_json=$(jq -cn --arg c "$CAPS" '$c | split(" ") | map(select(length > 0))')
  net_json=$(jq -cn --arg n "$NAD_NAME" --arg ns "$NAD_NS" --arg i "$IFNAME" \
    '[{name: $n, namespace: $ns} + (if $i == "" then {} else {interface: $i} end)]')
  jq -n --arg name "$name" --arg ns "$NS" --arg run "$RUN" --arg lbl "$LABEL" --arg node "$node" \
    --arg image "$IMAGE" --arg res "$RESOURCE" --arg nets "$net_json" --argjson caps "$caps_json" '{
      apiVersion: "v1", kind: "Pod",
      metadata: {name: $name, namespace: $ns, labels: {($lbl): $run, role: "test"},
                 annotations: {"k8s.v1.cni.cncf.io/networks": $nets}},
      spec: ({
        restartPolicy: "Never",
        terminationGracePeriodSeconds: 5,
        containers: [{
          name: "test", image: $image, command: ["sleep", "86400"],
          securityContext: {capabilities: {add: $caps}},
          resources: {requests: {($res): "1"}, limits: {($res): "1"}}
        }]
      } + (if $node == "" then {} else {nodeSelector: {"kubernetes.io/hostname": $node}} end))
    }'
}

# host_pod_manifest NAME NODE: hostNetwork pod whose /sys shows the node's host netns.
host_pod_manifest() {
  jq -n --arg name "$1" --arg ns "$NS" --arg run "$RUN" --arg lbl "$LABEL" --arg node "$2" \
    --arg image "$IMAGE" '{
      apiVersion: "v1", kind: "Pod",
      metadata: {name: $name, namespace: $ns, labels: {($lbl): $run, role: "host-check"}},
      spec: {nodeName: $node, hostNetwork: true, restartPolicy: "Never",
             terminationGracePeriodSeconds: 1, tolerations: [{operator: "Exists"}],
             containers: [{name: "host", image: $image, command: ["sleep", "86400"]}]}
    }'
}

for p in "$POD_A:$NODE_A" "$POD_B:$NODE_B"; do
  out=$(pod_manifest "${p%%:*}" "${p#*:}" | kc apply -f - 2>&1) || die "creating ${p%%:*} failed: $out"
done

ready=1
for p in "$POD_A" "$POD_B"; do
  if ! kc -n "$NS" wait --for=condition=Ready "pod/$p" --timeout="${TIMEOUT}s" >/dev/null 2>&1; then
    ready=0
    fail "pod_ready_$p" "not Ready within ${TIMEOUT}s; last events:"
    kc -n "$NS" get events --field-selector "involvedObject.name=$p" --sort-by=.lastTimestamp 2>/dev/null \
      | tail -n 8 | sed 's/^/     /'
  else
    pass "pod_ready_$p" "on node $(kc -n "$NS" get pod "$p" -o jsonpath='{.spec.nodeName}')"
  fi
done
if ((!ready)); then
  echo "$PASSED passed, $FAILED failed"
  exit 1
fi

# --- network-status and the interface in each pod ---------------------------------------------

declare -A IFACE IPADDR NODE PCI
for p in "$POD_A" "$POD_B"; do
  NODE[$p]=$(kc -n "$NS" get pod "$p" -o jsonpath='{.spec.nodeName}')
  ann=$(kc -n "$NS" get pod "$p" -o json | jq -r '.metadata.annotations["k8s.v1.cni.cncf.io/network-status"]
          // .metadata.annotations["k8s.v1.cni.cncf.io/networks-status"] // ""')
  entry=$(jq -c --arg a "$NAD_NS/$NAD_NAME" --arg b "$NAD_NAME" \
    '[.[] | select(.name == $a or .name == $b)][0] // empty' <<<"$ann" 2>/dev/null)
  if [[ -z $entry ]]; then
    fail "network_status_$p" "no entry for $NAD_NS/$NAD_NAME in the network-status annotation: ${ann:-<none>}"
    continue
  fi
  IFACE[$p]=$(jq -r '.interface // ""' <<<"$entry")
  IPADDR[$p]=$(jq -r '[.ips[]? | select(test("^[0-9.]+$"))][0] // (.ips[0] // "")' <<<"$entry")
  PCI[$p]=$(jq -r '.["device-info"].pci["pci-address"] // ""' <<<"$entry")
  if [[ -z ${PCI[$p]} ]]; then
    # The SR-IOV device plugin exports the allocated VF as PCIDEVICE_<RESOURCE NAME>.
    var=PCIDEVICE_$(tr 'a-z./-' 'A-Z___' <<<"$RESOURCE")
    PCI[$p]=$(kc -n "$NS" exec "$p" -- printenv "$var" 2>/dev/null | cut -d, -f1 | tr -d '\r')
  fi
  if [[ -z ${IFACE[$p]} || -z ${IPADDR[$p]} ]]; then
    fail "network_status_$p" "entry lacks interface or ips: $entry"
  else
    pass "network_status_$p" "${IFACE[$p]} ${IPADDR[$p]} pci=${PCI[$p]:-unknown}"
  fi
done

for p in "$POD_A" "$POD_B"; do
  ifn=${IFACE[$p]:-${IFNAME:-net1}}
  link=$(kc -n "$NS" exec "$p" -- ip -d link show dev "$ifn" 2>&1)
  if [[ $link != *link/infiniband* ]]; then
    fail "ipoib_interface_$p" "$ifn is not an IPoIB (link/infiniband) interface: $(head -n 2 <<<"$link" | tr '\n' ' ')"
    continue
  fi
  if [[ $(head -n 1 <<<"$link") != *[\<,]UP[,\>]* ]]; then
    fail "ipoib_interface_$p" "$ifn is not UP: $(head -n 1 <<<"$link")"
    continue
  fi
  addrs=$(kc -n "$NS" exec "$p" -- ip -o addr show dev "$ifn" 2>&1)
  if [[ -n ${IPADDR[$p]:-} && $addrs != *" ${IPADDR[$p]}/"* ]]; then
    fail "ipoib_interface_$p" "$ifn lacks ${IPADDR[$p]}: $addrs"
    continue
  fi
  pass "ipoib_interface_$p" "$(grep -o 'link/infiniband [^ ]*' <<<"$link" | cut -c1-60)... mtu $(grep -o 'mtu [0-9]*' <<<"$link" | head -n1 | cut -d' ' -f2)"
done

# --- traffic ----------------------------------------------------------------------------------

for pair in "$POD_A:$POD_B" "$POD_B:$POD_A"; do
  src=${pair%%:*} dst=${pair#*:}
  if [[ -z ${IFACE[$src]:-} || -z ${IPADDR[$dst]:-} ]]; then
    skip "ping_${src}_to_$dst" "interface or address unknown (see network_status)"
    continue
  fi
  if out=$(kc -n "$NS" exec "$src" -- ping -c 3 -W 3 -I "${IFACE[$src]}" "${IPADDR[$dst]}" 2>&1); then
    pass "ping_${src}_to_$dst" "$(grep -E 'packet loss' <<<"$out")"
  else
    fail "ping_${src}_to_$dst" "$(tail -n 2 <<<"$out" | tr '\n' ' ')"
  fi
done

# --- RDMA view from inside the pod (optional) -------------------------------------------------

for p in "$POD_A" "$POD_B"; do
  if ! kc -n "$NS" exec "$p" -- sh -c 'command -v ibv_devinfo' >/dev/null 2>&1; then
    skip "ibv_devinfo_$p" "ibv_devinfo not in the image (use an image with rdma-core/ibverbs-utils)"
    continue
  fi
  out=$(kc -n "$NS" exec "$p" -- ibv_devinfo 2>&1)
  if grep -q 'PORT_ACTIVE' <<<"$out" && grep -q 'link_layer:[[:space:]]*InfiniBand' <<<"$out"; then
    pass "ibv_devinfo_$p" "$(grep -m1 'hca_id' <<<"$out" | tr -s ' \t' ' ') active IB port"
  elif grep -q 'hca_id' <<<"$out"; then
    fail "ibv_devinfo_$p" "RDMA device visible but no active InfiniBand port: $(grep -E 'hca_id|state|link_layer' <<<"$out" | tr -s ' \t\n' ' ')"
  else
    skip "ibv_devinfo_$p" "no RDMA device visible in the pod (RDMA not exposed to pods?): $(head -n 1 <<<"$out")"
  fi
done

# --- the reconcile agent's view of the live pods -----------------------------------------------

declare -A PODS_ON
for p in "$POD_A" "$POD_B"; do
  [[ -n ${NODE[$p]:-} ]] && PODS_ON[${NODE[$p]}]=$((${PODS_ON[${NODE[$p]}]:-0} + 1))
done
for node in "${!PODS_ON[@]}"; do
  if [[ -n $AGENT_SKIP ]]; then
    skip "reconcile_dry_run_$node" "$AGENT_SKIP"
    continue
  fi
  apod=$(agent_pod "$node")
  if [[ -z $apod ]]; then
    fail "reconcile_dry_run_$node" "no pod of DaemonSet $AGENT on $node: the node has no reconcile agent"
    continue
  fi
  errf=$(mktemp)
  json=$(kc -n "$AGENT_NS" exec "$apod" -- sh -c "$AGENT_DRY_RUN" 2>"$errf")
  rc=$?
  err=$(tail -n 3 "$errf" | tr '\n' ' ')
  rm -f "$errf"
  if ((rc != 0)); then
    fail "reconcile_dry_run_$node" "ibcni reconcile --dry-run in $AGENT_NS/$apod exited $rc: $err"
    continue
  fi
  if ! counts=$(jq -r '[.attachments[].action] | "\(map(select(. == "alive")) | length) \(map(select(. == "would-undo")) | length) \(map(select(. == "unknown")) | length)"' <<<"$json" 2>/dev/null); then
    fail "reconcile_dry_run_$node" "not the JSON report: $(head -c 300 <<<"$json") $err"
    continue
  fi
  read -r alive undo unknown <<<"$counts"
  need=${PODS_ON[$node]}
  if ((alive >= need)); then
    pass "reconcile_dry_run_$node" "$alive attachment(s) alive ($need test pod(s) there), $undo would be undone, $unknown unknown"
  else
    fail "reconcile_dry_run_$node" "only $alive attachment(s) alive with $need live test pod(s): the agent would take a live pod for dead: $(jq -c .attachments <<<"$json" | head -c 600)"
  fi
done

# --- teardown: the VF must come back to the host ----------------------------------------------

if ((KEEP)); then
  skip "vf_returned" "--keep given"
else
  if kc -n "$NS" delete pod "$POD_A" "$POD_B" --wait=true --timeout="${TIMEOUT}s" >/dev/null 2>&1; then
    pass "pods_deleted"
  else
    fail "pods_deleted" "not gone within ${TIMEOUT}s (CNI DEL failing? check kubelet logs)"
  fi

  for p in "$POD_A" "$POD_B"; do
    pci=${PCI[$p]:-} node=${NODE[$p]:-}
    manual="on node $node: ls /sys/bus/pci/devices/${pci:-<VF PCI address>}/net/ must list the VF netdev (host netns), and 'ip -d link show dev <it>' must show link/infiniband"
    if [[ -z $pci ]]; then
      skip "vf_returned_$p" "VF PCI address unknown (no device-info, no PCIDEVICE_* env); manual: $manual"
      continue
    fi
    if [[ $HOST_CHECK == skip ]]; then
      skip "vf_returned_$p" "--host-check skip; manual: $manual"
      continue
    fi
    hp=ibcni-val-host-$RUN-$([[ $p == "$POD_A" ]] && echo a || echo b)
    if ! out=$(host_pod_manifest "$hp" "$node" | kc apply -f - 2>&1) \
      || ! kc -n "$NS" wait --for=condition=Ready "pod/$hp" --timeout="${TIMEOUT}s" >/dev/null 2>&1; then
      skip "vf_returned_$p" "cannot run a hostNetwork helper pod in $NS (pod security?): ${out//$'\n'/ }; manual: $manual"
      continue
    fi
    netdev="" deadline=$((SECONDS + TIMEOUT))
    while ((SECONDS < deadline)); do
      netdev=$(kc -n "$NS" exec "$hp" -- ls "/sys/bus/pci/devices/$pci/net/" 2>/dev/null | head -n 1 | tr -d '\r')
      [[ -n $netdev ]] && break
      sleep 3
    done
    if [[ -z $netdev ]]; then
      fail "vf_returned_$p" "VF $pci on $node has no netdev in the host netns after ${TIMEOUT}s"
    else
      link=$(kc -n "$NS" exec "$hp" -- ip -d link show dev "$netdev" 2>&1)
      if [[ $link != *link/infiniband* ]]; then
        fail "vf_returned_$p" "VF $pci is back as $netdev but not link/infiniband: $(head -n 2 <<<"$link" | tr '\n' ' ')"
      elif [[ $netdev == "${IFACE[$p]:-}" ]]; then
        fail "vf_returned_$p" "VF $pci is back but still named ${IFACE[$p]} (original name not restored)"
      else
        pass "vf_returned_$p" "VF $pci back on $node as $netdev"
      fi
    fi
    kc -n "$NS" delete pod "$hp" --wait=false >/dev/null 2>&1
  done
fi

# --- the reconcile agent ran without a failed pass during the test --------------------------------

for node in "${!PODS_ON[@]}"; do
  if [[ -n $AGENT_SKIP ]]; then
    skip "reconcile_agent_$node" "$AGENT_SKIP"
    continue
  fi
  apod=$(agent_pod "$node")
  [[ -n $apod ]] || { fail "reconcile_agent_$node" "no pod of DaemonSet $AGENT on $node"; continue; }
  all=$(kc -n "$AGENT_NS" logs "$apod" 2>&1)
  if [[ $all != *"running 'ibcni reconcile' every"* ]]; then
    if [[ $all == *"sleeping until the pod is stopped"* ]]; then
      skip "reconcile_agent_$node" "the agent is off (reconcileInterval: 0)"
    else
      fail "reconcile_agent_$node" "$AGENT_NS/$apod never started its reconcile loop: $(tail -n 3 <<<"$all" | tr '\n' ' ')"
    fi
    continue
  fi
  bad=$(kc -n "$AGENT_NS" logs "$apod" --since-time="$START" 2>&1 | grep -E 'reconcile pass ([0-9]+ failed|[0-9]+: stopped|not run)')
  if [[ -n $bad ]]; then
    fail "reconcile_agent_$node" "failed passes in $AGENT_NS/$apod since $START: $(tail -n 3 <<<"$bad" | tr '\n' ' ')"
  else
    pass "reconcile_agent_$node" "$AGENT_NS/$apod reconciles; no failed pass since $START"
  fi
done

((SKIPPED > 0)) && echo "$SKIPPED skipped"
echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
