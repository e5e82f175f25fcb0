#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# chart_dra_rbac_test.sh BUILD_DIR
# ibcni-dra's part of the chart (dra.enabled) against a real kube-apiserver (tests/support/control-plane;
# 77 = skip when it is not built): the render is applied by server-side apply with strict field
# validation (the DaemonSet's surge strategy, the ClusterRole's synthetic resourceclaims/driver
# rule, the DeviceClasses' CEL compiled by the server), and so are deploy/dra/deviceclasses.yaml
# and the claim templates of deploy/dra/ (server-side dry run). Then, with a token of the chart's
# ServiceAccount ibcni-dra bound to a pod on node-a (as the kubelet mounts it: it names the node),
# each request ibcni-dra makes is allowed: get its Node; list, create, update and delete a
# ResourceSlice; get a ResourceClaim; patch and update the status.devices of a claim allocated to
# node-a. And it is refused what it must not do: status.devices of a claim allocated to another node
# (no "arbitrary-node" verb), the same write with a token bound to no pod, the claim's allocation
# (resourceclaims/binding), deleting, creating, listing or changing claims, Secrets, Pods, writing
# a Node, deleting every ResourceSlice at once.
# The chart is rendered with the helm of tests/deploy/k8s, installed into BUILD_DIR/deploy-node.
# Needs curl and jq.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${1:?usage: chart_dra_rbac_test.sh BUILD_DIR}
source "$repo/tests/support/check.sh"
source "$repo/tests/support/control-plane/lib.sh"

mkdir -p "$build" || exit 1
node_dir=$(cd "$build" && pwd -P)/deploy-node
"$repo/tests/deploy/k8s/setup.sh" "$node_dir" || { echo "FAIL the chart tooling (tests/deploy/k8s/setup.sh)"; exit 1; }
helm=$node_dir/node_modules/.bin/helm

control_plane_session

check "the chart renders with dra.enabled=true" \
  "$helm" template ibcni "$repo/deploy/helm/ibcni" --namespace kube-system --set dra.enabled=true \
  >"$work/chart.yaml" 2>"$work/helm.err" || { cat "$work/helm.err"; finish_checks; }
check "the render is applied server-side with strict field validation (DaemonSets, RBAC, DeviceClasses)" \
  kc apply --server-side --field-manager ibcni-test --validate=strict -f "$work/chart.yaml" >/dev/null || finish_checks
check "deploy/dra/deviceclasses.yaml is applied server-side with strict field validation" \
  kc apply --server-side --field-manager ibcni-test --validate=strict -f "$repo/deploy/dra/deviceclasses.yaml" >/dev/null
check "deploy/dra/claim-templates.yaml passes the server's validation (dry run)" \
  kc apply --server-side --dry-run=server --validate=strict -n default -f "$repo/deploy/dra/claim-templates.yaml" >/dev/null
sa_dra_strategy() {
  [[ $(kc get daemonset -n kube-system ibcni-dra \
    -o jsonpath='{.spec.updateStrategy.rollingUpdate.maxSurge}/{.spec.updateStrategy.rollingUpdate.maxUnavailable}') == 1/0 ]]
}
check "the ibcni-dra DaemonSet was taken with maxSurge 1, maxUnavailable 0" sa_dra_strategy

control_plane_nodes node-a node-b
# The pod the kubelet would mount the token in: bound to it, the token names node-a.
kc create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: ibcni-dra-node-a, namespace: kube-system}
spec:
  nodeName: node-a
  serviceAccountName: ibcni-dra
  containers: [{name: ibcni-dra, image: ibcni-dra-test}]
EOF
token=$(kc create token ibcni-dra -n kube-system --duration 1h --bound-object-kind Pod \
  --bound-object-name ibcni-dra-node-a) || { echo "FAIL a token bound to the pod"; finish_checks; }
unbound=$(kc create token ibcni-dra -n kube-system --duration 1h) || { echo "FAIL an unbound token"; finish_checks; }
# request TOKEN METHOD PATH [CONTENT_TYPE BODY]: the HTTP status; the answer in $work/answer
request() {
  local args=(-s -o "$work/answer" -w '%{http_code}' --cacert "$CP_CA" -H "Authorization: Bearer $1" -X "$2")
  (($# > 3)) && args+=(-H "Content-Type: $4" --data-binary "$5")
  curl "${args[@]}" "$CP_SERVER$3"
}
# expect STATUS METHOD PATH [CONTENT_TYPE BODY]: the ServiceAccount's request (bound token) answers STATUS
expect() {
  local want=$1 got
  shift
  got=$(request "$token" "$@")
  [[ $got == "$want" ]] || { echo "    $1 $2: $got, not $want: $(head -c 400 "$work/answer")" >&2; return 1; }
}
whoami() {
  [[ $(request "$token" POST /apis/authentication.k8s.io/v1/selfsubjectreviews application/json \
    '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}') == 201 ]] &&
    tr -d ' \n' <"$work/answer" | grep -q '"authentication.kubernetes.io/node-name":\["node-a"\]'
}
check "the bound token is ServiceAccount kube-system/ibcni-dra on node-a" whoami || cat "$work/answer"

rs=/apis/resource.k8s.io/v1/resourceslices
slice() {  # slice GENERATION [RESOURCE_VERSION]: node-a's one slice, with one VF
  cat <<EOF
{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
 "metadata": {"name": "node-a-ibcni.io-0"${2:+, \"resourceVersion\": \"$2\"}},
 "spec": {"driver": "ibcni.io", "nodeName": "node-a",
          "pool": {"name": "node-a", "generation": $1, "resourceSliceCount": 1},
          "devices": [{"name": "pci-0000-3b-00-2",
                       "attributes": {"kind": {"string": "vf"}, "rdmaDevice": {"string": "mlx5_2"},
                                      "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.2"}}}]}}
EOF
}
# --- what ibcni-dra does ---
check "allowed: get its Node (the slices' owner)" expect 200 GET /api/v1/nodes/node-a
check "allowed: list the node's ResourceSlices (field selectors spec.nodeName, spec.driver)" \
  expect 200 GET "$rs?fieldSelector=spec.nodeName%3Dnode-a%2Cspec.driver%3Dibcni.io"
check "allowed: create a ResourceSlice" expect 201 POST "$rs" application/json "$(slice 1)"
rv=$(kc get resourceslice node-a-ibcni.io-0 -o jsonpath='{.metadata.resourceVersion}')
check "allowed: update the ResourceSlice (a new pool generation)" \
  expect 200 PUT "$rs/node-a-ibcni.io-0" application/json "$(slice 2 "$rv")"
check "allowed: get a ResourceSlice" expect 200 GET "$rs/node-a-ibcni.io-0"
check "allowed: watch ResourceSlices" expect 200 GET "$rs?watch=1&timeoutSeconds=1"
check "allowed: delete the ResourceSlice" expect 200 DELETE "$rs/node-a-ibcni.io-0"

kc create namespace team >/dev/null
# claim NAME NODE: a claim for one VF, allocated (by the admin, as the scheduler would) on NODE
claim() {
  kc create -n team -f - >/dev/null <<EOF || return 1
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1}
spec:
  devices:
    requests:
      - name: vf
        exactly: {deviceClassName: vf.ibcni.io}
EOF
  kc replace --subresource status -n team -f - >/dev/null <<EOF
$(kc get resourceclaim -n team "$1" -o yaml | sed '/^status:/,$d')
status:
  allocation:
    devices:
      results:
        - {request: vf, driver: ibcni.io, pool: $2, device: pci-0000-3b-00-2}
    nodeSelector:
      nodeSelectorTerms:
        - matchFields:
            - {key: metadata.name, operator: In, values: [$2]}
EOF
}
two_claims() { claim on-a node-a && claim on-b node-b; }
check "a claim allocated on node-a and one on node-b (admin)" two_claims || finish_checks
rc=/apis/resource.k8s.io/v1/namespaces/team/resourceclaims
devices() {  # devices POOL: a merge patch of status.devices, the one VF ready
  echo "{\"status\": {\"devices\": [{\"driver\": \"ibcni.io\", \"pool\": \"$1\", \"device\": \"pci-0000-3b-00-2\",
    \"conditions\": [{\"type\": \"Ready\", \"status\": \"True\", \"reason\": \"Prepared\", \"message\": \"\",
                     \"lastTransitionTime\": \"2026-01-01T00:00:00Z\"}],
    \"networkData\": {\"interfaceName\": \"ib0\"}}]}}"
}
check "allowed: get a ResourceClaim (Prepare)" expect 200 GET "$rc/on-a"
check "allowed: patch status.devices of node-a's claim (associated-node)" \
  expect 200 PATCH "$rc/on-a/status" application/merge-patch+json "$(devices node-a)"
update_status() {  # the claim as it is with status.devices set anew (message "updated"), PUT to /status
  local body
  body=$(kc get resourceclaim -n team on-a -o json |
    jq --argjson d "$(devices node-a)" '.status.devices = $d.status.devices | .status.devices[0].conditions[0].message = "updated"') &&
    expect 200 PUT "$rc/on-a/status" application/json "$body"
}
check "allowed: update the status of node-a's claim" update_status

# --- what it must not do ---
# refused_for SUBRESOURCE TOKEN CLAIM PATCH: the merge patch of the claim's status is refused for
# want of the synthetic SUBRESOURCE permission (403, or 422 naming it: a field of the status refused)
refused_for() {
  local got
  got=$(request "$2" PATCH "$rc/$3/status" application/merge-patch+json "$4")
  if [[ $got != 403 && $got != 422 ]] || ! grep -q "resourceclaims/$1" "$work/answer"; then
    echo "    $got: $(head -c 400 "$work/answer")" >&2
    return 1
  fi
}
status_refused() { refused_for driver "$1" "$2" "$(devices "$3")"; }  # status_refused TOKEN CLAIM POOL
check "refused: status.devices of node-b's claim (no arbitrary-node verb)" status_refused "$token" on-b node-b
check "refused: status.devices of node-a's claim with a token bound to no pod (no node)" status_refused "$unbound" on-a node-a
allocation_refused() { refused_for binding "$token" on-a '{"status": {"allocation": null}}'; }
check "refused: removing a claim's allocation (resourceclaims/binding)" allocation_refused
check "refused: deleting a ResourceClaim" expect 403 DELETE "$rc/on-a"
check "refused: creating a ResourceClaim" expect 403 POST "$rc" application/json \
  '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"x"},"spec":{}}'
check "refused: listing ResourceClaims" expect 403 GET /apis/resource.k8s.io/v1/resourceclaims
check "refused: patching a ResourceClaim's spec" expect 403 PATCH "$rc/on-a" application/merge-patch+json '{"metadata":{"labels":{"x":"y"}}}'
check "refused: Secrets" expect 403 GET /api/v1/namespaces/kube-system/secrets
check "refused: Pods" expect 403 GET /api/v1/pods
check "refused: patching a Node" expect 403 PATCH /api/v1/nodes/node-a application/merge-patch+json '{"metadata":{"labels":{"x":"y"}}}'
check "refused: the list of Nodes" expect 403 GET /api/v1/nodes
check "refused: deletecollection of ResourceSlices" expect 403 DELETE "$rs"
check "refused: DeviceClasses write" expect 403 DELETE /apis/resource.k8s.io/v1/deviceclasses/vf.ibcni.io
check "refused: ResourceClaimTemplates" expect 403 GET /apis/resource.k8s.io/v1/namespaces/team/resourceclaimtemplates
finish_checks
