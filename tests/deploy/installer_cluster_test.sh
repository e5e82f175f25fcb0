#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# installer_cluster_test.sh BUILD_DIR
# What deploy/installer/ibcni-install writes for ibcni-ipam's cluster mode, with the environment the
# chart gives it: <cni conf dir>/ibcni.d/node-name (IBCNI_NODE_NAME, from spec.nodeName) and
# ibcni.d/ibcni.kubeconfig for the pod's ServiceAccount (IBCNI_KUBECONFIG=true): mode 0600, YAML of
# the standard shape (parsed with the deploy tooling's YAML parser) whose current context names
# the server from KUBERNETES_SERVICE_HOST/PORT (or IBCNI_API_SERVER), the mounted ca.crt, the
# mounted token and the namespace. The ServiceAccount volume is laid out as the kubelet's atomic
# writer does (token -> ..data/token, ..data -> a timestamped directory swapped on rotation).
# Covers: a run that changes nothing rewrites nothing (inode and mtime kept); a rotated token is
# written within seconds by the sleep loop and while the node agent runs (a fake ibcni-agent: the
# installer's credentials loop runs beside it); a token that has not changed is never rewritten; the token in no log line;
# a missing or malformed token fails the install (and, in a loop, keeps the last kubeconfig);
# nothing written when not asked (node-local users); --uninstall removes both files.
# Runs in PID, mount and network namespaces of its own (unshare, root; 77 = skip), as
# installer_reconcile_test.sh: the test is PID 1, the node's init for the agent.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
installer=$repo/deploy/installer/ibcni-install
build=${1:?usage: installer_cluster_test.sh BUILD_DIR}

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root (unshare)"
  exit 77
fi
if [[ ${2:-} != --inside ]]; then
  mkdir -p "$build" || exit 1
  node_dir=$(cd "$build" && pwd -P)/deploy-node
  # the YAML parser (tests/deploy/k8s's npm packages), before entering the namespaces (npm ci)
  "$repo/tests/deploy/k8s/setup.sh" "$node_dir" || { echo "FAIL the deploy tooling could not be installed"; exit 1; }
  exec unshare --pid --fork --mount-proc --mount --net --propagation private -- bash "$0" "$node_dir" --inside
fi
node_dir=$1
source "$repo/tests/support/check.sh"
(($$ == 1)) || { echo "FAIL not PID 1 of a PID namespace of its own"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ibcni-cluster-files.XXXXXX")
bg_pids=()
cleanup() {
  for p in "${bg_pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The fake image: versions, and an agent that counts its starts and runs until SIGTERM.
image=$work/image
mkdir -p "$image"
printf '#!/bin/sh\necho "ibcni 0.0.0-fake"\n' >"$image/ibcni"
printf '#!/bin/sh\necho "ibcni-ipam 0.0.0-fake"\n' >"$image/ibcni-ipam"
printf '#!/bin/sh\necho run >>"%s/runs"\ntrap "exit 0" TERM\nwhile :; do sleep 1 & wait $!; done\n' "$work" >"$image/ibcni-agent"
chmod 0755 "$image/ibcni" "$image/ibcni-ipam" "$image/ibcni-agent"

conf=$work/node/etc/cni/net.d      # the CNI config directory, a node path (the node's root is /)
files=$conf/ibcni.d
kubeconfig=$files/ibcni.kubeconfig
sa=$work/serviceaccount
mkdir -p "$sa"

# A JWT-shaped token (random, so that a token found in a log is certainly this one).
new_token() { printf 'eyJhbGciOiJSUzI1NiJ9.%s.%s' "$(head -c 48 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=')" \
  "$(head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=')"; }
# rotate TOKEN: the kubelet's atomic writer: a new timestamped directory, ..data swapped onto it.
generation=0
rotate() {
  generation=$((generation + 1))
  local dir=$sa/..gen_$generation
  mkdir "$dir" && printf '%s' "$1" >"$dir/token" && cp "$work/ca.crt" "$dir/ca.crt" &&
    printf 'kube-system' >"$dir/namespace" || return 1
  ln -s "..gen_$generation" "$sa/..data_tmp" && mv -T "$sa/..data_tmp" "$sa/..data" || return 1
  for f in token ca.crt namespace; do [[ -L $sa/$f ]] || ln -s "..data/$f" "$sa/$f"; done
  [[ $generation -lt 2 ]] || rm -rf "$sa/..gen_$((generation - 1))"
}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=kubernetes \
  -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null || { echo "FAIL openssl could not make a CA"; exit 1; }
token1=$(new_token)
rotate "$token1" || { echo "FAIL could not lay out the ServiceAccount volume"; exit 1; }
tokens=("$token1")

# The chart's environment (deploy/helm/ibcni/templates/daemonset.yaml), with this test's paths; debug
# logging, so that the check that no log holds the token covers every line the installer can write.
chart_env=(IBCNI_SOURCE_DIR="$image" IBCNI_HOST_ROOT=/ IBCNI_CNI_BIN_DIR="$work/node/opt/cni/bin"
  IBCNI_CNI_CONF_DIR="$conf" IBCNI_NODE_NAME=node-7 IBCNI_KUBECONFIG=true IBCNI_KUBECONFIG_NAMESPACE=kube-system IBCNI_LOG_LEVEL=debug
  IBCNI_SERVICE_ACCOUNT_DIR="$sa" KUBERNETES_SERVICE_HOST=10.96.0.1 KUBERNETES_SERVICE_PORT=443)
# once LOG [VAR=VALUE...] [-- ARGS...]: one run that exits after installing
once() {
  local log=$1 vars=()
  shift
  while (($#)) && [[ $1 != -- ]]; do vars+=("$1"); shift; done
  (($#)) && shift
  env "${chart_env[@]}" "${vars[@]}" "$installer" --no-sleep "$@" >"$work/$log.log" 2>&1
}
logged() { grep -q -- "$2" "$work/$1.log" || { echo "--- $1.log:"; cat "$work/$1.log"; return 1; }; }
identity() { stat -c '%i %y' "$1"; }
wait_for() {
  local tries=$(($1 * 10))
  shift
  while ((tries-- > 0)); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}

# kubeconfig_is FILE SERVER TOKEN NAMESPACE: the file parses as YAML, a kubeconfig of the standard
# shape whose current context gives exactly these, and the mounted ca.crt as certificate-authority-data.
kubeconfig_is() {
  node --input-type=module -e '
    import { readFileSync } from "node:fs";
    import { createRequire } from "node:module";
    const { parse } = createRequire(process.argv[1] + "/")("yaml");
    const [, , file, server, token, ns, caFile] = process.argv;
    const fail = (m) => { console.log(`    ${file}: ${m}`); process.exit(1); };
    let k;
    try { k = parse(readFileSync(file, "utf8"), { version: "1.1", strict: true, uniqueKeys: true }); }
    catch (e) { fail(`not YAML: ${e.message}`); }
    if (k?.apiVersion !== "v1" || k.kind !== "Config") fail("not apiVersion v1, kind Config");
    const keys = Object.keys(k).sort().join(",");
    if (keys !== "apiVersion,clusters,contexts,current-context,kind,users") fail(`keys ${keys}`);
    const byName = (list, name, what) => {
      const hits = (list ?? []).filter((e) => e.name === name);
      if (hits.length !== 1) fail(`no single ${what} named ${name}`);
      return hits[0];
    };
    const ctx = byName(k.contexts, k["current-context"], "context").context;
    if (ctx.namespace !== ns) fail(`namespace ${ctx.namespace}, not ${ns}`);
    const cluster = byName(k.clusters, ctx.cluster, "cluster").cluster;
    if (cluster.server !== server) fail(`server ${cluster.server}, not ${server}`);
    const ca = Buffer.from(cluster["certificate-authority-data"] ?? "", "base64");
    if (!ca.equals(readFileSync(caFile))) fail("certificate-authority-data is not the mounted ca.crt");
    const user = byName(k.users, ctx.user, "user").user;
    if (user.token !== token) fail("token is not the mounted one");
    if (Object.keys(user).join(",") !== "token") fail(`user has ${Object.keys(user)}`);
  ' "$node_dir" "$1" "$2" "$3" "$4" "$work/ca.crt"
}
mode_600_root() { [[ $(stat -c '%a %u' "$1") == "600 0" ]] || { echo "    $(stat -c '%a %u' "$1")"; return 1; }; }
no_leftovers() { ! compgen -G "$files/.*ibcni-install*" >/dev/null; }

# --- a first install writes both -------------------------------------------------------------
check "first run exits 0" once first
check "node-name holds the node's name, one line" test "$(cat "$files/node-name")" = node-7
check "node-name is exactly 'node-7\\n'" cmp -s "$files/node-name" <(printf 'node-7\n')
check "the kubeconfig is mode 0600, root's" mode_600_root "$kubeconfig"
check "the kubeconfig: server https://10.96.0.1:443, the CA, the token, namespace kube-system" \
  kubeconfig_is "$kubeconfig" https://10.96.0.1:443 "$token1" kube-system
check "first run: logged both files" bash -c 'grep -q "wrote $1/node-name: node-7" "$2" &&
  grep -q "wrote $1/ibcni.kubeconfig (server https://10.96.0.1:443, namespace kube-system" "$2"' _ "$files" "$work/first.log"
check "first run: no temporary file left" no_leftovers

# --- a second run with the same token rewrites nothing -----------------------------------------
before="$(identity "$kubeconfig") $(identity "$files/node-name")"
sleep 0.05
check "second run exits 0" once second
check "second run: neither file rewritten (inode and mtime kept)" \
  test "$(identity "$kubeconfig") $(identity "$files/node-name")" = "$before"
check "second run: logged no write" bash -c '! grep -q "wrote" "$1"' _ "$work/second.log"

# --- the server: IPv6 service address, an explicit API server, another namespace ---------------
check "IPv6 KUBERNETES_SERVICE_HOST: exits 0" once ipv6 KUBERNETES_SERVICE_HOST=fd00:10:96::1 KUBERNETES_SERVICE_PORT=6443
check "IPv6 KUBERNETES_SERVICE_HOST: server https://[fd00:10:96::1]:6443" \
  kubeconfig_is "$kubeconfig" "https://[fd00:10:96::1]:6443" "$token1" kube-system
check "IBCNI_API_SERVER and another namespace: exits 0" \
  once apiserver IBCNI_API_SERVER=https://api.example.com:6443 IBCNI_KUBECONFIG_NAMESPACE=ibcni-pools
check "IBCNI_API_SERVER and another namespace: in the kubeconfig (rewritten: they changed)" \
  kubeconfig_is "$kubeconfig" https://api.example.com:6443 "$token1" ibcni-pools
check "back to the chart's environment" once back
check "back to the chart's environment: the first kubeconfig again" \
  kubeconfig_is "$kubeconfig" https://10.96.0.1:443 "$token1" kube-system

# --- the sleep loop (reconcileInterval 0): a rotated token is written, an unchanged one is not ----
# start NAME ARGS...: an installer that stays (its log $work/NAME.log, its PID $NAME_pid)
start() {
  local name=$1
  shift
  env "${chart_env[@]}" IBCNI_CREDENTIALS_INTERVAL=1 "$installer" "$@" >"$work/$name.log" 2>&1 &
  bg_pids+=($!)
  printf -v "${name}_pid" %s $!
}
stops() {
  kill -TERM "$1" || return 1
  wait_for 5 bash -c '! kill -0 "$1" 2>/dev/null' _ "$1" || { echo "    still running"; return 1; }
  wait "$1"
}
token_is() { kubeconfig_is "$kubeconfig" https://10.96.0.1:443 "$1" kube-system >/dev/null; }

start sleeper --reconcile-interval 0
check "sleep loop: installed and sleeping" wait_for 10 grep -q "sleeping until the pod is stopped" "$work/sleeper.log"
before=$(identity "$kubeconfig")
sleep 3.5
check "sleep loop: an unchanged token is not rewritten in 3.5 s of 1 s checks (inode and mtime kept)" \
  test "$(identity "$kubeconfig")" = "$before"
token2=$(new_token)
tokens+=("$token2")
rotate "$token2"
check "sleep loop: the rotated token is in the kubeconfig within 4 s" wait_for 4 token_is "$token2"
check "sleep loop: by rename (new inode)" test "$(stat -c %i "$kubeconfig")" != "${before%% *}"
check "sleep loop: still mode 0600" mode_600_root "$kubeconfig"
check "sleep loop: no temporary file left" no_leftovers
check "sleep loop: logged the rewrite" logged sleeper "wrote .*ibcni.kubeconfig"
# a broken token volume: logged, the last good kubeconfig kept, the loop goes on
mv "$sa/..data" "$sa/..data.away"
check "sleep loop: a missing token is logged" wait_for 4 grep -q "no ServiceAccount token or ca.crt" "$work/sleeper.log"
check "sleep loop: the last good kubeconfig is kept" token_is "$token2"
mv "$sa/..data.away" "$sa/..data"
check "sleep loop: still running" kill -0 "$sleeper_pid"
check "sleep loop: SIGTERM stops it with status 0" stops "$sleeper_pid"

# --- while the node agent runs: the installer checks the token beside it -------------------------
rm -f "$work/runs"
start agent --reconcile-interval 600 --metrics-listen :9464
check "with the agent: the agent started" wait_for 10 test -s "$work/runs"
sleep 1
before=$(identity "$kubeconfig")
sleep 2.5
check "with the agent: an unchanged token is not rewritten (inode and mtime kept)" test "$(identity "$kubeconfig")" = "$before"
token3=$(new_token)
tokens+=("$token3")
rotate "$token3"
check "with the agent: the rotated token is in the kubeconfig within 4 s" wait_for 4 token_is "$token3"
check "with the agent: started once (not restarted meanwhile)" test "$(wc -l <"$work/runs")" -eq 1
check "with the agent: SIGTERM stops it with status 0" stops "$agent_pid"
check "with the agent: the credentials loop stopped with it (no process left of that installer)" \
  bash -c '! pgrep -a -s 0 -f "$1" | grep -v pgrep >&2' _ "$installer"

# --- the token is in no log ------------------------------------------------------------------------
in_no_log() {
  local t
  for t in "${tokens[@]}"; do
    if grep -rlF -- "$t" "$work"/*.log; then echo "    a token is in the logs above"; return 1; fi
    if grep -rlF -- "${t##*.}" "$work"/*.log; then echo "    a token's signature is in the logs above"; return 1; fi
  done
}
check "no log holds any of the tokens (nor their signatures)" in_no_log

# --- failures -----------------------------------------------------------------------------------
once notoken IBCNI_SERVICE_ACCOUNT_DIR="$work/none"
check "no mounted token: exits 1" test $? -eq 1
check "no mounted token: says the pod needs the ServiceAccount token" logged notoken "automountServiceAccountToken: true"
mkdir -p "$work/badsa" && cp "$work/ca.crt" "$work/badsa/" && printf 'abc"\nevil: 1' >"$work/badsa/token"
once badtoken IBCNI_SERVICE_ACCOUNT_DIR="$work/badsa"
check "a token that is not a JWT: exits 1" test $? -eq 1
check "a token that is not a JWT: refused without showing it" \
  bash -c 'grep -q "does not hold a JWT" "$1" && ! grep -q evil "$1"' _ "$work/badtoken.log"
check "a token that is not a JWT: the last kubeconfig kept" token_is "$token3"
once nohost KUBERNETES_SERVICE_HOST=
check "no KUBERNETES_SERVICE_HOST and no IBCNI_API_SERVER: exits 1" test $? -eq 1
once badnode IBCNI_NODE_NAME=Node_7
check "a node name that is not one: exits 2" test $? -eq 2
once badserver IBCNI_API_SERVER=http://api:6443
check "an http:// API server: exits 2" test $? -eq 2

# --- not asked: nothing written (node-local IPAM) ------------------------------------------------
plain=$work/plain/etc/cni/net.d
env IBCNI_SOURCE_DIR="$image" IBCNI_HOST_ROOT=/ IBCNI_CNI_BIN_DIR="$work/plain/opt/cni/bin" IBCNI_CNI_CONF_DIR="$plain" \
  IBCNI_SERVICE_ACCOUNT_DIR="$sa" "$installer" --no-sleep >"$work/plain.log" 2>&1
check "without IBCNI_NODE_NAME and IBCNI_KUBECONFIG: exits 0" test $? -eq 0
check "without them: no ibcni.d written" test ! -e "$plain/ibcni.d"

# --- uninstall ----------------------------------------------------------------------------------
check "--uninstall exits 0" once uninstall -- --uninstall
check "--uninstall: node-name and the kubeconfig removed" test ! -e "$files/node-name" -a ! -e "$kubeconfig"
check "--uninstall: logged" logged uninstall "removed .*ibcni.d/ibcni.kubeconfig"

finish_checks
