#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Validates ibcni-dra, ibcni's DRA driver (driver ibcni.io), on a real cluster with InfiniBand VFs:
# Kubernetes 1.34 or newer (resource.k8s.io/v1) whose container runtime has CDI enabled
# (containerd 2.x, containerd 1.7 with enable_cdi, CRI-O), nodes with IB VFs created.
# It installs (or upgrades) the Helm chart with dra.enabled, waits for the node's ResourceSlices,
# creates a ResourceClaimTemplate for one VF (DeviceClass vf.ibcni.io) and a pod using it, checks
# that the pod got the VF's /dev/infiniband nodes and IBCNI_VF_* env (from the claim's CDI spec),
# that the claim is allocated on the node and that the spec is on the node, then deletes the pod and
# checks that the claim and its CDI spec are gone (seen from the ibcni-dra pod on that node, which
# mounts the CDI directory).
#
# Output: PASS/FAIL/SKIP lines, then "N passed, M failed". Exit 0 if nothing failed, 1 if a check
# failed, 2 on a usage or setup error. Needs bash, jq, kubectl and (unless --no-install) helm.
set -uo pipefail

usage() {
  cat <<'EOF'
Usage: dra.sh [options]

  -r, --release NAME      the chart's release (default: ibcni)
      --chart-namespace NS  the release's namespace (default: kube-system)
      --chart PATH        the chart (default: deploy/helm/ibcni of this repository)
  -f, --values FILE       more values for the chart (e.g. image.repository/tag); repeatable
      --no-install        do not install or upgrade: the release is installed with dra.enabled
      --node NODE         the node to test (default: the first node whose ResourceSlices show a VF)
  -N, --namespace NS      namespace of the test claim template and pod (default: default)
  -i, --image IMAGE       test image with sh, ls and env (default: docker.io/library/busybox:1.36)
  -t, --timeout SECONDS   wait for the driver, the slices, the pod and the cleanup (default: 180)
      --keep              leave the test pod and claim template (no deletion, no CDI cleanup check)
      --kubectl CMD       kubectl to use (default: kubectl; e.g. "oc")
      --helm CMD          helm to use (default: helm)
  -h, --help
EOF
}

die() { echo "dra.sh: $*" >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RELEASE=ibcni CHART_NS=kube-system CHART=$here/../../deploy/helm/ibcni INSTALL=1 NODE="" NS=default
IMAGE=docker.io/library/busybox:1.36 TIMEOUT=180 KEEP=0 KUBECTL=kubectl HELM=helm
VALUES=()

while (($#)); do
  case $1 in
    -r | --release) RELEASE=${2-}; shift ;;
    --chart-namespace) CHART_NS=${2-}; shift ;;
    --chart) CHART=${2-}; shift ;;
    -f | --values) VALUES+=(-f "${2-}"); shift ;;
    --no-install) INSTALL=0 ;;
    --node) NODE=${2-}; shift ;;
    -N | --namespace) NS=${2-}; shift ;;
    -i | --image) IMAGE=${2-}; shift ;;
    -t | --timeout) TIMEOUT=${2-}; shift ;;
    --keep) KEEP=1 ;;
    --kubectl) KUBECTL=${2-}; shift ;;
    --helm) HELM=${2-}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout must be a number of seconds"
[[ -n $RELEASE && -n $CHART_NS && -n $NS ]] || die "--release, --chart-namespace and --namespace must not be empty"
command -v jq >/dev/null 2>&1 || die "jq is required on this machine"
read -r -a KC <<<"$KUBECTL"
command -v "${KC[0]}" >/dev/null 2>&1 || die "'${KC[0]}' not found"
kc() { "${KC[@]}" "$@"; }
if ((INSTALL)); then
  read -r -a HL <<<"$HELM"
  command -v "${HL[0]}" >/dev/null 2>&1 || die "'${HL[0]}' not found (or use --no-install)"
  [[ -f $CHART/Chart.yaml ]] || die "no chart at $CHART (--chart)"
fi

DRIVER=ibcni.io
RUN=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
LABEL=ibcni-dra-validate-run
TEMPLATE=ibcni-dra-val-$RUN
POD=ibcni-dra-val-$RUN
PASSED=0 FAILED=0 SKIPPED=0
CREATED=0

pass() { PASSED=$((PASSED + 1)); echo "PASS $1${2:+: $2}"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1: $2"; }
skip() { SKIPPED=$((SKIPPED + 1)); echo "SKIP $1: $2"; }
finish() {
  ((SKIPPED > 0)) && echo "$SKIPPED skipped"
  echo "$PASSED passed, $FAILED failed"
  ((FAILED == 0))
  exit
}

cleanup() {
  ((CREATED)) || return 0
  if ((KEEP)); then
    echo "kept: pod $NS/$POD and ResourceClaimTemplate $NS/$TEMPLATE (delete with: ${KUBECTL} -n $NS delete pod,resourceclaimtemplate -l $LABEL=$RUN)"
  else
    kc -n "$NS" delete pod "$POD" --ignore-not-found --wait=false >/dev/null 2>&1
    kc -n "$NS" delete resourceclaimtemplate "$TEMPLATE" --ignore-not-found >/dev/null 2>&1
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# until_true SECONDS CMD...: CMD until it succeeds, every 3 s, for at most SECONDS
until_true() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 3
  done
}

# --- the chart --------------------------------------------------------------------------------

if ((INSTALL)); then
  if out=$("${HL[@]}" upgrade --install "$RELEASE" "$CHART" --namespace "$CHART_NS" "${VALUES[@]}" \
        --set dra.enabled=true 2>&1); then
    pass "chart_installed" "release $CHART_NS/$RELEASE with dra.enabled"
  else
    fail "chart_installed" "${out//$'\n'/ }"
    finish
  fi
fi
# ibcni-dra's DaemonSet: the release's, by its labels (templates/_helpers.tpl, ibcni.dra.selectorLabels)
DRA_SELECTOR="app.kubernetes.io/name=ibcni-dra,app.kubernetes.io/instance=$RELEASE"
ds_json=$(kc -n "$CHART_NS" get daemonsets -l "$DRA_SELECTOR" -o json 2>&1) ||
  die "cannot list DaemonSets in $CHART_NS: $ds_json"
DS=$(jq -r '.items[0].metadata.name // ""' <<<"$ds_json")
if [[ -z $DS ]]; then
  fail "dra_daemonset" "no DaemonSet labelled $DRA_SELECTOR in $CHART_NS (dra.enabled false?)"
  finish
fi
# where its pods write the CDI specs: --cdi-dir of its command line (the chart's dra.cdiDir)
CDI_DIR=$(jq -r '.items[0].spec.template.spec.containers[0].command as $c
  | ($c | index("--cdi-dir")) as $i | if $i == null then "/var/run/cdi" else $c[$i + 1] end' <<<"$ds_json")
if kc -n "$CHART_NS" rollout status "daemonset/$DS" --timeout="${TIMEOUT}s" >/dev/null 2>&1; then
  pass "dra_rollout" "DaemonSet $CHART_NS/$DS ready on $(kc -n "$CHART_NS" get daemonset "$DS" -o jsonpath='{.status.numberReady}') node(s)"
else
  fail "dra_rollout" "DaemonSet $CHART_NS/$DS not rolled out within ${TIMEOUT}s; its pods:"
  kc -n "$CHART_NS" get pods -l "$DRA_SELECTOR" -o wide 2>&1 | sed 's/^/     /'
fi
for class in vf.ibcni.io ipoib-port.ibcni.io; do
  if kc get deviceclass "$class" >/dev/null 2>&1; then
    pass "deviceclass_$class"
  else
    fail "deviceclass_$class" "DeviceClass $class missing"
  fi
done

# --- the node's ResourceSlices ----------------------------------------------------------------

# vf_devices NODE: the names of the VFs the node's slices of ibcni.io publish
vf_devices() {
  kc get resourceslices --field-selector "spec.nodeName=$1,spec.driver=$DRIVER" -o json 2>/dev/null |
    jq -r '.items[].spec.devices[]? | select(.attributes.kind.string == "vf") | .name'
}
# a_node_with_vfs: sets NODE to the first node whose slices show a VF
a_node_with_vfs() {
  NODE=$(kc get resourceslices -o json 2>/dev/null | jq -r --arg d "$DRIVER" '[.items[] | select(.spec.driver == $d)
    | select([.spec.devices[]? | select(.attributes.kind.string == "vf")] | length > 0) | .spec.nodeName][0] // ""')
  [[ -n $NODE ]]
}
node_has_vfs() { [[ -n $(vf_devices "$NODE") ]]; }
if [[ -z $NODE ]]; then
  until_true "$TIMEOUT" a_node_with_vfs
else
  until_true "$TIMEOUT" node_has_vfs
fi
if [[ -z $NODE ]] || ! node_has_vfs; then
  fail "resource_slices" "no ResourceSlice of $DRIVER shows a VF${NODE:+ on node $NODE} within ${TIMEOUT}s (VFs created? the pod's log:)"
  kc -n "$CHART_NS" logs -l "$DRA_SELECTOR" --prefix --tail=10 2>&1 | sed 's/^/     /'
  finish
fi
slices=$(kc get resourceslices --field-selector "spec.nodeName=$NODE,spec.driver=$DRIVER" -o json)
pass "resource_slices" "node $NODE: $(jq '.items | length' <<<"$slices") slice(s), VFs $(vf_devices "$NODE" | tr '\n' ' ')"
if jq -e --arg n "$NODE" 'all(.items[]; any(.metadata.ownerReferences[]?; .kind == "Node" and .name == $n))' <<<"$slices" >/dev/null; then
  pass "slices_owned_by_node" "they go with Node $NODE"
else
  fail "slices_owned_by_node" "a slice of node $NODE has no ownerReference to its Node"
fi
DRA_POD=$(kc -n "$CHART_NS" get pods -l "$DRA_SELECTOR" --field-selector "spec.nodeName=$NODE" \
  -o jsonpath='{.items[0].metadata.name}' 2>/dev/null)
[[ -n $DRA_POD ]] || fail "dra_pod" "no ibcni-dra pod on node $NODE"

# --- a claim and a pod ------------------------------------------------------------------------

CREATED=1
template=$(jq -n --arg name "$TEMPLATE" --arg ns "$NS" --arg lbl "$LABEL" --arg run "$RUN" '{
  apiVersion: "resource.k8s.io/v1", kind: "ResourceClaimTemplate",
  metadata: {name: $name, namespace: $ns, labels: {($lbl): $run}},
  spec: {spec: {devices: {requests: [{name: "vf", exactly: {deviceClassName: "vf.ibcni.io"}}]}}}}')
pod=$(jq -n --arg name "$POD" --arg ns "$NS" --arg lbl "$LABEL" --arg run "$RUN" --arg node "$NODE" \
  --arg image "$IMAGE" --arg tpl "$TEMPLATE" '{
  apiVersion: "v1", kind: "Pod",
  metadata: {name: $name, namespace: $ns, labels: {($lbl): $run}},
  spec: {restartPolicy: "Never", terminationGracePeriodSeconds: 5,
         nodeSelector: {"kubernetes.io/hostname": $node},
         resourceClaims: [{name: "ib", resourceClaimTemplateName: $tpl}],
         containers: [{name: "test", image: $image, command: ["sleep", "86400"],
                       resources: {claims: [{name: "ib", request: "vf"}]}}]}}')
if ! out=$(kc apply -f - <<<"$template" 2>&1) || ! out=$(kc apply -f - <<<"$pod" 2>&1); then
  fail "claim_pod_created" "${out//$'\n'/ }"
  finish
fi
if kc -n "$NS" wait --for=condition=Ready "pod/$POD" --timeout="${TIMEOUT}s" >/dev/null 2>&1; then
  pass "pod_ready" "$NS/$POD on node $NODE"
else
  fail "pod_ready" "not Ready within ${TIMEOUT}s (allocation, Prepare, or CDI in the runtime); last events:"
  kc -n "$NS" get events --field-selector "involvedObject.name=$POD" --sort-by=.lastTimestamp 2>/dev/null |
    tail -n 8 | sed 's/^/     /'
  finish
fi
CLAIM=$(kc -n "$NS" get pod "$POD" -o json | jq -r '.status.resourceClaimStatuses[]? | select(.name == "ib") | .resourceClaimName // ""')
claim_json=$(kc -n "$NS" get resourceclaim "$CLAIM" -o json 2>/dev/null)
CLAIM_UID=$(jq -r '.metadata.uid // ""' <<<"$claim_json")
device=$(jq -r --arg d "$DRIVER" '[.status.allocation.devices.results[]? | select(.driver == $d)][0] | "\(.pool)/\(.device)"' <<<"$claim_json" 2>/dev/null)
if [[ -n $CLAIM_UID && $device == "$NODE/"* ]]; then
  pass "claim_allocated" "claim $NS/$CLAIM ($CLAIM_UID): $device"
else
  fail "claim_allocated" "claim '${CLAIM:-?}' of the pod has no $DRIVER device of pool $NODE: ${device:-none}"
fi

# --- what CDI gave the container --------------------------------------------------------------

devs=$(kc -n "$NS" exec "$POD" -- ls /dev/infiniband 2>&1)
if grep -q '^uverbs[0-9]' <<<"$devs"; then
  pass "dev_infiniband" "$(tr '\n' ' ' <<<"$devs")"
else
  fail "dev_infiniband" "no uverbsN in the pod's /dev/infiniband: ${devs//$'\n'/ }"
fi
env_out=$(kc -n "$NS" exec "$POD" -- env 2>&1)
rdma=$(sed -n 's/^IBCNI_VF_RDMA_DEVICE=//p' <<<"$env_out")
if [[ -n $rdma ]]; then
  pass "cdi_env" "$(grep '^IBCNI_VF_' <<<"$env_out" | tr '\n' ' ')"
else
  fail "cdi_env" "no IBCNI_VF_RDMA_DEVICE in the container's environment"
fi
# the claim's spec: "<cdi dir>/ibcni.io-vf-<claim uid>.json" (plugin/dra/cdi_spec.h, cdiSpecPath)
spec=$CDI_DIR/$DRIVER-vf-$CLAIM_UID.json
# on_node CMD...: CMD in the ibcni-dra pod of the node (it mounts the CDI directory at the node's path)
on_node() { kc -n "$CHART_NS" exec "$DRA_POD" -c ibcni-dra -- "$@" >/dev/null 2>&1; }
if [[ -z $DRA_POD || -z $CLAIM_UID ]]; then
  skip "cdi_spec_written" "no ibcni-dra pod on $NODE or no claim UID"
elif on_node test -s "$spec"; then
  pass "cdi_spec_written" "$spec on node $NODE"
else
  fail "cdi_spec_written" "$spec not on node $NODE"
fi

# --- cleanup: Unprepare ----------------------------------------------------------------------

if ((KEEP)); then
  finish
fi
if kc -n "$NS" delete pod "$POD" --wait=true --timeout="${TIMEOUT}s" >/dev/null 2>&1; then
  pass "pod_deleted"
else
  fail "pod_deleted" "not gone within ${TIMEOUT}s (Unprepare failing? the kubelet's events and ibcni-dra's log)"
fi
claim_gone() { ! kc -n "$NS" get resourceclaim "$CLAIM" >/dev/null 2>&1; }
if [[ -n $CLAIM ]] && until_true "$TIMEOUT" claim_gone; then
  pass "claim_deleted" "the pod's claim $NS/$CLAIM went with it"
else
  fail "claim_deleted" "claim $NS/${CLAIM:-?} still there ${TIMEOUT}s after the pod"
fi
spec_gone() { ! on_node test -e "$spec"; }
if [[ -z $DRA_POD || -z $CLAIM_UID ]]; then
  skip "cdi_spec_removed" "no ibcni-dra pod on $NODE or no claim UID"
elif until_true "$TIMEOUT" spec_gone; then
  pass "cdi_spec_removed" "$spec gone from node $NODE"
else
  fail "cdi_spec_removed" "$spec still on node $NODE ${TIMEOUT}s after the pod was deleted"
fi
logs=$(kc -n "$CHART_NS" logs "$DRA_POD" -c ibcni-dra 2>&1)
if grep -q 'refused the registration' <<<"$logs"; then
  fail "dra_registered" "ibcni-dra's log: $(grep 'refused the registration' <<<"$logs" | tail -n 1)"
else
  pass "dra_registered" "no refused registration in $CHART_NS/$DRA_POD's log"
fi
kc -n "$NS" delete resourceclaimtemplate "$TEMPLATE" --ignore-not-found >/dev/null 2>&1
CREATED=0
finish
