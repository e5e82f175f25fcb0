#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# examples_server_test.sh: every manifest under deploy/examples/ and e2e/hw/manifests/ (the templates
# filled as helm_chart_test fills them) is accepted by a real kube-apiserver v1.36.3
# (tests/support/control-plane; 77 = skip when it is not built): server-side apply, dry run, with
# strict field validation and the admission chain, after the CRDs they use are installed
# (tests/deploy/crds: the NetworkAttachmentDefinition of the Network Plumbing Working Group's
# specification, nv-ipam's IPPool). And the server is shown to refuse what is wrong: an unknown
# field of a Pod, a NetworkAttachmentDefinition whose spec.config is not a string.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$repo/tests/support/check.sh"
source "$repo/tests/support/control-plane/lib.sh"

control_plane_session

install_crds() { kc apply --server-side --validate=strict -f "$here/crds" >/dev/null; }
established() { kc wait --for condition=established --timeout 60s -f "$here/crds" >/dev/null; }
check "the CRDs the examples use are installed" install_crds || finish_checks
check "they are established" established || finish_checks
# What the namespaces of the examples need (without a controller-manager: their ServiceAccount).
for ns in default nvidia-network-operator; do
  kc create namespace "$ns" >/dev/null 2>&1
  kc create serviceaccount default -n "$ns" >/dev/null 2>&1
done

# The placeholders of e2e/hw/manifests/*-template.yaml, with helm_chart_test's values.
declare -A subst=([NAME]=ibcni-hw-test [RUN]=run-1 [NAD]=ib-sriov-hw [NAD_NAMESPACE]=default
  [IP]=192.168.100.201/24 [GUID]=02:00:00:00:ac:00:00:01 [IMAGE]=registry.example.com/perftest:1
  [RESOURCE]=nvidia.com/mlnx_ib_vf [RDMA_RESOURCE]=rdma/hca_shared_devices_a [PRIVILEGED]=false [NODE]=node-1)
fill() {
  local text name
  text=$(<"$1")
  for name in "${!subst[@]}"; do text=${text//\$\{$name\}/${subst[$name]}}; done
  printf '%s\n' "$text"
}
accepted() {  # accepted FILE: a server-side dry run with strict validation succeeds
  fill "$1" >"$work/manifest.yaml"
  kc apply --server-side --dry-run=server --validate=strict --field-manager ibcni-test -f "$work/manifest.yaml" \
    >"$work/apply.out" 2>&1 || { sed 's/^/    /' "$work/apply.out"; return 1; }
}
mapfile -t examples < <(cd "$repo" && find deploy/examples e2e/hw/manifests -type f -name '*.yaml' | sort)
for f in "${examples[@]}"; do
  check "the API server accepts $f" accepted "$repo/$f"
done
check "there were examples to check (${#examples[@]})" test "${#examples[@]}" -ge 10

refused() {  # refused WHAT YAML: the dry run fails and says WHAT
  printf '%s\n' "$2" >"$work/bad.yaml"
  ! kc apply --server-side --dry-run=server --validate=strict -f "$work/bad.yaml" >"$work/bad.out" 2>&1 &&
    grep -q -- "$1" "$work/bad.out" || { sed 's/^/    /' "$work/bad.out"; return 1; }
}
check "refused: a Pod with an unknown field" refused 'imagePulPolicy: field not declared in schema' \
  'apiVersion: v1
kind: Pod
metadata: {name: bad, namespace: default}
spec:
  containers: [{name: c, image: busybox, imagePulPolicy: Always}]'
check "refused: a NetworkAttachmentDefinition whose spec.config is an object" refused 'spec.config' \
  'apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: bad, namespace: default}
spec:
  config: {cniVersion: 1.0.0, type: ibcni}'
finish_checks
