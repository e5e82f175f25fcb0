#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A throwaway etcd 3.4 cluster (1 or N members) on loopback ports of its own, for the tests.
#
# As a command:
#   etcd_cluster.sh start N DIR     starts N members under DIR (created if missing), waits until all
#                                   are healthy, prints the client endpoints (comma-separated)
#   etcd_cluster.sh stop DIR        stops every member of DIR by its recorded PID
#   etcd_cluster.sh stop-member DIR I | start-member DIR I | wait-healthy DIR [SECONDS]
#   etcd_cluster.sh endpoints DIR [I]
# As a library (source it; it does not set -e):
#   etcd_cluster_start N DIR        as above; also exports ETCD_ENDPOINTS
#   etcd_cluster_stop DIR
#   etcd_cluster_stop_member DIR I  SIGTERM, then SIGKILL after 5 s; I counts from 0
#   etcd_cluster_start_member DIR I the same command line and data dir again (does not wait)
#   etcd_cluster_wait_healthy DIR [SECONDS]   every member's endpoint healthy (default 30 s)
#   etcd_cluster_endpoints DIR [I]  all client endpoints (comma-separated), or member I's
# Layout: DIR/mI/{data/,log,pid,args,client_port,peer_port}, DIR/endpoints. Never uses etcd's
# default ports (2379/2380) and never stops a process by name: a system etcd is left alone.
# Ports are picked at random below the kernel's ephemeral range, checked free with ss, and the
# whole start is retried with new ports when a member still finds its port taken.

: "${ETCD_CLUSTER_HEARTBEAT_MS:=50}"
: "${ETCD_CLUSTER_ELECTION_MS:=500}"

_etcd_cluster_die() {
  echo "etcd_cluster: $*" >&2
  return 1
}

_etcd_cluster_need() {
  local tool
  for tool in etcd etcdctl ss; do
    command -v "$tool" >/dev/null ||
      _etcd_cluster_die "$tool not found: install etcd-server, etcd-client and iproute2 (scripts/install-deps.sh)" ||
      return 1
  done
}

# A port nobody listens on, outside the ports already chosen ($@).
_etcd_cluster_free_port() {
  local port taken i
  for ((i = 0; i < 200; i++)); do
    port=$((20000 + RANDOM % 12000))
    taken=0
    for p in "$@"; do [[ $p == "$port" ]] && taken=1; done
    ((taken)) && continue
    if [[ -z $(ss -Hltn "sport = :$port" 2>/dev/null) ]]; then
      echo "$port"
      return 0
    fi
  done
  _etcd_cluster_die "no free loopback port found"
}

_etcd_cluster_members() {
  local dir=$1
  local n=0
  while [[ -d $dir/m$n ]]; do n=$((n + 1)); done
  echo "$n"
}

# True when PID is alive and is the etcd of member directory $2 (a recycled PID is not ours).
_etcd_cluster_is_ours() {
  local pid=$1 mdir=$2
  [[ -n $pid ]] && [[ -r /proc/$pid/cmdline ]] &&
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "--data-dir=$mdir/data"
}

etcd_cluster_endpoints() {
  local dir=$1 i=${2:-}
  if [[ -n $i ]]; then
    echo "http://127.0.0.1:$(cat "$dir/m$i/client_port")"
  else
    cat "$dir/endpoints"
  fi
}

etcd_cluster_start_member() {
  local dir=$1 i=$2
  local mdir=$dir/m$i
  [[ -r $mdir/args ]] || _etcd_cluster_die "no member $i under $dir" || return 1
  if _etcd_cluster_is_ours "$(cat "$mdir/pid" 2>/dev/null)" "$mdir"; then
    _etcd_cluster_die "member $i already runs" || return 1
  fi
  local args
  mapfile -t args <"$mdir/args"
  # A clean environment: ETCD_* variables of the caller would change etcd's configuration.
  env -i PATH="$PATH" etcd "${args[@]}" >>"$mdir/log" 2>&1 </dev/null &
  echo $! >"$mdir/pid"
}

etcd_cluster_stop_member() {
  local dir=$1 i=$2
  local mdir=$dir/m$i pid
  pid=$(cat "$mdir/pid" 2>/dev/null) || return 0
  if _etcd_cluster_is_ours "$pid" "$mdir"; then
    kill -TERM "$pid" 2>/dev/null
    local t
    for ((t = 0; t < 50; t++)); do
      _etcd_cluster_is_ours "$pid" "$mdir" || break
      sleep 0.1
    done
    _etcd_cluster_is_ours "$pid" "$mdir" && kill -KILL "$pid" 2>/dev/null
    # Our own child (library use): reap it so it does not linger as a zombie.
    wait "$pid" 2>/dev/null
    for ((t = 0; t < 50; t++)); do
      _etcd_cluster_is_ours "$pid" "$mdir" || break
      sleep 0.1
    done
  fi
  rm -f "$mdir/pid"
  return 0
}

etcd_cluster_stop() {
  local dir=$1 n i
  n=$(_etcd_cluster_members "$dir")
  for ((i = 0; i < n; i++)); do
    etcd_cluster_stop_member "$dir" "$i"
  done
}

etcd_cluster_wait_healthy() {
  local dir=$1 timeout=${2:-30}
  local n i deadline=$((SECONDS + timeout)) eps
  n=$(_etcd_cluster_members "$dir")
  eps=$(etcd_cluster_endpoints "$dir")
  while :; do
    for ((i = 0; i < n; i++)); do
      local mdir=$dir/m$i
      if [[ -f $mdir/pid ]] && ! _etcd_cluster_is_ours "$(cat "$mdir/pid")" "$mdir"; then
        echo "etcd_cluster: member $i exited; end of $mdir/log:" >&2
        tail -n 5 "$mdir/log" >&2
        return 1
      fi
    done
    if ETCDCTL_API=3 etcdctl --endpoints="$eps" --dial-timeout=1s --command-timeout=2s \
      endpoint health >/dev/null 2>&1; then
      return 0
    fi
    if ((SECONDS >= deadline)); then
      echo "etcd_cluster: not healthy after ${timeout}s:" >&2
      ETCDCTL_API=3 etcdctl --endpoints="$eps" --dial-timeout=1s --command-timeout=2s endpoint health >&2
      return 1
    fi
    sleep 0.1
  done
}

# One attempt with fresh ports: 0 = healthy, 1 = failed, 2 = a port was taken (retry).
_etcd_cluster_try_start() {
  local n=$1 dir=$2 timeout=$3
  local i ports=() cluster="" eps="" token
  for ((i = 0; i < n; i++)); do
    local c p
    c=$(_etcd_cluster_free_port "${ports[@]}") || return 1
    ports+=("$c")
    p=$(_etcd_cluster_free_port "${ports[@]}") || return 1
    ports+=("$p")
    rm -rf "$dir/m$i"
    mkdir -p "$dir/m$i"
    echo "$c" >"$dir/m$i/client_port"
    echo "$p" >"$dir/m$i/peer_port"
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$p"
    eps+="${eps:+,}http://127.0.0.1:$c"
  done
  echo "$eps" >"$dir/endpoints"
  token="ibcni-test-$$-$RANDOM$RANDOM"
  for ((i = 0; i < n; i++)); do
    local mdir=$dir/m$i c p
    c=$(cat "$mdir/client_port")
    p=$(cat "$mdir/peer_port")
    # Tuned for loopback and a throwaway cluster: short heartbeats and elections, small snapshot
    # interval and backend quota. etcd 3.4 has no --unsafe-no-fsync: put DIR on a tmpfs for that.
    printf '%s\n' "--name=m$i" "--data-dir=$mdir/data" \
      "--listen-client-urls=http://127.0.0.1:$c" "--advertise-client-urls=http://127.0.0.1:$c" \
      "--listen-peer-urls=http://127.0.0.1:$p" "--initial-advertise-peer-urls=http://127.0.0.1:$p" \
      "--initial-cluster=$cluster" "--initial-cluster-state=new" "--initial-cluster-token=$token" \
      "--heartbeat-interval=$ETCD_CLUSTER_HEARTBEAT_MS" "--election-timeout=$ETCD_CLUSTER_ELECTION_MS" \
      "--snapshot-count=5000" "--quota-backend-bytes=$((256 * 1024 * 1024))" \
      "--max-snapshots=2" "--max-wals=2" "--logger=zap" "--log-outputs=stderr" >"$mdir/args"
    etcd_cluster_start_member "$dir" "$i" || return 1
  done
  if etcd_cluster_wait_healthy "$dir" "$timeout"; then
    return 0
  fi
  if grep -qs "address already in use" "$dir"/m*/log; then
    etcd_cluster_stop "$dir"
    return 2
  fi
  return 1
}

etcd_cluster_start() {
  local n=$1 dir=$2 timeout=${3:-30}
  [[ $n =~ ^[1-9][0-9]*$ ]] || _etcd_cluster_die "member count must be a positive number, not '$n'" || return 1
  [[ -n $dir ]] || _etcd_cluster_die "no directory given" || return 1
  _etcd_cluster_need || return 1
  mkdir -p "$dir" || return 1
  dir=$(cd "$dir" && pwd)
  [[ -z $(ls -A "$dir") ]] || _etcd_cluster_die "$dir is not empty" || return 1
  local attempt rc
  for ((attempt = 0; attempt < 3; attempt++)); do
    _etcd_cluster_try_start "$n" "$dir" "$timeout"
    rc=$?
    if ((rc == 0)); then
      ETCD_ENDPOINTS=$(etcd_cluster_endpoints "$dir")
      export ETCD_ENDPOINTS
      return 0
    fi
    ((rc == 2)) || break
  done
  etcd_cluster_stop "$dir"
  _etcd_cluster_die "could not start $n member(s) under $dir (logs: $dir/m*/log)"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  cmd=${1:-}
  case $cmd in
    start)
      (($# >= 3)) || { echo "usage: $0 start N DIR [TIMEOUT_SECONDS]" >&2; exit 2; }
      etcd_cluster_start "$2" "$3" "${4:-30}" || exit 1
      echo "$ETCD_ENDPOINTS"
      ;;
    stop)
      (($# == 2)) || { echo "usage: $0 stop DIR" >&2; exit 2; }
      etcd_cluster_stop "$2"
      ;;
    stop-member | start-member)
      (($# == 3)) || { echo "usage: $0 $cmd DIR I" >&2; exit 2; }
      "etcd_cluster_${cmd//-/_}" "$2" "$3"
      ;;
    wait-healthy)
      (($# >= 2)) || { echo "usage: $0 wait-healthy DIR [SECONDS]" >&2; exit 2; }
      etcd_cluster_wait_healthy "$2" "${3:-30}"
      ;;
    endpoints)
      (($# >= 2)) || { echo "usage: $0 endpoints DIR [I]" >&2; exit 2; }
      etcd_cluster_endpoints "$2" "${3:-}"
      ;;
    *)
      echo "usage: $0 start N DIR | stop DIR | stop-member DIR I | start-member DIR I | wait-healthy DIR | endpoints DIR [I]" >&2
      exit 2
      ;;
  esac
fi
