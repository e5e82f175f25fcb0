#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# chart_rbac_test.sh IBCNI IBCNI_IPAM
# The chart's RBAC against the real authorizer: a real kube-apiserver (tests/support/control-plane,
# built from its module by scripts/build-upstream.sh; 77 = skip when it is not built) gets
# deploy/ibcni-daemonset.yaml (the chart rendered with its defaults) by server-side apply with strict
# field validation. Then ibcni-ipam's cluster mode runs with a token of the chart's ServiceAccount,
# as the installer's kubeconfig gives it: ADD claims a block (list + create of a Lease), the node
# agent's pass (`ibcni-ipam gc`) renews it (update) and gives the empty block back (delete), and a
# second node takes over the block of a Node that is gone (get of the Node, update of the Lease).
# Everything it needs is allowed; requests outside the grant, made with the same token, are refused
# with 403: another namespace's Leases, a Secret, Pods, a watch, a write to a Node, a list of Nodes.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
ibcni=${1:?usage: chart_rbac_test.sh IBCNI IBCNI_IPAM}
ipam=${2:?usage: chart_rbac_test.sh IBCNI IBCNI_IPAM}
source "$repo/tests/support/check.sh"
source "$repo/tests/support/control-plane/lib.sh"

control_plane_session

# ibcni-ipam sends its cluster requests through `ibcni http-relay` in its own directory.
mkdir -p "$work/bin"
cp "$ibcni" "$work/bin/ibcni" && cp "$ipam" "$work/bin/ibcni-ipam"

check "the chart's manifest is applied server-side with strict field validation" \
  kc apply --server-side --field-manager ibcni-test --validate=strict -f "$repo/deploy/ibcni-daemonset.yaml" \
  || finish_checks
sa_kubeconfig=$work/ibcni.kubeconfig
check "a token of ServiceAccount kube-system/ibcni (TokenRequest)" \
  control_plane_kubeconfig "$sa_kubeconfig" kube-system ibcni || finish_checks
control_plane_nodes node-a node-b

config() {  # config NODE: a network whose ibcni-ipam claims blocks of 4 as NODE, with the SA's kubeconfig
  cat <<EOF
{"cniVersion": "1.0.0", "name": "rbac-net", "type": "ibcni",
 "ipam": {"type": "ibcni-ipam", "dataDir": "$work/data-$1", "ranges": [[{"subnet": "10.77.0.0/29"}]],
          "cluster": {"backend": "kubernetes", "pool": "rbac-pool", "blockSize": 4, "nodeName": "$1",
                      "releaseAfterSeconds": 0, "leaseDurationSeconds": 10, "timeoutMs": 10000,
                      "kubernetes": {"kubeconfig": "$sa_kubeconfig", "namespace": "kube-system"}}}}
EOF
}
netns_dir=$work/netns
mkdir -p "$netns_dir"
cni() {  # cni VERB NODE CONTAINER: ibcni-ipam as the runtime calls it; stdout is the result
  local out
  out=$(config "$2" | CNI_COMMAND=$1 CNI_CONTAINERID=$3 CNI_NETNS=$netns_dir/$3 CNI_IFNAME=ib0 \
        CNI_PATH=$work/bin "$work/bin/ibcni-ipam" 2>>"$work/ipam.log")
  local rc=$?
  echo "$out"
  return $rc
}
leases() {  # the pool's block Leases (ibcni.io/kind=block) as "name holder" lines (admin)
  kc get leases -n kube-system -l ibcni.io/pool=rbac-pool,ibcni.io/kind=block \
    -o jsonpath='{range .items[*]}{.metadata.name} {.spec.holderIdentity}{"\n"}{end}'
}
holds() { leases | grep -q " $1\$"; }

add_gets_address() { cni ADD "$1" "$2" | grep -q '"10\.77\.0\.'; }
gc_pass() { config "$1" >"$work/$1.conf" && "$work/bin/ibcni-ipam" gc "$work/$1.conf" >>"$work/ipam.log" 2>&1; }
no_leases() { [[ -z $(leases) ]]; }
not_holds() { ! holds "$1"; }

touch "$netns_dir/pod-a1"
check "ADD on node-a with the ServiceAccount's token claims a block (list, create)" add_gets_address node-a pod-a1 \
  || { cat "$work/ipam.log"; finish_checks; }
check "the block's Lease is held by node-a" holds node-a

# The pod goes without a DEL (its netns is gone): the agent's pass gives its address back, renews
# and, the block being empty with releaseAfterSeconds 0, gives the block back (update, delete).
rm -f "$netns_dir/pod-a1"
check "the node agent's pass (ibcni-ipam gc) runs with the token" gc_pass node-a
check "the empty block was given back (its Lease deleted)" no_leases || { leases; kc get leases -n kube-system -o yaml | head -80; cat "$work/ipam.log"; }

# node-b claims a block, then its Node is deleted and its Lease lapses: node-a takes the block over
# (get of the Node, update of the Lease).
touch "$netns_dir/pod-b1" "$netns_dir/pod-a2" "$netns_dir/pod-a3" "$netns_dir/pod-a4" "$netns_dir/pod-a5"
check "ADD on node-b claims a block of its own" add_gets_address node-b pod-b1
check "node-b holds a block" holds node-b
kc delete node node-b >/dev/null
# node-a fills its block and needs more: it borrows (or takes over), and its agent's pass takes the
# gone node's block over once that block's Lease has lapsed (leaseDurationSeconds 10). Bounded at 60 s.
adds_succeed() { local p; for p in pod-a2 pod-a3 pod-a4 pod-a5; do add_gets_address node-a "$p" || return 1; done; }
check "node-a's ADDs past its own block succeed" adds_succeed
taken_over() {
  local deadline=$((SECONDS + 60))
  until gc_pass node-a && not_holds node-b; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}
check "node-a's pass took over the gone node's block once its Lease lapsed" taken_over
no_refusal() { ! grep -qi 'forbidden' "$work/ipam.log"; }
check "no RBAC refusal in ibcni-ipam's log" no_refusal || cat "$work/ipam.log"

# The same token, outside the grant: 403 from the authorizer.
token=$(awk '/token:/ {print $2}' "$sa_kubeconfig")
status() {  # status METHOD PATH [BODY]: the HTTP status of the request made with the SA's token
  curl -s -o /dev/null -w '%{http_code}' --cacert "$CP_CA" -H "Authorization: Bearer $token" -X "$1" \
    ${3:+-H 'Content-Type: application/json' -d "$3"} "$CP_SERVER$2"
}
kc create namespace other >/dev/null
expect() { [[ $(status "$2" "$3" "${4:-}") == "$1" ]]; }
check "allowed: list the Leases of kube-system" expect 200 GET /apis/coordination.k8s.io/v1/namespaces/kube-system/leases
check "allowed: get a Node" expect 200 GET /api/v1/nodes/node-a
check "refused: the Leases of another namespace" expect 403 GET /apis/coordination.k8s.io/v1/namespaces/other/leases
check "refused: creating a Lease in another namespace" expect 403 POST /apis/coordination.k8s.io/v1/namespaces/other/leases \
  '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"x"}}'
check "refused: a Secret" expect 403 GET /api/v1/namespaces/kube-system/secrets
check "refused: Pods" expect 403 GET /api/v1/pods
check "refused: a watch of Leases" expect 403 GET '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?watch=1&timeoutSeconds=1'
check "refused: patching a Node" expect 403 PATCH /api/v1/nodes/node-a
check "refused: the list of Nodes" expect 403 GET /api/v1/nodes
check "refused: deletecollection of Leases" expect 403 DELETE /apis/coordination.k8s.io/v1/namespaces/kube-system/leases
finish_checks
