#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# k8s_emulator_clients_test.sh MODELS_DIR TOOLS_DIR: the Kubernetes API emulator (server.js) driven
# by real API clients, to show it answers as kube-apiserver does: Debian's kubectl (package
# kubernetes-client, fetched into TOOLS_DIR by debian_kubectl.sh and run by its full path, never
# /usr/bin/kubectl, which may be another package's) and Debian's python3-kubernetes (run with
# /usr/bin/python3: k8s_emulator_clients_test.py). A real 1-member etcd and the emulator over
# HTTPS (kubectl sends a bearer token only over TLS) with a test CA (openssl), a kubeconfig with
# a bearer token. Each check asserts the exact output or Status. Everything started here is
# stopped by PID and the work directory removed, also on failure.
# Exit 77 (skipped) only when a tool cannot be had: apt-get/dpkg-deb (not Debian), or
# python3-kubernetes for /usr/bin/python3. Needs node, npm, curl, jq, openssl, etcd
# (scripts/install-deps.sh).
# shellcheck disable=SC2317,SC2016  # the helpers run through check; bash -c scripts take $1...
set -uo pipefail
models=${1:?usage: k8s_emulator_clients_test.sh MODELS_DIR TOOLS_DIR}
tools=${2:?usage: k8s_emulator_clients_test.sh MODELS_DIR TOOLS_DIR}
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# shellcheck source=../check.sh
source "$here/../check.sh"
# shellcheck source=../etcd/etcd_cluster.sh
source "$here/../etcd/etcd_cluster.sh"
# shellcheck source=k8s_emulator.sh
source "$here/k8s_emulator.sh"

for tool in curl jq openssl node npm etcd; do
  command -v "$tool" >/dev/null || { echo "FAIL $tool is not installed (scripts/install-deps.sh)"; exit 1; }
done
kubectl=$("$here/debian_kubectl.sh" "$tools/kubernetes-client")
case $? in
  0) ;;
  77) echo "SKIP Debian's kubectl cannot be had here (no apt-get/dpkg-deb)"; exit 77 ;;
  *) echo "FAIL Debian's kubectl: debian_kubectl.sh $tools/kubernetes-client failed"; exit 1 ;;
esac
python=/usr/bin/python3
if ! [[ -x $python ]] || ! "$python" -c 'import kubernetes' 2>/dev/null; then
  echo "SKIP $python has no kubernetes module (Debian: apt-get install python3-kubernetes)"
  exit 77
fi
# Loopback only: no proxy from the environment.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
work=$(mktemp -d "${TMPDIR:-/tmp}/ibcni-k8s-clients.XXXXXX") || exit 1
cleanup() {
  k8s_emulator_stop "$work/emu"
  etcd_cluster_stop "$work/etcd"
  rm -rf "$work"
}
trap cleanup EXIT
export HOME=$work/home KUBECONFIG=$work/kubeconfig
mkdir -p "$HOME"

check "Debian's kubectl is v1.20 ($kubectl)" bash -c '"$1" version --client -o json | jq -e ".clientVersion.gitVersion | startswith(\"v1.20.\")" >/dev/null' _ "$kubectl"
check "python3-kubernetes is Debian's ($("$python" -c 'import kubernetes; print(kubernetes.__version__, kubernetes.__file__)'))" \
  "$python" -c 'import kubernetes, sys; sys.exit(0 if kubernetes.__file__.startswith("/usr/lib/python3/dist-packages/") else 1)'
check "kubernetes-models installed from tests/deploy/k8s/package-lock.json" k8s_emulator_setup "$models" || finish_checks
check "a real etcd starts" etcd_cluster_start 1 "$work/etcd" || finish_checks

pki=$work/pki
mkdir -p "$pki"
make_pki() {
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -subj "/CN=emulator-ca" -days 2 -out "$pki/ca.crt" 2>/dev/null &&
    openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/server.key" -subj "/CN=127.0.0.1" -out "$pki/server.csr" 2>/dev/null &&
    printf 'subjectAltName=IP:127.0.0.1\n' >"$pki/server.ext" &&
    openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 2 \
      -extfile "$pki/server.ext" -out "$pki/server.crt" 2>/dev/null
}
check "a test CA and the emulator's server certificate (openssl)" make_pki || finish_checks
echo "tester-token,tester,uid-1" >"$work/tokens"
cat >"$work/rbac" <<'EOF'
{"rules": [
  {"user": "tester", "namespace": "*", "resource": "leases", "verbs": ["*"]},
  {"user": "tester", "resource": "nodes", "verbs": ["get", "list"]},
  {"user": "tester", "resource": "namespaces", "verbs": ["get", "list"]}
]}
EOF
check "the emulator starts over HTTPS" k8s_emulator_start "$work/emu" "$models" "$ETCD_ENDPOINTS" \
  --tokens "$work/tokens" --rbac "$work/rbac" --tls-cert "$pki/server.crt" --tls-key "$pki/server.key" || finish_checks
url=$K8S_EMULATOR_URL
cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: emulator
  cluster:
    server: $url
    certificate-authority: $pki/ca.crt
users:
- name: tester
  user:
    token: tester-token
contexts:
- name: emulator
  context: {cluster: emulator, user: tester, namespace: kube-system}
current-context: emulator
EOF
admin() { curl -sS --max-time 10 --cacert "$pki/ca.crt" -o /dev/null -w '%{http_code}' -X "$1" "$url/_emulator/$2" ${3:+-d "$3"}; }
check "the admin path adds Node node-a and namespace clients-py" \
  test "$(admin POST nodes '{"name":"node-a"}') $(admin POST namespaces '{"name":"clients-py"}')" = "201 201"

# kc ARGS...: runs Debian's kubectl; its stdout in $work/kout, stderr in $work/kerr, status in kc_rc.
kc() {
  "$kubectl" --cache-dir "$work/kube-cache" --request-timeout 20s "$@" >"$work/kout" 2>"$work/kerr"
  kc_rc=$?
}
show() { echo "    kubectl ${*}: status $kc_rc; stdout: $(head -c 600 "$work/kout"); stderr: $(head -c 600 "$work/kerr")" >&2; }
# kc_is STATUS 'STDOUT' 'STDERR' ARGS...: kubectl ARGS answers exactly that (a pattern when it starts with ~).
same() { if [[ $1 == "~"* ]]; then [[ $2 =~ ${1:1} ]]; else [[ $2 == "$1" ]]; fi; }
kc_is() {
  local st=$1 out=$2 err=$3
  shift 3
  kc "$@"
  if [[ $kc_rc != "$st" ]] || ! same "$out" "$(cat "$work/kout")" || ! same "$err" "$(cat "$work/kerr")"; then
    show "$@"
    echo "    expected: status $st; stdout: $out; stderr: $err" >&2
    return 1
  fi
}
manifest() { # NAME [FINALIZER]: a Lease manifest (YAML) in $work/NAME.yaml
  {
    echo "apiVersion: coordination.k8s.io/v1"
    echo "kind: Lease"
    echo "metadata:"
    echo "  name: $1"
    echo "  labels: {app: kc}"
    [[ -n ${2:-} ]] && echo "  finalizers: [$2]"
    echo "spec: {holderIdentity: node-a, leaseDurationSeconds: 30}"
  } >"$work/$1.yaml"
  echo "$work/$1.yaml"
}
# /openapi/v2 is not emulated: kubectl's client-side validation cannot fetch the schema.
kv=(--validate=false)

# --- kubectl -------------------------------------------------------------------------------------
check "kubectl version: the emulator's /version" kc_is 0 "~Server Version: version.Info\\{Major:\"1\", Minor:\"34\"" "" version
check "kubectl get leases -n kube-system: none yet" kc_is 0 "" "No resources found in kube-system namespace." get leases -n kube-system
check "kubectl create -f: created" kc_is 0 "lease.coordination.k8s.io/kc1 created" "" create "${kv[@]}" -f "$(manifest kc1)"
check "kubectl create -f again: AlreadyExists" kc_is 1 "" \
  "Error from server (AlreadyExists): error when creating \"$work/kc1.yaml\": leases.coordination.k8s.io \"kc1\" already exists" \
  create "${kv[@]}" -f "$work/kc1.yaml"
check "kubectl get lease kc1 -o json: a Lease with a resourceVersion and a uid" kc_is 0 "~\"resourceVersion\": \"[0-9]+\"" "" get lease kc1 -o json
cp "$work/kout" "$work/kc1.json"
check "  ... uid, namespace, creationTimestamp, labels, spec as created" jq -e '
  .kind == "Lease" and .apiVersion == "coordination.k8s.io/v1" and (.metadata.uid | length == 36) and .metadata.namespace == "kube-system"
  and (.metadata.creationTimestamp | test("Z$")) and .metadata.labels == {app: "kc"} and .spec == {holderIdentity: "node-a", leaseDurationSeconds: 30}' \
  "$work/kc1.json" >/dev/null
check "kubectl get leases: the Table's columns NAME HOLDER AGE" kc_is 0 "~^NAME +HOLDER +AGE
kc1 +node-a +[0-9]+s$" "" get leases
check "kubectl get leases -A: with the NAMESPACE column" kc_is 0 "~^NAMESPACE +NAME +HOLDER +AGE
kube-system +kc1 +node-a" "" get leases -A
check "kubectl get leases -l 'app in (kc,other)' (set-based)" kc_is 0 "~kc1 +node-a" "" get leases -l 'app in (kc,other)'
check "kubectl get leases -l 'app notin (kc)'" kc_is 0 "" "No resources found in kube-system namespace." get leases -l 'app notin (kc)'
check "kubectl get leases -l 'bad=selector=x': 400 with the parser's message" kc_is 1 "" \
  "Error from server (BadRequest): Unable to find \"coordination.k8s.io/v1, Resource=leases\" that match label selector \"bad=selector=x\", field selector \"\": found '=', expected: ',' or 'end of string'" \
  get leases -l 'bad=selector=x'
check "kubectl get leases -l 'a in (b': unable to parse requirement" kc_is 1 "" \
  "~unable to parse requirement: found '', expected: ',' or '\\)'$" get leases -l 'a in (b'
jq '.spec.holderIdentity = "node-b"' "$work/kc1.json" >"$work/kc1-b.json"
check "kubectl replace -f with the current resourceVersion: replaced" kc_is 0 "lease.coordination.k8s.io/kc1 replaced" "" \
  replace "${kv[@]}" -f "$work/kc1-b.json"
check "kubectl replace -f with the now stale resourceVersion: Conflict" kc_is 1 "" \
  "Error from server (Conflict): error when replacing \"$work/kc1-b.json\": Operation cannot be fulfilled on leases.coordination.k8s.io \"kc1\": the object has been modified; please apply your changes to the latest version and try again" \
  replace "${kv[@]}" -f "$work/kc1-b.json"
jq 'del(.metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp) | .spec.holderIdentity = "node-c"' "$work/kc1.json" >"$work/kc1-norv.json"
check "kubectl replace -f without resourceVersion: kubectl reads and fills it in, replaced" \
  kc_is 0 "lease.coordination.k8s.io/kc1 replaced" "" replace "${kv[@]}" -f "$work/kc1-norv.json"
# kubectl words a 422 from the Status' details (kind "leases", as genericregistry.Store sets it).
check "kubectl replace --raw (a PUT exactly as the file is) without resourceVersion: 422 Invalid" kc_is 1 "" \
  "The leases \"kc1\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update" \
  replace "${kv[@]}" --raw /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kc1 -f "$work/kc1-norv.json"
check "  ... the Lease is node-c's (the raw PUT changed nothing)" kc_is 0 "node-c" "" get lease kc1 -o 'jsonpath={.spec.holderIdentity}'
check "kubectl create -n nonexistent: namespaces \"nonexistent\" not found" kc_is 1 "" \
  "Error from server (NotFound): error when creating \"$work/kc1.yaml\": namespaces \"nonexistent\" not found" \
  create "${kv[@]}" -n nonexistent -f "$work/kc1.yaml"
# kubectl --dry-run=server first reads /openapi/v2 to see whether the resource supports dry runs.
check "kubectl create --dry-run=server: refused by kubectl itself (no /openapi/v2 here)" kc_is 1 "" \
  "error: error when creating \"$work/kc2.yaml\": failed to download openapi: the server could not find the requested resource" \
  create "${kv[@]}" --dry-run=server -f "$(manifest kc2)"
check "kubectl label (a strategic merge patch): labeled" kc_is 0 "lease.coordination.k8s.io/kc1 labeled" "" label lease kc1 tier=x
check "  ... both labels" kc_is 0 '{"app":"kc","tier":"x"}' "" get lease kc1 -o 'jsonpath={.metadata.labels}'
check "kubectl get nodes: node-a Ready" kc_is 0 "~^NAME +STATUS +ROLES +AGE +VERSION
node-a +Ready +<none> +[0-9]+s +$" "" get nodes
check "kubectl get namespaces: the four defaults and clients-py, Active" kc_is 0 "~^NAME +STATUS +AGE
clients-py +Active +[0-9]+s
default +Active +[0-9]+s
kube-node-lease +Active +[0-9]+s
kube-public +Active +[0-9]+s
kube-system +Active +[0-9]+s$" "" get namespaces
check "kubectl get namespace nonexistent: NotFound" kc_is 1 "" 'Error from server (NotFound): namespaces "nonexistent" not found' get namespace nonexistent
check "kubectl delete lease kc1: deleted" kc_is 0 'lease.coordination.k8s.io "kc1" deleted' "" delete lease kc1
check "  ... gone" kc_is 1 "" 'Error from server (NotFound): leases.coordination.k8s.io "kc1" not found' get lease kc1
check "kubectl delete of a missing Lease: NotFound" kc_is 1 "" 'Error from server (NotFound): leases.coordination.k8s.io "kc1" not found' delete lease kc1

# Finalizers: a DELETE only marks the Lease (kubectl's --wait would watch it, which is not emulated).
check "a Lease with a finalizer: created" kc_is 0 "lease.coordination.k8s.io/kf created" "" create "${kv[@]}" -f "$(manifest kf example.com/keep)"
check "kubectl delete --wait=false: deleted (as kubectl prints it)" kc_is 0 'lease.coordination.k8s.io "kf" deleted' "" delete lease kf --wait=false
check "  ... but it stays, with a deletionTimestamp and grace period 0" kc_is 0 "~^[0-9T:-]+Z 0 example.com/keep$" "" \
  get lease kf -o 'jsonpath={.metadata.deletionTimestamp} {.metadata.deletionGracePeriodSeconds} {.metadata.finalizers[*]}'
check "kubectl patch removing the finalizer: patched" kc_is 0 "lease.coordination.k8s.io/kf patched" "" \
  patch lease kf --type=merge -p '{"metadata":{"finalizers":null}}'
check "  ... and the Lease is gone" kc_is 1 "" 'Error from server (NotFound): leases.coordination.k8s.io "kf" not found' get lease kf
check "the same with kubectl replace (the finalizer dropped from the manifest)" bash -c '
  "$1" --cache-dir "$2/kube-cache" create --validate=false -f "$3" >/dev/null &&
  "$1" --cache-dir "$2/kube-cache" delete lease kf --wait=false >/dev/null &&
  "$1" --cache-dir "$2/kube-cache" get lease kf -o json | jq "del(.metadata.finalizers)" >"$2/kf-nofin.json" &&
  [[ $("$1" --cache-dir "$2/kube-cache" replace --validate=false -f "$2/kf-nofin.json") == "lease.coordination.k8s.io/kf replaced" ]] &&
  ! "$1" --cache-dir "$2/kube-cache" get lease kf >/dev/null 2>&1' _ "$kubectl" "$work" "$work/kf.yaml"

# --- python3-kubernetes --------------------------------------------------------------------------------
check "python3-kubernetes: CoordinationV1Api and CoreV1Api (k8s_emulator_clients_test.py)" \
  "$python" "$here/k8s_emulator_clients_test.py" "$KUBECONFIG" clients-py

check "every body the clients sent was recorded by the validation log" bash -c '
  curl -sS --cacert "$1" "$2/_emulator/validation" | jq -e ".total > 20" >/dev/null' _ "$pki/ca.crt" "$url"
finish_checks
