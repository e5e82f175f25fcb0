#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Start and stop the Kubernetes API emulator (server.js) in the background, for shell tests.
# Source it (it does not set -e):
#   k8s_emulator_setup MODELS_DIR        installs kubernetes-models into MODELS_DIR with
#                                        tests/deploy/k8s/setup.sh (npm ci from its lock file;
#                                        nothing done when already installed)
#   k8s_emulator_start DIR MODELS_DIR ETCD_ENDPOINTS --tokens FILE --rbac FILE [server.js ARGS...]
#                                        starts server.js on a free loopback port, waits until it
#                                        listens; exports K8S_EMULATOR_PORT and K8S_EMULATOR_URL
#                                        (http:// or https:// with --tls-cert); DIR gets pid, port,
#                                        log (stderr) and validation.jsonl (every request body)
#   k8s_emulator_stop DIR                stops it by its recorded PID (SIGTERM, then SIGKILL)
# As a command: k8s_emulator.sh start DIR MODELS_DIR ETCD ARGS... (prints the URL) | stop DIR.
_k8s_emulator_here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")

k8s_emulator_setup() {
  "$_k8s_emulator_here/../../deploy/k8s/setup.sh" "${1:?k8s_emulator_setup MODELS_DIR}"
}

# True when PID is alive and is the server.js started for DIR.
_k8s_emulator_is_ours() {
  local pid=$1 dir=$2
  [[ -n $pid && -r /proc/$pid/cmdline ]] &&
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$dir/validation.jsonl"
}

k8s_emulator_start() {
  local dir=${1:?k8s_emulator_start DIR MODELS_DIR ETCD ARGS...} models=${2:?} etcd=${3:?}
  shift 3
  command -v node >/dev/null || { echo "k8s_emulator: node is not installed (scripts/install-deps.sh: nodejs)" >&2; return 1; }
  mkdir -p "$dir" || return 1
  dir=$(cd "$dir" && pwd -P)
  local scheme=http a
  for a in "$@"; do [[ $a == --tls-cert ]] && scheme=https; done
  rm -f "$dir/port"
  node "$_k8s_emulator_here/server.js" --etcd "$etcd" --models "$models" --port 0 \
    --validation-log "$dir/validation.jsonl" "$@" >"$dir/port" 2>>"$dir/log" </dev/null &
  echo $! >"$dir/pid"
  local t
  for ((t = 0; t < 200; t++)); do
    if [[ -s $dir/port ]] && grep -qx '[0-9]\+' "$dir/port"; then
      K8S_EMULATOR_PORT=$(cat "$dir/port")
      K8S_EMULATOR_URL=$scheme://127.0.0.1:$K8S_EMULATOR_PORT
      export K8S_EMULATOR_PORT K8S_EMULATOR_URL
      return 0
    fi
    # kill -0, not _k8s_emulator_is_ours: right after the fork the child may not have exec'd node yet.
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      echo "k8s_emulator: server.js exited; $dir/log:" >&2
      tail -n 20 "$dir/log" >&2
      return 1
    fi
    sleep 0.05
  done
  echo "k8s_emulator: server.js did not listen within 10 s ($dir/log)" >&2
  k8s_emulator_stop "$dir"
  return 1
}

k8s_emulator_stop() {
  local dir=${1:?k8s_emulator_stop DIR} pid t
  pid=$(cat "$dir/pid" 2>/dev/null) || return 0
  if _k8s_emulator_is_ours "$pid" "$dir"; then
    kill -TERM "$pid" 2>/dev/null
    for ((t = 0; t < 50; t++)); do
      _k8s_emulator_is_ours "$pid" "$dir" || break
      sleep 0.1
    done
    _k8s_emulator_is_ours "$pid" "$dir" && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -f "$dir/pid"
  return 0
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  case ${1:-} in
    start)
      (($# >= 4)) || { echo "usage: $0 start DIR MODELS_DIR ETCD_ENDPOINTS --tokens FILE --rbac FILE [ARGS...]" >&2; exit 2; }
      shift
      k8s_emulator_start "$@" || exit 1
      echo "$K8S_EMULATOR_URL"
      ;;
    stop)
      (($# == 2)) || { echo "usage: $0 stop DIR" >&2; exit 2; }
      k8s_emulator_stop "$2"
      ;;
    *)
      echo "usage: $0 start DIR MODELS_DIR ETCD_ENDPOINTS ARGS... | stop DIR" >&2
      exit 2
      ;;
  esac
fi
