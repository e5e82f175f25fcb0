#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# etcd_cluster.sh as a shell test uses it: a 3-member cluster that answers the JSON gateway, keeps
# writing with one member stopped, refuses writes with two stopped, recovers, and stops by PID
# leaving no member behind.
# shellcheck disable=SC2317  # the helpers below run through check
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../check.sh
source "$here/../check.sh"
# shellcheck source=etcd_cluster.sh
source "$here/etcd_cluster.sh"

dir=$(mktemp -d "${TMPDIR:-/tmp}/ibcni-etcd-sh.XXXXXX")
cleanup() {
  etcd_cluster_stop "$dir/c"
  rm -rf "$dir"
}
trap cleanup EXIT

command -v curl >/dev/null || { echo "FAIL curl is not installed (scripts/install-deps.sh)"; exit 1; }
b64() { printf '%s' "$1" | base64 -w0; }
put() { # ENDPOINT KEY VALUE [MAX_SECONDS]: true when the write was acknowledged
  local out
  out=$(curl -sS --max-time "${4:-3}" -X POST "$1/v3/kv/put" \
    -d "{\"key\":\"$(b64 "$2")\",\"value\":\"$(b64 "$3")\"}") || return 1
  jq -e '.header.revision and (has("error") | not)' <<<"$out" >/dev/null
}
put_eventually() { # retried while a new leader is elected
  local t
  for ((t = 0; t < 50; t++)); do put "$@" && return 0; sleep 0.2; done
  return 1
}
value_is() { # ENDPOINT KEY VALUE
  local out
  out=$(curl -sS --max-time 3 -X POST "$1/v3/kv/range" -d "{\"key\":\"$(b64 "$2")\"}") || return 1
  [[ $(jq -r '.kvs[0].value // empty' <<<"$out" | base64 -d) == "$3" ]]
}
member_pid() { cat "$dir/c/m$1/pid"; }
gone() { # PID...: none of them runs any more (a zombie not yet reaped by its new parent counts as gone)
  local p
  for p in "$@"; do
    [[ -d /proc/$p ]] && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null && return 1
  done
  return 0
}
put_refused() { ! put "$@"; }
not_default_ports() { ! grep -qxE '2379|2380' "$dir"/c/m*/client_port "$dir"/c/m*/peer_port; }
all_read() { # KEY VALUE: every member's range answers VALUE
  local e
  for e in ${ETCD_ENDPOINTS//,/ }; do value_is "$e" "$1" "$2" || return 1; done
}

start_ns=$(date +%s%N)
check "3 members start and are healthy" etcd_cluster_start 3 "$dir/c" || finish_checks
echo "3-member etcd cluster healthy after $((($(date +%s%N) - start_ns) / 1000000)) ms"
check "ETCD_ENDPOINTS lists three loopback endpoints" \
  grep -Eqx 'http://127\.0\.0\.1:[0-9]+(,http://127\.0\.0\.1:[0-9]+){2}' <<<"$ETCD_ENDPOINTS"
check "no member uses etcd's default ports" not_default_ports
ep0=$(etcd_cluster_endpoints "$dir/c" 0)
check "a put through the gateway" put "$ep0" k v0
check "the range reads it back" value_is "$ep0" k v0
pid2=$(member_pid 2)
etcd_cluster_stop_member "$dir/c" 2
check "stop-member ends that member's process" gone "$pid2"
check "writes go on with one member of three stopped" put_eventually "$ep0" k v1
etcd_cluster_stop_member "$dir/c" 1
check "no write is acknowledged with two stopped" put_refused "$ep0" k lost 2
etcd_cluster_start_member "$dir/c" 1
etcd_cluster_start_member "$dir/c" 2
check "healthy again once both are back" etcd_cluster_wait_healthy "$dir/c" 30
check "and writes again" put_eventually "$(etcd_cluster_endpoints "$dir/c" 2)" k v2
check "every member reads the last write" all_read k v2
pids=$(cat "$dir"/c/m*/pid)
etcd_cluster_stop "$dir/c"
# shellcheck disable=SC2086
check "stop ends every member" gone $pids
finish_checks
