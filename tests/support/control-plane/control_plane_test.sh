#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# control_plane_test.sh: the tests' real control plane (control_plane.sh) is what it says it is, and
# leaves nothing behind: the pinned releases answer (/version, etcd's version, kubectl's), the
# controller-manager runs its controllers (a new namespace gets its ServiceAccount), the scheduler
# binds a pod to a Node, DRA's resource.k8s.io/v1 is served; stopping it, or kill -9 of it, leaves
# no process of it running. 77 (skip) when the components are not built (scripts/build-upstream.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
source "$repo/tests/support/check.sh"
source "$here/lib.sh"

control_plane_session --with controller-manager,scheduler

k8s_version=$("$repo/scripts/build-upstream.sh" --version kubernetes)
etcd_version=$("$repo/scripts/build-upstream.sh" --version etcd)

server_version() { kc get --raw /version | grep -q "\"gitVersion\": *\"$k8s_version\""; }
check "kube-apiserver says it is $k8s_version" server_version || kc get --raw /version
etcd_is() { curl -fsS "$CP_ETCD/version" | grep -q "\"etcdserver\":\"${etcd_version#v}\""; }
check "it stores in etcd $etcd_version" etcd_is
client_version() { kc version --client -o json | grep -q "\"gitVersion\": *\"$k8s_version\""; }
check "kubectl is $k8s_version" client_version
dra_served() { kc api-resources --api-group resource.k8s.io -o name | grep -q '^resourceclaims\.resource\.k8s\.io$' &&
               kc get --raw /apis/resource.k8s.io/v1 >/dev/null; }
check "DRA's resource.k8s.io/v1 is served" dra_served

# The controller-manager: the serviceaccount controller gives a new namespace its "default".
kc create namespace cp-test >/dev/null
has_default_sa() {
  local i
  for i in $(seq 150); do
    kc get serviceaccount default -n cp-test >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}
check "kube-controller-manager: namespace cp-test got ServiceAccount default" has_default_sa

# The scheduler: a pod (tolerating every taint, so that the node lifecycle controller's view of a
# node without a kubelet does not matter) is bound to the one Node.
kc create -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Node
metadata: {name: cp-node}
status:
  capacity: {cpu: "4", memory: 8Gi, pods: "10"}
  allocatable: {cpu: "4", memory: 8Gi, pods: "10"}
EOF
kc create -n cp-test -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  tolerations: [{operator: Exists}]
  containers: [{name: c, image: busybox}]
EOF
bound() {
  local i
  for i in $(seq 150); do
    [[ $(kc get pod p -n cp-test -o jsonpath='{.spec.nodeName}' 2>/dev/null) == cp-node ]] && return 0
    sleep 0.2
  done
  return 1
}
check "kube-scheduler bound the pod to cp-node" bound || kc get events -n cp-test

# Stopped: none of its processes is left.
cp_pids() { pgrep -f -- "$work/cp" || true; }
check "its servers run while it does" test -n "$(cp_pids)"
control_plane_stop
gone() { local i; for i in $(seq 50); do [[ -z $(cp_pids) ]] && return 0; sleep 0.2; done; return 1; }
check "stopped: no process of it is left" gone
check "stopped: etcd's data is removed" test ! -e "$work/cp/etcd-data"

# kill -9 of the control plane (a test that dies): its servers die with it (PR_SET_PDEATHSIG).
control_plane_start "$work/cp2" || { echo "FAIL the second control plane did not start"; finish_checks; }
kill -KILL "$control_plane_pid"
wait "$control_plane_pid" 2>/dev/null
control_plane_pid=
gone2() { local i; for i in $(seq 50); do [[ -z $(pgrep -f -- "$work/cp2") ]] && return 0; sleep 0.2; done; return 1; }
check "kill -9 of it: its servers die with it" gone2
finish_checks
