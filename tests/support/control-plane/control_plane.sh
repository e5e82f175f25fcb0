#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A real Kubernetes control plane for the tests: etcd and kube-apiserver (and, when asked,
# kube-controller-manager and kube-scheduler) built from their modules by scripts/build-upstream.sh,
# with private state under DIR, on loopback ports of their own, with generated certificates and a
# service-account signing key. It runs in the foreground until it gets SIGTERM/SIGINT or its parent
# dies, then stops every process it started (by PID) and removes DIR's state.
#
#   control_plane.sh serve DIR [--with controller-manager,scheduler] [--while-pid PID] [--etcd URLS]
#                                # --etcd: over those etcd members (a test's own cluster, whose
#                                # members it stops and starts) instead of an etcd of its own
#   control_plane.sh up DIR      # CTest's fixture (FIXTURES_SETUP): serve in the background for as
#                                # long as the ctest that runs it lives; 77 when not built
#   control_plane.sh down DIR    # its FIXTURES_CLEANUP: stops it by its PID, removes DIR
#
# When it is ready it writes DIR/env (a file of shell assignments) and only then DIR/ready:
#   CP_SERVER        https://127.0.0.1:PORT, kube-apiserver
#   CP_CA            the CA certificate (it signed the server's certificate and the admin's)
#   CP_ADMIN         a kubeconfig of a cluster admin (client certificate, group system:masters)
#   CP_ADMIN_CERT, CP_ADMIN_KEY   that client certificate and its key
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

usage="usage: control_plane.sh serve|up|down DIR [--with controller-manager,scheduler] [--while-pid PID] [--etcd URLS]"
verb=${1:-}
dir=${2:?$usage}
shift 2
with=
while_pid=
etcd_servers=
while (($#)); do
  case $1 in
    --with) with=${2:-}; shift 2 ;;
    --while-pid) while_pid=${2:-}; shift 2 ;;
    --etcd) etcd_servers=${2:-}; shift 2 ;;
    *) die "$usage" ;;
  esac
done

# The CTest fixture: one control plane for every test of a ctest run that requires it (the C++
# tests find it through IBCNI_CONTROL_PLANE=DIR). It stops itself when that ctest is gone, so an
# interrupted run leaves nothing running.
if [[ $verb == up ]]; then
  if ! "$repo/scripts/build-upstream.sh" --dir kubernetes >/dev/null ||
     ! "$repo/scripts/build-upstream.sh" --dir etcd >/dev/null; then
    echo "SKIP: the upstream components are not built on this machine (scripts/build-upstream.sh)"
    exit 77
  fi
  "$0" down "$dir"
  mkdir -p "$dir" || die "cannot make $dir"
  setsid "$0" serve "$dir" ${with:+--with "$with"} --while-pid "$PPID" </dev/null >"$dir.log" 2>&1 &
  echo $! >"$dir.pid"
  deadline=$((SECONDS + 180))
  until [[ -f $dir/ready ]]; do
    if ! kill -0 "$(cat "$dir.pid")" 2>/dev/null || ((SECONDS > deadline)); then
      cat "$dir.log" >&2
      die "did not start"
    fi
    sleep 0.2
  done
  cat "$dir/env"
  exit 0
elif [[ $verb == down ]]; then
  if [[ -f $dir.pid ]]; then
    pid=$(cat "$dir.pid")
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  fi
  rm -rf "$dir" "$dir.pid" "$dir.log"
  exit 0
fi
[[ $verb == serve ]] || die "$usage"
mkdir -p "$dir" || die "cannot make $dir"
dir=$(cd "$dir" && pwd)
rm -f "$dir/ready" "$dir/env"

bin=$("$repo/scripts/build-upstream.sh" --dir kubernetes) || exit 1
etcd_bin=$("$repo/scripts/build-upstream.sh" --dir etcd) || exit 1
command -v openssl >/dev/null || die "openssl is not installed (scripts/install-deps.sh)"

pids=()
# Whether process $1 runs (an exited child is a zombie until waited for: kill -0 still finds it).
alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $state != Z* ]]
}
# Last started first: the API server lets go of etcd before etcd stops (etcd stopped under a
# connected API server takes its whole grace time).
stop_all() {
  local i pid
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
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

if [[ -n $etcd_servers ]]; then
  etcd_url=$etcd_servers
else
  etcd_port=$(free_port)
  peer_port=$(free_port)
  etcd_url=http://127.0.0.1:$etcd_port
  start etcd "$etcd_bin/etcd" --name cp --data-dir "$dir/etcd-data" \
    --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "cp=http://127.0.0.1:$peer_port" --initial-cluster-token "cp-$$" \
    --listen-metrics-urls "" --log-level warn
  wait_for etcd 30 curl -fsS "$etcd_url/health"
fi

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
CP_ADMIN_CERT=$dir/pki/admin.crt
CP_ADMIN_KEY=$dir/pki/admin.key
CP_KUBECTL=$bin/kubectl
CP_BIN=$bin
CP_ETCD=$etcd_url
EOF
touch "$dir/ready"
echo "control-plane: ready: kube-apiserver $server over etcd $etcd_url${with:+, with $with} (state in $dir)" >&2

# Until stopped (or, with --while-pid, until that process is gone); a server that exits ends the
# control plane (the tests see it gone).
if [[ -n $while_pid ]]; then
  while kill -0 "$while_pid" 2>/dev/null; do
    for pid in "${pids[@]}"; do
      alive "$pid" || break 2
    done
    sleep 1
  done
  kill -0 "$while_pid" 2>/dev/null || exit 0
else
  wait -n "${pids[@]}"
fi
echo "control-plane: a server exited; stopping the rest" >&2
exit 1
