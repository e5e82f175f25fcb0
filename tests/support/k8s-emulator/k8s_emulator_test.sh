#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# k8s_emulator_test.sh MODELS_DIR: the Kubernetes API emulator (server.js) against a real etcd
# started here, driven with curl: Lease create (201, 409 AlreadyExists, 20 concurrent creates of one
# name: exactly one wins), get/list by label, update by resourceVersion (409 Conflict when stale, 20
# concurrent updates from one version: exactly one wins), delete with uid/resourceVersion
# preconditions, Nodes, 401/403, 422 for invalid bodies and the validation log, faults (500,
# delay, garbage, dropped connection, an answer lost after the write), etcd fail-over past a dead
# endpoint, an error (not a hang) with etcd down, and client-certificate auth over HTTPS.
# kubernetes-models is installed into MODELS_DIR by tests/deploy/k8s/setup.sh (npm ci from its
# lock file). Needs node, npm, curl, jq, openssl, etcd (scripts/install-deps.sh).
# shellcheck disable=SC2317,SC2016  # the helpers run through check; bash -c scripts take $1...
set -uo pipefail
models=${1:?usage: k8s_emulator_test.sh MODELS_DIR}
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
work=$(mktemp -d "${TMPDIR:-/tmp}/ibcni-k8s-emulator.XXXXXX") || exit 1
cleanup() {
  k8s_emulator_stop "$work/emu"
  k8s_emulator_stop "$work/emu-tls"
  etcd_cluster_stop "$work/etcd"
  rm -rf "$work"
}
trap cleanup EXIT

check "kubernetes-models installed from tests/deploy/k8s/package-lock.json" k8s_emulator_setup "$models" ||
  finish_checks
check "a real etcd starts" etcd_cluster_start 1 "$work/etcd" || finish_checks
etcd_ep=$ETCD_ENDPOINTS
# A loopback port nobody listens on: the emulator must fail over past it to the real member.
dead=$(_etcd_cluster_free_port "$(etcd_cluster_endpoints "$work/etcd" 0 | sed 's/.*://')")

sa=system:serviceaccount:kube-system:ibcni
cat >"$work/tokens" <<EOF
good-token,$sa,uid-1
reader-token,reader,uid-2
admin-token,admin,uid-3
updater-token,updater,uid-4
EOF
cat >"$work/rbac" <<EOF
{"rules": [
  {"user": "$sa", "namespace": "kube-system", "resource": "leases", "verbs": ["get", "list", "create", "update", "delete"]},
  {"user": "$sa", "resource": "nodes", "verbs": ["get"]},
  {"user": "reader", "namespace": "kube-system", "resource": "leases", "verbs": ["get", "list"]},
  {"user": "client-cert-user", "namespace": "kube-system", "resource": "leases", "verbs": ["get", "create"]},
  {"user": "admin", "namespace": "*", "resource": "leases", "verbs": ["*"]},
  {"user": "admin", "resource": "namespaces", "verbs": ["get", "list"]},
  {"user": "admin", "resource": "nodes", "verbs": ["get", "list"]},
  {"user": "updater", "namespace": "kube-system", "resource": "leases", "verbs": ["get", "update"]}
]}
EOF
check "the emulator starts (etcd endpoints: a dead one first, then the real member)" \
  k8s_emulator_start "$work/emu" "$models" "http://127.0.0.1:$dead,$etcd_ep" \
  --tokens "$work/tokens" --rbac "$work/rbac" --etcd-timeout-ms 2000 || finish_checks
url=$K8S_EMULATOR_URL
leases=/apis/coordination.k8s.io/v1/namespaces/kube-system/leases

# req METHOD PATH [BODY [TOKEN]]: the answer's body in $work/out, its status code on stdout.

req() {
  local token=${4-good-token} args=()
  [[ -n $token ]] && args+=(-H "Authorization: Bearer $token")
  [[ -n ${3:-} ]] && args+=(-H "Content-Type: application/json" --data-binary "$3")
  curl -sS -g --max-time 20 -o "$work/out" -w '%{http_code}' -X "$1" "${args[@]}" "$url$2"
}
# expect CODE REASON METHOD PATH [BODY [TOKEN]]: the status code, and (unless REASON is -) a
# Kubernetes Status with that reason and code; shows the answer when not.
expect() {
  local code=$1 reason=$2 got
  shift 2
  got=$(req "$@")
  if [[ $got != "$code" ]]; then
    echo "    $1 $2: HTTP $got, expected $code: $(head -c 400 "$work/out")" >&2
    return 1
  fi
  [[ $reason == - ]] && return 0
  jq -e --arg r "$reason" --argjson c "$code" \
    '.kind == "Status" and .apiVersion == "v1" and .status == "Failure" and .reason == $r and .code == $c and (.message | length > 0)' \
    "$work/out" >/dev/null || { echo "    not a Status $reason: $(head -c 400 "$work/out")" >&2; return 1; }
}
out_has() { jq -e "$@" "$work/out" >/dev/null || { echo "    ${*: -1} is false for $(head -c 400 "$work/out")" >&2; return 1; }; }
lease() { # NAME [LABELS_JSON [RESOURCE_VERSION [HOLDER]]]
  jq -cn --arg n "$1" --argjson l "${2:-{\}}" --arg rv "${3:-}" --arg h "${4:-node-a}" \
    '{apiVersion: "coordination.k8s.io/v1", kind: "Lease",
      metadata: ({name: $n, labels: $l} + (if $rv == "" then {} else {resourceVersion: $rv} end)),
      spec: {holderIdentity: $h, leaseDurationSeconds: 600, acquireTime: "2026-11-24T18:00:00.000000Z",
             renewTime: "2026-11-24T18:00:00.000000Z"}}'
}
b64() { printf '%s' "$1" | base64 -w0; }
etcd_mod_revision() { # KEY: the key's mod_revision in etcd, empty when absent
  curl -sS --max-time 5 -X POST "$etcd_ep/v3/kv/range" -d "{\"key\":\"$(b64 "$1")\"}" | jq -r '.kvs[0].mod_revision // empty'
}

# --- create ------------------------------------------------------------------------------------
check "healthz answers without credentials" expect 200 - GET /healthz "" ""
check "POST a Lease: 201 (through the dead etcd endpoint's fail-over)" expect 201 - POST "$leases" "$(lease b1 '{"ibcni.io/pool":"p0"}')"
check "the created Lease is a Kubernetes object with server-set metadata" out_has \
  '.apiVersion == "coordination.k8s.io/v1" and .kind == "Lease" and .metadata.name == "b1" and .metadata.namespace == "kube-system"
   and (.metadata.uid | test("^[0-9a-f-]{36}$")) and (.metadata.resourceVersion | test("^[1-9][0-9]*$"))
   and (.metadata.creationTimestamp | test("^[0-9-]{10}T[0-9:]{8}Z$")) and .spec.holderIdentity == "node-a"'
rv1=$(jq -r .metadata.resourceVersion "$work/out")
uid1=$(jq -r .metadata.uid "$work/out")
check "it is stored in etcd under /registry/leases/kube-system/b1, resourceVersion = mod_revision" \
  test "$(etcd_mod_revision /registry/leases/kube-system/b1)" = "$rv1"
check "POST the same name again: 409 AlreadyExists" expect 409 AlreadyExists POST "$leases" "$(lease b1)"
check "the AlreadyExists Status names the Lease" out_has '.details.name == "b1" and .details.kind == "leases" and .details.group == "coordination.k8s.io"'
# The etcd3 store refuses it (storage.ErrResourceVersionSetOnCreate), a plain error: 500 without a reason.
check "a resourceVersion on create: 500, \"resourceVersion should not be set on objects to be created\"" \
  expect 500 - POST "$leases" "$(lease b9 '{}' 5)"
check "  ... a Status without a reason, as kube-apiserver answers it" \
  out_has '.kind == "Status" and .code == 500 and (has("reason") | not) and .message == "resourceVersion should not be set on objects to be created"'
check "  ... nothing stored" test -z "$(etcd_mod_revision /registry/leases/kube-system/b9)"

race_create() {
  local i pids=()
  mkdir -p "$work/race"
  for ((i = 0; i < 20; i++)); do
    curl -sS --max-time 20 -o "$work/race/$i.out" -w '%{http_code}\n' -X POST -H "Authorization: Bearer good-token" \
      -H "Content-Type: application/json" --data-binary "$(lease race '{}' '' "node-$i")" "$url$leases" >"$work/race/$i.code" &
    pids+=($!)
  done
  wait "${pids[@]}"
  local created conflicts
  created=$(cat "$work/race"/*.code | grep -c '^201$')
  conflicts=$(jq -s '[.[] | select(.reason == "AlreadyExists" and .code == 409)] | length' "$work/race"/*.out)
  echo "    concurrent creates: $created created, $conflicts AlreadyExists" >&2
  ((created == 1 && conflicts == 19))
}
check "20 concurrent creates of one name: exactly one 201, nineteen 409 AlreadyExists" race_create
winner=$(grep -l '^201$' "$work/race"/*.code | sed 's/\.code$/.out/')
check "the stored holder is the one winner's" \
  test "$(req GET "$leases/race" >/dev/null; jq -r .spec.holderIdentity "$work/out")" = "$(jq -r .spec.holderIdentity "$winner")"

# --- get, list ----------------------------------------------------------------------------------
check "GET a Lease: 200, same uid and resourceVersion" expect 200 - GET "$leases/b1"
check "  ... uid $uid1, resourceVersion $rv1" out_has ".metadata.uid == \"$uid1\" and .metadata.resourceVersion == \"$rv1\""
check "GET a missing Lease: 404 NotFound" expect 404 NotFound GET "$leases/nope"
expect 201 - POST "$leases" "$(lease l1 '{"ibcni.io/pool":"p0","ibcni.io/node":"n1"}')" &&
  expect 201 - POST "$leases" "$(lease l2 '{"ibcni.io/pool":"p0","ibcni.io/node":"n2"}')" &&
  expect 201 - POST "$leases" "$(lease l3 '{"ibcni.io/pool":"p1","ibcni.io/node":"n1"}')"
names() { jq -r '[.items[].metadata.name] | sort | join(" ")' "$work/out"; }
list_is() { # SELECTOR(urlencoded) NAMES
  expect 200 - GET "$leases?labelSelector=$1" || return 1
  out_has '.kind == "LeaseList" and .apiVersion == "coordination.k8s.io/v1" and (.metadata.resourceVersion | test("^[0-9]+$"))' || return 1
  [[ $(names) == "$2" ]] || { echo "    selector $1: got '$(names)', expected '$2'" >&2; return 1; }
}
check "list by label ibcni.io/pool=p0" list_is 'ibcni.io%2Fpool%3Dp0' "b1 l1 l2"
check "list by two labels, comma-joined (pool=p0,node=n1)" list_is 'ibcni.io%2Fpool%3Dp0%2Cibcni.io%2Fnode%3Dn1' "l1"
check "list by label inequality (pool!=p0, with the label)" list_is 'ibcni.io%2Fpool%21%3Dp0%2Cibcni.io%2Fpool' "l3"
check "list without a selector: every Lease of the namespace" list_is '' "b1 l1 l2 l3 race"
check "set-based: pool in (p1,p9)" list_is 'ibcni.io%2Fpool+in+(p1%2Cp9)' "l3"
check "set-based: node notin (n1) (also those without the label)" list_is 'ibcni.io%2Fnode+notin+(n1)' "b1 l2 race"
check "set-based: exists and !exists (node, !node)" list_is 'ibcni.io%2Fnode%2C%21ibcni.io%2Fpool' ""
check "set-based: !node" list_is '%21ibcni.io%2Fnode' "b1 race"
selector_error() { # SELECTOR(urlencoded) MESSAGE: 400 BadRequest with exactly that message
  expect 400 BadRequest GET "$leases?labelSelector=$1" || return 1
  out_has --arg m "$2" '.message == $m and (has("details") | not)'
}
check "selector a==b=c: 400 \"found '=', expected: ',' or 'end of string'\"" \
  selector_error 'a%3D%3Db%3Dc' "found '=', expected: ',' or 'end of string'"
check "selector 'a in (b': 400 \"unable to parse requirement: found '', expected: ',' or ')'\"" \
  selector_error 'a+in+(b' "unable to parse requirement: found '', expected: ',' or ')'"
check "selector with a bad value (a=b\$): the label value's message, at values[0][a]" \
  selector_error 'a%3Db%24' "unable to parse requirement: values[0][a]: Invalid value: \"b\$\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
check "selector with a bad key (app:x): <nil>: Invalid value" \
  selector_error 'app%3Ax' "unable to parse requirement: <nil>: Invalid value: \"app:x\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
check "field selector metadata.name=l2" bash -c '
  [[ $(curl -sS -H "Authorization: Bearer good-token" "$1?fieldSelector=metadata.name%3Dl2" | jq -r "[.items[].metadata.name] | join(\" \")") == l2 ]]' _ "$url$leases"
check "field selector on an unsupported field: 400" expect 400 BadRequest GET "$leases?fieldSelector=spec.holderIdentity%3Dx"
check "  ... naming the fields Leases support" out_has '.message == "\"spec.holderIdentity\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""'
paged() { # limit 2: two pages and a last one, continue tokens, remainingItemCount
  local cont="" names="" page
  for page in 1 2 3; do
    expect 200 - GET "$leases?limit=2${cont:+&continue=$cont}" || return 1
    names+=" $(names)"
    cont=$(jq -r '.metadata.continue // empty' "$work/out")
    if ((page < 3)); then
      [[ -n $cont ]] && out_has ".metadata.remainingItemCount == $((5 - 2 * page))" || return 1
    fi
  done
  [[ -z $cont && $(tr ' ' '\n' <<<"$names" | sed '/^$/d' | sort | tr '\n' ' ') == "b1 l1 l2 l3 race " ]] ||
    { echo "    pages gave '$names', continue '$cont'" >&2; return 1; }
}
check "list with limit=2 pages with continue tokens (5 Leases: 2, 2, 1)" paged

# --- update -------------------------------------------------------------------------------------
check "PUT with the current resourceVersion: 200" expect 200 - PUT "$leases/b1" "$(lease b1 '{"ibcni.io/pool":"p0"}' "$rv1" node-b)"
rv2=$(jq -r .metadata.resourceVersion "$work/out")
check "  ... a new resourceVersion ($rv1 -> $rv2), same uid, new holder" \
  out_has "(.metadata.resourceVersion | tonumber) > $rv1 and .metadata.uid == \"$uid1\" and .spec.holderIdentity == \"node-b\""
check "  ... and etcd's mod_revision is it" test "$(etcd_mod_revision /registry/leases/kube-system/b1)" = "$rv2"
check "PUT with the stale resourceVersion: 409 Conflict" expect 409 Conflict PUT "$leases/b1" "$(lease b1 '{}' "$rv1" node-c)"
check "  ... nothing changed" bash -c '[[ $(curl -sS -H "Authorization: Bearer good-token" "$1" | jq -r .spec.holderIdentity) == node-b ]]' _ "$url$leases/b1"
# Leases allow create-on-update (lease.Strategy.AllowCreateOnUpdate) but not an unconditional
# update (AllowUnconditionalUpdate false); the body's uid is a storage precondition.
check "PUT without resourceVersion: 422 Invalid" expect 422 Invalid PUT "$leases/b1" "$(lease b1 '{}' '' node-x)"
check "  ... as genericregistry.Store writes it (resource as kind, 0x0, one cause)" out_has '
  .message == "leases.coordination.k8s.io \"b1\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
  and .details == {name: "b1", group: "coordination.k8s.io", kind: "leases",
    causes: [{reason: "FieldValueInvalid", message: "Invalid value: 0x0: must be specified for an update", field: "metadata.resourceVersion"}]}'
check "PUT of a missing Lease with a uid: 409 Conflict (the uid precondition)" \
  expect 409 Conflict PUT "$leases/nope" "$(lease nope '{}' "$rv1" | jq -c '.metadata.uid = "0b5c0a5e-0000-4000-8000-000000000001"')"
check "  ... the storage layer's precondition message" out_has '.message == "Operation cannot be fulfilled on leases.coordination.k8s.io \"nope\": StorageError: invalid object, Code: 4, Key: /registry/leases/kube-system/nope, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: 0b5c0a5e-0000-4000-8000-000000000001, UID in object meta: "'
check "  ... nothing created" expect 404 NotFound GET "$leases/nope"
check "PUT of a missing Lease with a resourceVersion, no uid: 201 (created; the version is not checked)" \
  expect 201 - PUT "$leases/nope" "$(lease nope '{}' "$rv1")"
check "  ... a new object: a uid, a resourceVersion of its own" out_has ".metadata.resourceVersion != \"$rv1\" and (.metadata.uid | length == 36)"
check "PUT of a missing Lease without either: 201" expect 201 - PUT "$leases/nope2" "$(lease nope2)"
check "PUT with a non-numeric resourceVersion: 422" expect 422 Invalid PUT "$leases/b1" "$(lease b1 '{}' abc)"
check "PUT whose namespace differs from the URL's: 400" expect 400 BadRequest PUT "$leases/b1" "$(lease b1 '{}' "$rv2" | jq -c '.metadata.namespace = "default"')"
check "  ... handlers.checkName's message" out_has '.message == "the namespace of the object (default) does not match the namespace on the URL (kube-system)"' 
check "PUT whose name differs from the URL's: 400" expect 400 BadRequest PUT "$leases/b1" "$(lease other '{}' "$rv2")"
race_update() {
  local i pids=()
  mkdir -p "$work/urace"
  for ((i = 0; i < 20; i++)); do
    curl -sS --max-time 20 -o "$work/urace/$i.out" -w '%{http_code}\n' -X PUT -H "Authorization: Bearer good-token" \
      -H "Content-Type: application/json" --data-binary "$(lease b1 '{}' "$rv2" "taker-$i")" "$url$leases/b1" >"$work/urace/$i.code" &
    pids+=($!)
  done
  wait "${pids[@]}"
  local won conflicts
  won=$(cat "$work/urace"/*.code | grep -c '^200$')
  conflicts=$(jq -s '[.[] | select(.reason == "Conflict" and .code == 409)] | length' "$work/urace"/*.out)
  echo "    concurrent updates: $won succeeded, $conflicts Conflict" >&2
  ((won == 1 && conflicts == 19))
}
check "20 concurrent updates from one resourceVersion: exactly one 200, nineteen 409 Conflict" race_update

# --- delete -------------------------------------------------------------------------------------
expect 200 - GET "$leases/l1"
rvl1=$(jq -r .metadata.resourceVersion "$work/out")
uidl1=$(jq -r .metadata.uid "$work/out")
delopts() { jq -cn --arg u "$1" --arg r "$2" '{kind: "DeleteOptions", apiVersion: "v1", preconditions: ({} + (if $u == "" then {} else {uid: $u} end) + (if $r == "" then {} else {resourceVersion: $r} end))}'; }
check "DELETE with a wrong uid precondition: 409 Conflict" expect 409 Conflict DELETE "$leases/l1" "$(delopts 00000000-0000-0000-0000-000000000000 "")"
check "DELETE with a stale resourceVersion precondition: 409 Conflict" expect 409 Conflict DELETE "$leases/l1" "$(delopts "$uidl1" "$rv1")"
check "  ... rest.BeforeDelete's message (the kind as resource)" out_has '.message | startswith("Operation cannot be fulfilled on Lease.coordination.k8s.io \"l1\": the ResourceVersion in the precondition")'
check "  ... the Lease is still there" expect 200 - GET "$leases/l1"
check "DELETE with matching uid and resourceVersion: 200" expect 200 - DELETE "$leases/l1" "$(delopts "$uidl1" "$rvl1")"
check "  ... a Status Success naming the Lease (the Store returns no object)" \
  out_has ". == {kind: \"Status\", apiVersion: \"v1\", metadata: {}, status: \"Success\", details: {name: \"l1\", group: \"coordination.k8s.io\", kind: \"leases\", uid: \"$uidl1\"}}"
check "  ... gone from the API" expect 404 NotFound GET "$leases/l1"
check "  ... and from etcd" test -z "$(etcd_mod_revision /registry/leases/kube-system/l1)"
check "DELETE of a missing Lease: 404 NotFound" expect 404 NotFound DELETE "$leases/l1"
check "DELETE without options: 200" expect 200 - DELETE "$leases/l2"

# --- namespaces (NamespaceLifecycle) --------------------------------------------------------------
ns_leases() { echo "/apis/coordination.k8s.io/v1/namespaces/$1/leases"; }
check "the default namespaces exist: default, kube-node-lease, kube-public, kube-system" bash -c '
  [[ $(curl -sS -H "Authorization: Bearer admin-token" "$1/api/v1/namespaces" | jq -r "[.items[].metadata.name] | join(\" \")") == "default kube-node-lease kube-public kube-system" ]]' _ "$url"
check "GET a namespace: a v1 Namespace, phase Active" expect 200 - GET /api/v1/namespaces/kube-system "" admin-token
check "  ... with the kubernetes.io/metadata.name label and the kubernetes finalizer" out_has '
  .kind == "Namespace" and .apiVersion == "v1" and .metadata.labels["kubernetes.io/metadata.name"] == "kube-system"
  and .spec.finalizers == ["kubernetes"] and .status.phase == "Active"'
check "namespaces need their own RBAC rule: 403 without" expect 403 Forbidden GET /api/v1/namespaces/default
check "POST in a namespace that does not exist: 404" expect 404 NotFound POST "$(ns_leases ghost)" "$(lease g1)" admin-token
check "  ... namespaces \"ghost\" not found, details kind namespaces" \
  out_has '.message == "namespaces \"ghost\" not found" and .details == {name: "ghost", kind: "namespaces"}'
check "  ... even for an invalid body (admission runs before validation)" \
  expect 404 NotFound POST "$(ns_leases ghost)" "$(lease g1 | jq -c '.spec.leaseDurationSeconds = 0')" admin-token
check "PUT (create-on-update) in a namespace that does not exist: 404 namespaces" expect 404 NotFound PUT "$(ns_leases ghost)/g1" "$(lease g1)" admin-token
check "  ... the namespace's NotFound" out_has '.details.kind == "namespaces"'
check "GET in a namespace that does not exist: 404 for the Lease" expect 404 NotFound GET "$(ns_leases ghost)/g1" "" admin-token
check "  ... (reads are not admitted)" out_has '.details.kind == "leases"'
check "the admin path creates a namespace: 201" expect 201 - POST /_emulator/namespaces '{"name":"ghost"}' ""
check "  ... twice: 409" expect 409 AlreadyExists POST /_emulator/namespaces '{"name":"ghost"}' ""
check "POST in it now: 201" expect 201 - POST "$(ns_leases ghost)" "$(lease g1)" admin-token
check "  ... stored under /registry/leases/ghost/g1" test -n "$(etcd_mod_revision /registry/leases/ghost/g1)"
check "list across namespaces (a rule for namespace *)" bash -c '
  curl -sS -H "Authorization: Bearer admin-token" "$1/apis/coordination.k8s.io/v1/leases" |
    jq -e "[.items[] | .metadata.namespace + \"/\" + .metadata.name] | index(\"ghost/g1\") != null and index(\"kube-system/b1\") != null" >/dev/null' _ "$url"
check "  ... not for a rule of one namespace: 403" expect 403 Forbidden GET /apis/coordination.k8s.io/v1/leases
check "a namespace being terminated (admin path, terminating=true)" expect 200 - DELETE "/_emulator/namespaces/ghost?terminating=true" "" ""
check "  ... POST in it: 403 Forbidden, cause NamespaceTerminating" expect 403 Forbidden POST "$(ns_leases ghost)" "$(lease g2)" admin-token
check "  ... the lifecycle plugin's message" out_has '.message == "leases.coordination.k8s.io \"g2\" is forbidden: unable to create new content in namespace ghost because it is being terminated"
  and .details.causes == [{reason: "NamespaceTerminating", message: "namespace ghost is being terminated", field: "metadata.namespace"}]'
check "  ... what is in it can still be read" expect 200 - GET "$(ns_leases ghost)/g1" "" admin-token
check "deleting it (admin path) deletes its Leases" expect 200 - DELETE /_emulator/namespaces/ghost "" ""
check "  ... gone from etcd" test -z "$(etcd_mod_revision /registry/leases/ghost/g1)$(etcd_mod_revision /registry/namespaces/ghost)"
check "default, kube-system and kube-public may not be deleted: 403" expect 403 Forbidden DELETE /_emulator/namespaces/kube-system "" ""

# --- create-on-update needs the create verb -------------------------------------------------------
check "PUT creating a Lease by a user with update but not create: 403" expect 403 Forbidden PUT "$leases/upd1" "$(lease upd1)" updater-token
check "  ... the create-on-update authorization's message" out_has '.message == "leases.coordination.k8s.io \"upd1\" is forbidden: "'

# --- finalizers ---------------------------------------------------------------------------------
fin_lease() { lease "$1" | jq -c --argjson f "$2" '.metadata.finalizers = $f'; }
check "a finalizer that is not a qualified name: 422" expect 422 Invalid POST "$leases" "$(fin_lease f0 '["bad name"]')"
check "  ... at metadata.finalizers" out_has '.details.causes[0].field == "metadata.finalizers"'
check "a Lease with a finalizer: 201" expect 201 - POST "$leases" "$(fin_lease f1 '["example.com/keep"]')"
uidf1=$(jq -r .metadata.uid "$work/out")
check "DELETE it: 200 with the object, not a Status (deletion pending)" expect 200 - DELETE "$leases/f1"
check "  ... deletionTimestamp set, deletionGracePeriodSeconds 0, the finalizer kept" out_has --arg uid "$uidf1" '
  .kind == "Lease" and .metadata.uid == $uid and (.metadata.deletionTimestamp | test("Z$")) and .metadata.deletionGracePeriodSeconds == 0
  and .metadata.finalizers == ["example.com/keep"]'
rvf1=$(jq -r .metadata.resourceVersion "$work/out")
check "  ... it stays: GET 200" expect 200 - GET "$leases/f1"
check "DELETE again with orphanDependents=false: 202 Accepted" \
  expect 202 - DELETE "$leases/f1" '{"kind":"DeleteOptions","apiVersion":"v1","orphanDependents":false}'
check "a create of its name meanwhile: 409, \"object is being deleted: ...\"" expect 409 AlreadyExists POST "$leases" "$(lease f1)"
check "  ... the message" out_has '.message == "object is being deleted: leases.coordination.k8s.io \"f1\" already exists"'
check "an update adding a finalizer while it is deleted: 422 Forbidden" \
  expect 422 Invalid PUT "$leases/f1" "$(fin_lease f1 '["example.com/keep","example.com/more"]' | jq -c --arg rv "$rvf1" '.metadata.resourceVersion = $rv')"
check "  ... the message" out_has '.details.causes[0] == {reason: "FieldValueForbidden", field: "metadata.finalizers",
  message: "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"example.com/more\"}"}'
check "an update removing the last finalizer: 200 ..." \
  expect 200 - PUT "$leases/f1" "$(lease f1 | jq -c --arg rv "$rvf1" '.metadata.resourceVersion = $rv')"
check "  ... and the Lease is gone" expect 404 NotFound GET "$leases/f1"
expect 201 - POST "$leases" "$(lease orph1)"
check "DELETE with propagationPolicy Orphan: the orphan finalizer (the GC then drops it and the Lease goes)" \
  expect 200 - DELETE "$leases/orph1" '{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Orphan"}'
check "  ... the answer has it" out_has '.kind == "Lease" and .metadata.finalizers == ["orphan"]'
gone_soon() { local i; for ((i = 0; i < 50; i++)); do [[ $(req GET "$1") == 404 ]] && return 0; sleep 0.1; done; return 1; }
check "  ... gone within 5 s" gone_soon "$leases/orph1"
check "propagationPolicy and orphanDependents together: 422 DeleteOptions" \
  expect 422 Invalid DELETE "$leases/b1" '{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Orphan","orphanDependents":true}'
check "  ... ValidateDeleteOptions' message" out_has '.message == "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Orphan\": orphanDependents and deletionPropagation cannot be both set"'

# --- patch, dry run, media types ------------------------------------------------------------------
patch() { # TYPE PATH BODY: PATCH with that Content-Type
  curl -sS -g --max-time 20 -o "$work/out" -w '%{http_code}' -X PATCH -H "Authorization: Bearer admin-token" \
    -H "Content-Type: $1" --data-binary "$3" "$url$2"
}
check "merge patch of a label: 200" test "$(patch application/merge-patch+json "$leases/l3" '{"metadata":{"labels":{"extra":"yes"}}}')" = 200
check "  ... merged" out_has '.metadata.labels.extra == "yes" and .metadata.labels["ibcni.io/pool"] == "p1"'
check "strategic merge patch: finalizers merged as a set" \
  test "$(patch application/strategic-merge-patch+json "$leases/l3" '{"metadata":{"finalizers":["a.io/x"]}}')" = 200
check "json patch removing them: 200" test "$(patch application/json-patch+json "$leases/l3" '[{"op":"remove","path":"/metadata/finalizers"}]')" = 200
check "  ... none left" out_has '.metadata | has("finalizers") | not'
check "a patch with a stale resourceVersion: 409" \
  test "$(patch application/merge-patch+json "$leases/l3" "{\"metadata\":{\"resourceVersion\":\"$rv1\"}}")" = 409
check "a patch of a missing Lease: 404 (a patch never creates)" test "$(patch application/merge-patch+json "$leases/nope9" '{}')" = 404
check "an apply patch is not emulated: 415" test "$(patch application/apply-patch+yaml "$leases/l3" '{}')" = 415
check "dryRun=All: 201 ..." expect 201 - POST "$leases?dryRun=All" "$(lease dry1)"
check "  ... nothing stored" test -z "$(etcd_mod_revision /registry/leases/kube-system/dry1)"
check "dryRun=Maybe: 422 CreateOptions" expect 422 Invalid POST "$leases?dryRun=Maybe" "$(lease dry1)"
check "a body in another media type: 415" bash -c '
  [[ $(curl -sS -o /dev/null -w "%{http_code}" -H "Authorization: Bearer good-token" -H "Content-Type: application/vnd.kubernetes.protobuf" --data-binary x "$1") == 415 ]]' _ "$url$leases"
check "Accept: protobuf only: 406" bash -c '
  [[ $(curl -sS -o /dev/null -w "%{http_code}" -H "Authorization: Bearer good-token" -H "Accept: application/vnd.kubernetes.protobuf" "$1") == 406 ]]' _ "$url$leases"
check "watch is not emulated: 405" expect 405 MethodNotAllowed GET "$leases?watch=true" "" admin-token

# --- discovery, tables --------------------------------------------------------------------------------
check "/version: a version.Info" bash -c 'curl -sS "$1/version" | jq -e ".major == \"1\" and (.gitVersion | startswith(\"v1.\"))" >/dev/null' _ "$url"
check "/apis lists coordination.k8s.io" bash -c '
  curl -sS -H "Authorization: Bearer good-token" "$1/apis" | jq -e ".kind == \"APIGroupList\" and .groups[0].name == \"coordination.k8s.io\"" >/dev/null' _ "$url"
check "/apis/coordination.k8s.io/v1: leases, namespaced" bash -c '
  curl -sS -H "Authorization: Bearer good-token" "$1/apis/coordination.k8s.io/v1" | jq -e ".resources[0].name == \"leases\" and .resources[0].namespaced and .resources[0].kind == \"Lease\"" >/dev/null' _ "$url"
check "/api/v1: namespaces and nodes" bash -c '
  curl -sS -H "Authorization: Bearer good-token" "$1/api/v1" | jq -e "[.resources[].name] == [\"namespaces\", \"nodes\"]" >/dev/null' _ "$url"
check "discovery needs credentials: 401" expect 401 Unauthorized GET /api "" ""
check "/openapi/v2 is not served: 404" expect 404 NotFound GET /openapi/v2
table() {
  curl -sS -o "$work/out" -H "Authorization: Bearer good-token" \
    -H "Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json" "$url$1"
}
check "kubectl's Accept: a meta.k8s.io/v1 Table of Leases" table "$leases?labelSelector=ibcni.io%2Fpool%3Dp1"
check "  ... columns Name, Holder, Age; one row per Lease with its PartialObjectMetadata" out_has '
  .kind == "Table" and .apiVersion == "meta.k8s.io/v1" and ([.columnDefinitions[].name] == ["Name", "Holder", "Age"])
  and (.rows | length == 1) and .rows[0].cells[0] == "l3" and .rows[0].cells[1] == "node-a"
  and .rows[0].object.kind == "PartialObjectMetadata" and .rows[0].object.metadata.name == "l3"'

# --- nodes --------------------------------------------------------------------------------------
check "GET a missing Node: 404 NotFound" expect 404 NotFound GET /api/v1/nodes/node-a
check "the admin path creates a Node" expect 201 - POST /_emulator/nodes '{"name":"node-a"}' ""
check "GET the Node: 200, a v1 Node" expect 200 - GET /api/v1/nodes/node-a
check "  ... with name, uid and resourceVersion" out_has '.apiVersion == "v1" and .kind == "Node" and .metadata.name == "node-a" and (.metadata.uid | length == 36) and (.metadata.resourceVersion | length > 0)'
check "the admin path deletes it" expect 200 - DELETE /_emulator/nodes/node-a "" ""
check "GET the Node again: 404" expect 404 NotFound GET /api/v1/nodes/node-a

# --- authentication, authorization ----------------------------------------------------------------
check "no token: 401 Unauthorized" expect 401 Unauthorized GET "$leases/b1" "" ""
check "a wrong token: 401 Unauthorized" expect 401 Unauthorized GET "$leases/b1" "" wrong-token
check "a token with get but not create: 403 Forbidden on POST" expect 403 Forbidden POST "$leases" "$(lease f1)" reader-token
check "  ... the Status names the user and the verb" out_has '.message | test("User \"reader\" cannot create resource \"leases\"")'
check "  ... but it may get: 200" expect 200 - GET "$leases/b1" "" reader-token
check "a namespace outside the token's rules: 403" expect 403 Forbidden GET /apis/coordination.k8s.io/v1/namespaces/default/leases/b1
check "nodes: get allowed, list not: 403" expect 403 Forbidden GET /api/v1/nodes
check "the RBAC file is read on every request (rule removed: 403)" bash -c '
  jq "del(.rules[2])" "$1/rbac" >"$1/rbac.new" && mv "$1/rbac.new" "$1/rbac" &&
  [[ $(curl -sS -o /dev/null -w "%{http_code}" -H "Authorization: Bearer reader-token" "$2") == 403 ]]' _ "$work" "$url$leases/b1"

# --- validation ---------------------------------------------------------------------------------
curl -sS -X DELETE "$url/_emulator/validation" >/dev/null
rm -f "$work/emu/validation.jsonl"
bad_duration=$(lease v1 | jq -c '.spec.leaseDurationSeconds = "600"')
bad_time=$(lease v2 | jq -c '.spec.renewTime = "2026-11-24T18:00:00Z"')
bad_label=$(lease v3 '{"ibcni.io/pool":"not a value!"}')
check "leaseDurationSeconds a string: 400, the decoder's error" expect 400 BadRequest POST "$leases" "$bad_duration"
check "  ... naming the Go field" out_has '.message == "Lease in version \"v1\" cannot be handled as a Lease: json: cannot unmarshal string into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32"'
check "renewTime without microseconds (not a MicroTime): 400" expect 400 BadRequest POST "$leases" "$bad_time"
check "  ... Go's time.Parse message" out_has '.message == "Lease in version \"v1\" cannot be handled as a Lease: parsing time \"2026-11-24T18:00:00Z\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"Z\" as \".000000\""'
check "a label value with spaces: 422 Invalid" expect 422 Invalid POST "$leases" "$bad_label"
check "  ... field metadata.labels, ValidateLabels' message" out_has '.message | startswith("Lease.coordination.k8s.io \"v3\" is invalid: metadata.labels: Invalid value: \"not a value!\": a valid label must be")'
check "  ... the cause" out_has '.details.kind == "Lease" and .details.causes[0].field == "metadata.labels" and .details.causes[0].reason == "FieldValueInvalid"' 
check "leaseDurationSeconds 0: 422 Invalid" expect 422 Invalid POST "$leases" "$(lease v4 | jq -c '.spec.leaseDurationSeconds = 0')"
check "  ... none of them was stored" test -z "$(etcd_mod_revision /registry/leases/kube-system/v1)$(etcd_mod_revision /registry/leases/kube-system/v2)"
check "an unknown field with fieldValidation=Strict: 400" expect 400 BadRequest POST "$leases?fieldValidation=Strict" "$(lease v5 | jq -c '.spec.holder = "x"')"
check "  ... a strict decoding error" out_has '.message == "Lease in version \"v1\" cannot be handled as a Lease: strict decoding error: unknown field \"spec.holder\""' 
check "an unknown field otherwise: 201, a Warning header, the field dropped" bash -c '
  h=$(curl -sS -D - -o "$3/out" -H "Authorization: Bearer good-token" -H "Content-Type: application/json" --data-binary "$2" "$1") &&
  grep -qi "^warning: 299 - \"unknown field .spec.holder.\"" <<<"$h" && jq -e ".spec | has(\"holder\") | not" "$3/out" >/dev/null' \
  _ "$url$leases" "$(lease v6 | jq -c '.spec.holder = "x"')" "$work"
check "a valid Lease: 201" expect 201 - POST "$leases" "$(lease v7)"
check "a DeleteOptions body is validated too" expect 200 - DELETE "$leases/v6" "$(delopts "" "")"
check "a DeleteOptions with a uid that is a number: 400" expect 400 BadRequest DELETE "$leases/v7" '{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":5}}'
check "the validation log: 9 bodies, 7 invalid" \
  bash -c '[[ $(curl -sS "$1/_emulator/validation" | jq -c "[.total, .invalid]") == "[9,7]" ]]' _ "$url"
check "  ... the same in validation.jsonl, with the paths of the bad fields" bash -c '
  [[ $(wc -l <"$1") == 9 ]] &&
  jq -se "[.[] | select(.valid | not) | .problems[].path] | (index(\"/spec/leaseDurationSeconds\") != null and index(\"/spec/renewTime\") != null and index(\"/spec/holder\") != null)" "$1" >/dev/null' \
  _ "$work/emu/validation.jsonl"

# --- faults -------------------------------------------------------------------------------------
fault() { curl -sS -X POST "$url/_emulator/faults" -d "$1" >/dev/null; }
fault '{"status": 500, "count": 1}'
check "fault status 500: a 500 InternalError Status" expect 500 InternalError GET "$leases/b1"
check "  ... count 1: the next request is served" expect 200 - GET "$leases/b1"
fault '{"delayMs": 1500, "count": 1}'
delayed() {
  local start end
  start=$(date +%s%N)
  expect 200 - GET "$leases/b1" || return 1
  end=$(date +%s%N)
  (((end - start) / 1000000 >= 1500)) || { echo "    answered after $(((end - start) / 1000000)) ms" >&2; return 1; }
}
check "fault delayMs 1500: the answer takes at least 1.5 s" delayed
fault '{"garbage": true, "count": 1}'
check "fault garbage: 200 with a body that is not JSON" bash -c '
  [[ $(curl -sS -o "$2" -w "%{http_code}" -H "Authorization: Bearer good-token" "$1") == 200 ]] && ! jq . "$2" >/dev/null 2>&1' \
  _ "$url$leases/b1" "$work/garbage"
fault '{"drop": true, "count": 1}'
check "fault drop: the connection closes without an answer (curl: empty reply)" bash -c '
  curl -sS -o /dev/null -H "Authorization: Bearer good-token" "$1" 2>/dev/null; (($? == 52))' _ "$url$leases/b1"
fault '{"status": 500, "after": true, "methods": ["POST"], "count": 1}'
check "fault after: POST answered 500 ..." expect 500 InternalError POST "$leases" "$(lease lost)"
check "  ... but the Lease was created (a lost answer)" expect 200 - GET "$leases/lost"
fault '{"status": 503}'
check "fault without count: every request (503 ServiceUnavailable) ..." expect 503 ServiceUnavailable GET "$leases/b1"
check "  ... until cleared" bash -c 'curl -sS -X DELETE "$1/_emulator/faults" >/dev/null' _ "$url"
check "  ... then served again" expect 200 - GET "$leases/b1"
check "the stats count requests per verb" \
  bash -c 'curl -sS "$1/_emulator/stats" | jq -e ".[\"create leases\"].byCode[\"201\"] >= 6 and .[\"update leases\"].byCode[\"409\"] >= 19" >/dev/null' _ "$url"

# --- client certificates over HTTPS ------------------------------------------------------------------
pki=$work/pki
mkdir -p "$pki"
mkcert() { # NAME CN CA_NAME [EXT]
  local ext=()
  if [[ -n ${4:-} ]]; then
    printf '%s\n' "$4" >"$pki/$1.ext"
    ext=(-extfile "$pki/$1.ext")
  fi
  openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$1.key" -subj "/CN=$2" -out "$pki/$1.csr" 2>/dev/null &&
    openssl x509 -req -in "$pki/$1.csr" -CA "$pki/$3.crt" -CAkey "$pki/$3.key" -CAcreateserial -days 2 \
      "${ext[@]}" -out "$pki/$1.crt" 2>/dev/null
}
make_pki() {
  local ca
  for ca in ca other-ca; do
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/$ca.key" -subj "/CN=$ca" -days 2 -out "$pki/$ca.crt" 2>/dev/null || return 1
  done
  mkcert server 127.0.0.1 ca "subjectAltName=IP:127.0.0.1" && mkcert client client-cert-user ca && mkcert stranger client-cert-user other-ca
}
check "a test CA, a server and two client certificates (openssl)" make_pki
check "the emulator starts over HTTPS with a client CA" \
  k8s_emulator_start "$work/emu-tls" "$models" "$etcd_ep" --tokens "$work/tokens" --rbac "$work/rbac" \
  --tls-cert "$pki/server.crt" --tls-key "$pki/server.key" --client-ca "$pki/ca.crt"
tls() { # CERT_NAME|- : status code of GET b1 over HTTPS
  local c=()
  [[ $1 != - ]] && c=(--cert "$pki/$1.crt" --key "$pki/$1.key")
  curl -sS --max-time 10 --cacert "$pki/ca.crt" "${c[@]}" -o "$work/out" -w '%{http_code}' "$K8S_EMULATOR_URL$leases/b1"
}
check "HTTPS, a client certificate of the CA (CN = a user with get): 200" test "$(tls client)" = 200
check "HTTPS, no certificate and no token: 401" test "$(tls -)" = 401
check "HTTPS, a certificate of another CA: 401" test "$(tls stranger)" = 401
check "HTTPS, a bearer token still works: 200" test "$(curl -sS --cacert "$pki/ca.crt" -o /dev/null -w '%{http_code}' \
  -H 'Authorization: Bearer good-token' "$K8S_EMULATOR_URL$leases/b1")" = 200
k8s_emulator_stop "$work/emu-tls"

# --- etcd down ------------------------------------------------------------------------------------
etcd_cluster_stop "$work/etcd"
etcd_down() {
  local start end code
  start=$(date +%s%N)
  code=$(req GET "$leases/b1")
  end=$(date +%s%N)
  echo "    etcd down: HTTP $code after $(((end - start) / 1000000)) ms: $(head -c 300 "$work/out")" >&2
  [[ $code == 500 ]] && out_has '.reason == "InternalError" and (.message | test("etcd unavailable"))' &&
    (((end - start) / 1000000 < 10000))
}
check "etcd down: 500 InternalError naming etcd, within the etcd timeout (no hang)" etcd_down
pid=$(cat "$work/emu/pid")
k8s_emulator_stop "$work/emu"
check "stop ends the emulator" bash -c '! [[ -d /proc/$1 ]] || grep -q "^State:.*Z" /proc/$1/status' _ "$pid"
finish_checks
