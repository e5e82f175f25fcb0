#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A real Kubernetes control plane for the tests: etcd and kube-apiserver (and, when asked,
# kube-controller-manager and kube-scheduler) built from their modules by scripts/build-upstream.sh,
# with private state under DIR, on loopback ports of their own, with generated certificates and a
# service-account signing key. It runs in the foreground until it gets SIGTERM/SIGINT or its parent
# dies, then stops every process it started (by PID) and removes DIR's state.
#
#   control_plane.sh serve DIR [--with controller-manager,scheduler]
#
# When it is ready it writes DIR/env (a file of shell assignments) and only then DIR/ready:
#   CP_SERVER        https://127.0.0.1:PORT, kube-apiserver
#   CP_CA            the CA certificate (it signed the server's certificate and the admin's)
#   CP_ADMIN         a kubeconfig of a cluster admin (client certificate, group system:masters)
#   CP_KUBECTL       the kubectl of the same release; CP_BIN the directory of every binary
#   CP_ETCD          http://127.0.0.1:PORT, the API server's etcd
# lib.sh has the shell side (start, stop, a ServiceAccount's token and kubeconfig); the C++ side is
# tests/support/control_plane.h. On failure it exits non-zero with what failed and the log's tail
# (DIR/*.log).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)

die() {
  echo "control-plane: $*" >&2
  exit 1
}

[[ ${1:-} == serve ]] || die "usage: control_plane.sh serve DIR [--with controller-manager,scheduler]"
dir=${2:?usage: control_plane.sh serve DIR [--with controller-manager,scheduler]}
with=
[[ ${3:-} == --with ]] && with=${4:-}
mkdir -p "$dir" || die "cannot make $dir"
dir=$(cd "$dir" && pwd)
rm -f "$dir/ready" "$dir/env"

bin=$("$repo/scripts/build-upstream.sh" --dir kubernetes) || exit 1
etcd_bin=$("$repo/scripts/build-upstream.sh" --dir etcd) || exit 1
command -v openssl >/dev/null || die "openssl is not installed (scripts/install-deps.sh)"

pids=()
stop_all() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  pids=()
}
trap 'stop_all; rm -rf "$dir/etcd-data"; rm -f "$dir/ready"' EXIT
trap 'exit 0' TERM INT

# A free loopback port: bound by python3 and released (the program that asks for it binds it next).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Each server dies with this script (PR_SET_PDEATHSIG through setpriv), so that a killed test
# leaves nothing running.
start() {
  local name=$1
  shift
  setpriv --pdeathsig KILL -- "$@" >"$dir/$name.log" 2>&1 &
  pids+=($!)
}

fail_with_log() {
  local name=$1
  shift
  echo "control-plane: $*; the end of $dir/$name.log:" >&2
  tail -n 25 "$dir/$name.log" >&2
  exit 1
}

# Waits up to $2 seconds for command $3... to succeed while the server $1 (last started) lives.
wait_for() {
  local name=$1 seconds=$2 pid=${pids[-1]}
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || fail_with_log "$name" "$name exited"
    ((SECONDS < deadline)) || fail_with_log "$name" "$name was not ready within $seconds s"
    sleep 0.2
  done
}

make_pki() {
  local pki=$dir/pki
  mkdir -p "$pki"
  (
    cd "$pki" || exit 1
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=ibcni-test-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    sign() {  # sign NAME SUBJECT EXTENSIONS
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 2 \
        -extfile <(printf '%s\n' "$3")
    }
    sign apiserver "/CN=kube-apiserver" \
      "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc,IP:10.96.0.1
extendedKeyUsage=serverAuth"
    sign admin "/O=system:masters/CN=ibcni-test-admin" "extendedKeyUsage=clientAuth"
    openssl genrsa -out sa.key 2048
    openssl rsa -in sa.key -pubout -out sa.pub
  ) >"$dir/pki.log" 2>&1 || fail_with_log pki "making the certificates failed"
}

write_admin_kubeconfig() {
  cat >"$dir/admin.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: $server
    certificate-authority: $dir/pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $dir/pki/admin.crt
    client-key: $dir/pki/admin.key
contexts:
- name: admin
  context: {cluster: test, user: admin}
current-context: admin
EOF
}

make_pki

etcd_port=$(free_port)
peer_port=$(free_port)
etcd_url=http://127.0.0.1:$etcd_port
start etcd "$etcd_bin/etcd" --name cp --data-dir "$dir/etcd-data" \
  --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "cp=http://127.0.0.1:$peer_port" --initial-cluster-token "cp-$$" \
  --listen-metrics-urls "" --log-level warn
wait_for etcd 30 curl -fsS "$etcd_url/health"

api_port=$(free_port)
server=https://127.0.0.1:$api_port
start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers "$etcd_url" --etcd-prefix /registry \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
  --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
  --client-ca-file "$dir/pki/ca.crt" \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$dir/pki/sa.pub" \
  --service-account-signing-key-file "$dir/pki/sa.key" \
  --service-cluster-ip-range 10.96.0.0/24 --authorization-mode Node,RBAC --allow-privileged=true \
  --anonymous-auth=false --profiling=false --endpoint-reconciler-type none
readyz() { curl -fsS --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" "$server/readyz"; }
wait_for kube-apiserver 120 readyz
write_admin_kubeconfig

if [[ ,$with, == *,controller-manager,* ]]; then
  start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$dir/admin.kubeconfig" \
    --authentication-kubeconfig "$dir/admin.kubeconfig" --authorization-kubeconfig "$dir/admin.kubeconfig" \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 0 --use-service-account-credentials=false
fi
if [[ ,$with, == *,scheduler,* ]]; then
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$dir/admin.kubeconfig" \
    --authentication-kubeconfig "$dir/admin.kubeconfig" --authorization-kubeconfig "$dir/admin.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 0
fi

cat >"$dir/env" <<EOF
CP_SERVER=$server
CP_CA=$dir/pki/ca.crt
CP_ADMIN=$dir/admin.kubeconfig
CP_KUBECTL=$bin/kubectl
CP_BIN=$bin
CP_ETCD=$etcd_url
EOF
touch "$dir/ready"
echo "control-plane: ready: kube-apiserver $server over etcd $etcd_url${with:+, with $with} (state in $dir)" >&2

# Until stopped; a server that exits ends the control plane (the tests see it gone).
wait -n "${pids[@]}"
echo "control-plane: a server exited; stopping the rest" >&2
exit 1
