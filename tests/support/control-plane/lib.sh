# SPDX-License-Identifier: Apache-2.0
# The shell side of control_plane.sh (a real etcd + kube-apiserver for a test):
#   source tests/support/control-plane/lib.sh
#   control_plane_start DIR [--with controller-manager,scheduler]   # sets CP_* (control_plane.sh)
#   kc ARGS...                       kubectl of the same release, as the cluster admin
#   control_plane_token NS SA        a token of ServiceAccount NS/SA (TokenRequest, 1 h)
#   control_plane_kubeconfig FILE NS SA   a kubeconfig with that token, namespace NS
#   control_plane_stop               stops it (call it from the test's EXIT trap; if the test dies,
#                                    the control plane gets SIGTERM and stops itself)
#   control_plane_session [--with ...]   a test's whole set-up: a work directory in $work, an EXIT
#                                    trap that stops the control plane and removes $work, and the
#                                    control plane started in $work/cp (FAIL and exit 1 if it does not)
# Exits 77 (a skip, saying why) when the components are not built on this machine.

control_plane_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
control_plane_pid=
control_plane_dir=

control_plane_start() {
  local dir=$1
  shift
  if ! "$control_plane_lib_dir/../../../scripts/build-upstream.sh" --dir kubernetes >/dev/null ||
     ! "$control_plane_lib_dir/../../../scripts/build-upstream.sh" --dir etcd >/dev/null; then
    echo "SKIP: the upstream components are not built on this machine (scripts/build-upstream.sh)"
    exit 77
  fi
  control_plane_dir=$dir
  setpriv --pdeathsig TERM -- "$control_plane_lib_dir/control_plane.sh" serve "$dir" "$@" \
    2>"$dir.serve.log" &
  control_plane_pid=$!
  local deadline=$((SECONDS + 180))
  until [[ -f $dir/ready ]]; do
    if ! kill -0 "$control_plane_pid" 2>/dev/null || ((SECONDS > deadline)); then
      echo "control plane did not start:" >&2
      cat "$dir.serve.log" >&2
      return 1
    fi
    sleep 0.2
  done
  # shellcheck disable=SC1091
  source "$dir/env"
  export CP_SERVER CP_CA CP_ADMIN CP_KUBECTL CP_BIN CP_ETCD
}

control_plane_stop() {
  [[ -n $control_plane_pid ]] || return 0
  kill -TERM "$control_plane_pid" 2>/dev/null
  wait "$control_plane_pid" 2>/dev/null
  control_plane_pid=
  rm -f "$control_plane_dir.serve.log"
}

kc() { "$CP_KUBECTL" --kubeconfig "$CP_ADMIN" "$@"; }

control_plane_token() { kc create token "$2" -n "$1" --duration 1h; }

# control_plane_nodes NAME...: a Node object of each name (no kubelet runs: nothing else of a node).
control_plane_nodes() {
  local n
  for n in "$@"; do
    printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$n" | kc create -f - >/dev/null || return 1
  done
}

control_plane_kubeconfig() {
  local file=$1 ns=$2 sa=$3 token
  token=$(control_plane_token "$ns" "$sa") || return 1
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: $CP_SERVER
    certificate-authority: $CP_CA
users:
- name: $sa
  user:
    token: $token
contexts:
- name: $sa
  context: {cluster: test, user: $sa, namespace: $ns}
current-context: $sa
EOF
  chmod 0600 "$file"
}

control_plane_session() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/ibcni-cp.XXXXXX") || exit 1
  trap 'control_plane_stop; rm -rf "$work"' EXIT
  control_plane_start "$work/cp" "$@" || { echo "FAIL the control plane did not start"; exit 1; }
}
