# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# What the hardware validations (e2e/hw/validate-ipoib.sh, validate-sriov-vf.sh) share, sourced by
# both: reporting a check (pass, fail, skip, note) and the summary (finish), the EXIT trap's
# cleanup, the hostNetwork helper pod on each node (named $HELPER_POD_PREFIX-$RUN-...) and what
# runs in it, kubectl ($KC), and reading the NAD's ibcni config ($CONF) and the probes' facts; for
# the sriov validations (validate-sriov-vf.sh, validate-sriov-guid-pool.sh) the node's VF tables.
# The functions use the calling script's variables (NS, RUN, LABEL, KEEP, TMP, TIMEOUT, ...).

pass() { PASSED=$((PASSED + 1)); echo "PASS $1${2:+: $2}"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1: $2"; }
skip() { SKIPPED=$((SKIPPED + 1)); echo "SKIP $1: $2"; }
note() { echo "     $*"; }

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  [[ -n $BW_SERVER_PID ]] && kill "$BW_SERVER_PID" 2>/dev/null
  if ((KEEP)); then
    echo "kept: test pods (${KUBECTL} -n $NS delete pod -l $LABEL=$RUN)$( ((NAD_CREATED)) && echo " and NAD $NAD_NS/$NAD_NAME")"
    kc -n "$NS" delete pod -l "$LABEL=$RUN,role=host-check" --ignore-not-found --wait=false >/dev/null 2>&1
  else
    kc -n "$NS" delete pod -l "$LABEL=$RUN" --ignore-not-found --wait=false >/dev/null 2>&1
    if ((NAD_CREATED)); then
      kc -n "$NAD_NS" delete network-attachment-definitions.k8s.cni.cncf.io "$NAD_NAME" \
        --ignore-not-found --wait=false >/dev/null 2>&1
    fi
  fi
  rm -rf "$TMP"
}

# finish: print the summary (and the ibcni log of each node on failure), exit 0 or 1.
finish() {
  if ((FAILED > 0)); then print_logs; fi
  ((SKIPPED > 0)) && echo "$SKIPPED skipped"
  echo "$PASSED passed, $FAILED failed"
  ((FAILED == 0)) && exit 0
  exit 1
}

# common_opt ARGS...: takes the option $1 (with its value $2) when every validation has it, sets
# the variable it names and OPT_TAKEN to how many arguments it used; fails for any other option.
# shellcheck disable=SC2034 # the variables are the calling script's
common_opt() {
  OPT_TAKEN=$(($# < 2 ? 1 : 2))
  case $1 in
    -n | --nad) NAD=${2-} ;;
    -N | --namespace) NS=${2-} ;;
    -i | --image) IMAGE=${2-} ;;
    --host-image) HOST_IMAGE=${2-} ;;
    --node-a) NODE_A=${2-} ;;
    --node-b) NODE_B=${2-} ;;
    --ip-a) IP_A=${2-} ;;
    --ip-b) IP_B=${2-} ;;
    -t | --timeout) TIMEOUT=${2-} ;;
    --kubectl) KUBECTL=${2-} ;;
    --no-nad-apply) NAD_APPLY=0 OPT_TAKEN=1 ;;
    --keep) KEEP=1 OPT_TAKEN=1 ;;
    *) return 1 ;;
  esac
}

# check_common_args EXAMPLE_CIDR: the checks of the options every validation has (--ip-a/--ip-b,
# the images, jq and awk, kubectl, the manifests, the NAD's and the namespace's names); sets KC,
# NAD_NS and NAD_NAME.
check_common_args() {
  local ip v dns1123='^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
  for ip in "$IP_A" "$IP_B"; do
    [[ $ip =~ ^([0-9]{1,3}[.]){3}[0-9]{1,3}/[0-9]{1,2}$ ]] || die "address '$ip': give IPv4 CIDR, e.g. $1"
  done
  [[ ${IP_A%/*} != "${IP_B%/*}" ]] || die "--ip-a and --ip-b must differ"
  for v in "$IMAGE" "$HOST_IMAGE"; do
    [[ $v =~ ^[A-Za-z0-9._/:@-]+$ ]] || die "image '$v': unexpected characters"
  done
  command -v jq >/dev/null 2>&1 || die "jq is required on this machine"
  command -v awk >/dev/null 2>&1 || die "awk is required on this machine"
  read -r -a KC <<<"$KUBECTL"
  command -v "${KC[0]}" >/dev/null 2>&1 || die "'${KC[0]}' not found"
  [[ -r $NAD_MANIFEST && -r $POD_TEMPLATE ]] || die "manifests not found next to the script ($HERE/manifests)"
  if [[ $NAD == */* ]]; then NAD_NS=${NAD%%/*} NAD_NAME=${NAD#*/}; else NAD_NS=$NS NAD_NAME=$NAD; fi
  [[ $NAD_NAME =~ $dns1123 && $NAD_NS =~ $dns1123 && $NS =~ $dns1123 ]] || die "NAD and namespace names must be DNS-1123 labels"
}

# pkey_member PKEY TABLE: the entry of the pkey table (space-separated, 0x....) of PKEY's partition
# (full or limited member); fails when there is none.
pkey_member() {
  local k
  for k in $2; do
    [[ $k =~ ^0x[0-9a-fA-F]+$ ]] && (((k & 0x7fff) == ($1 & 0x7fff))) && { echo "$k"; return 0; }
  done
  return 1
}

# start_run PREFIX: the run's id, labels, test pod names (PREFIX-a-RUN, PREFIX-b-RUN), scratch
# directory and counters.
# shellcheck disable=SC2034 # the variables are the calling script's
start_run() {
  RUN=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
  LABEL=ibcni-hw-validate-run
  CREATED_BY=ibcni-hw-validate
  POD_A=$1-a-$RUN
  POD_B=$1-b-$RUN
  TMP=$(mktemp -d)
  PASSED=0 FAILED=0 SKIPPED=0 NAD_CREATED=0 BW_SERVER_PID=""
}

# delete_test_pods WHAT: with --keep, skips the teardown (WHAT is what it would have checked) and
# finishes; else deletes the two test pods and checks that they are gone (CNI DEL succeeded).
delete_test_pods() {
  if ((KEEP)); then
    skip teardown "--keep given: pods left running, $1 not checked"
    finish
  fi
  if kc -n "$NS" delete pod "$POD_A" "$POD_B" --wait=true --timeout="${TIMEOUT}s" >/dev/null 2>&1; then
    pass pods_deleted
  else
    fail pods_deleted "not gone within ${TIMEOUT}s (CNI DEL failing? see the ibcni log below and the kubelet log)"
  fi
}

# fill_placeholders TEXT KEY VALUE...: TEXT with each ${KEY} replaced by its VALUE; fails when a
# placeholder is left.
fill_placeholders() {
  local t=$1
  shift
  while (($# >= 2)); do
    t=${t//"\${$1}"/"$2"}
    shift 2
  done
  # shellcheck disable=SC2016 # a literal "${"
  [[ $t != *'${'* ]] || return 1
  printf '%s\n' "$t"
}

# print_logs: the tail of ibcni's log on every node a helper runs on.
print_logs() {
  local node
  if [[ -z $LOG_FILE ]]; then
    echo "ibcni logs: the NAD sets no logFile; see the kubelet/Multus logs of the nodes"
    return
  fi
  for node in "${!HELPER[@]}"; do
    echo "--- last 40 lines of $LOG_FILE on $node ---"
    # shellcheck disable=SC2016 # expanded by the remote shell
    on_host "$node" 'tail -n 40 "/host-log/$1" 2>&1' "$(basename "$LOG_FILE")" | sed 's/^/    /'
  done
  for node in "${!HELPER_ERR[@]}"; do
    echo "--- $LOG_FILE on $node: not readable (${HELPER_ERR[$node]}); on the node: tail -n 40 $LOG_FILE"
  done
}

# helper_manifest NAME NODE
helper_manifest() {
  local logdir=""
  [[ $LOG_FILE == /* ]] && logdir=$(dirname "$LOG_FILE")
  jq -n --arg name "$1" --arg node "$2" --arg ns "$NS" --arg run "$RUN" --arg lbl "$LABEL" \
    --arg image "$HOST_IMAGE" --arg logdir "$logdir" '{
      apiVersion: "v1", kind: "Pod",
      metadata: {name: $name, namespace: $ns, labels: {($lbl): $run, role: "host-check"}},
      spec: ({
        nodeName: $node, hostNetwork: true, restartPolicy: "Never", terminationGracePeriodSeconds: 1,
        tolerations: [{operator: "Exists"}],
        containers: [{
          name: "host", image: $image, command: ["sleep", "86400"],
          securityContext: {privileged: true},
          volumeMounts: (if $logdir == "" then [] else [{name: "log", mountPath: "/host-log", readOnly: true}] end)
        }]
      } + (if $logdir == "" then {} else {volumes: [{name: "log", hostPath: {path: $logdir, type: "Directory"}}]} end))
    }'
}

# ensure_helper NODE: start (once) the helper pod on NODE; returns 1 if it cannot run.
# shellcheck disable=SC2004 # HELPER and HELPER_ERR are the scripts' associative arrays
ensure_helper() {
  local node=$1 name out
  [[ -n ${HELPER[$node]:-} ]] && return 0
  [[ -n ${HELPER_ERR[$node]:-} ]] && return 1
  name=$HELPER_POD_PREFIX-$RUN-$(printf '%s' "$node" | cksum | cut -d' ' -f1)
  if ! out=$(helper_manifest "$name" "$node" | kc apply -f - 2>&1); then
    HELPER_ERR[$node]="cannot create a hostNetwork helper pod in $NS (pod security?): ${out//$'\n'/ }"
    return 1
  fi
  if ! kc -n "$NS" wait --for=condition=Ready "pod/$name" --timeout="${TIMEOUT}s" >/dev/null 2>&1; then
    HELPER_ERR[$node]="helper pod $name on $node not Ready within ${TIMEOUT}s (image $HOST_IMAGE pullable?)"
    return 1
  fi
  HELPER[$node]=$name
}

# on_host NODE SCRIPT [ARGS]: run a sh script in the node's helper pod.
on_host() {
  local node=$1 script=$2
  shift 2
  kc -n "$NS" exec "${HELPER[$node]}" -- sh -c "$script" sh "$@" 2>&1 | tr -d '\r'
}

kc() { "${KC[@]}" "$@"; }
conf() { jq -r "$1" <<<"$CONF"; }
# fact POD KEY: a value from the pod's probe; hfact TEXT KEY: a value from a node's probe.
fact() { grep -m1 "^$2=" <<<"${FACTS[$1]}" | cut -d= -f2- | sed 's/[[:space:]]*$//'; }
hfact() { grep -m1 "^$2=" <<<"$1" | cut -d= -f2- | sed 's/[[:space:]]*$//'; }

# --- SR-IOV VFs on a node (validate-sriov-vf.sh, validate-sriov-guid-pool.sh) -----------------------

# guid_hex GUID: the 16 lowercase hex digits of a GUID written with ':' (IB style) or not.
guid_hex() { tr -d ':' <<<"$1" | tr 'A-F' 'a-f'; }

# Prints "== PF" then `ip link show dev PF` for every IPoIB netdev with VFs.
# shellcheck disable=SC2016,SC2034 # expanded by the remote shell; used by the sriov scripts
HOST_VF_TABLE='
for n in /sys/class/net/*; do
  [ -r "$n/device/sriov_numvfs" ] || continue
  [ "$(cat "$n/device/sriov_numvfs")" -gt 0 ] 2>/dev/null || continue
  [ "$(cat "$n/type")" = 32 ] || continue
  echo "== ${n##*/}"
  ip link show dev "${n##*/}"
done'

# vf_rows: from HOST_VF_TABLE-style text, one line per VF: PF INDEX NODE_GUID PORT_GUID LINK_STATE
# (GUIDs as 16 hex digits; "-" when ip does not print them).
vf_rows() {
  awk '
    /^== / { pf = $2; next }
    $1 == "vf" && $2 ~ /^[0-9]+$/ {
      ng = "-"; pg = "-"; ls = "-"
      if (match($0, /NODE_GUID [0-9a-fA-F:]+/)) ng = substr($0, RSTART + 10, RLENGTH - 10)
      if (match($0, /PORT_GUID [0-9a-fA-F:]+/)) pg = substr($0, RSTART + 10, RLENGTH - 10)
      if (match($0, /link-state [a-z]+/)) ls = substr($0, RSTART + 11, RLENGTH - 11)
      gsub(":", "", ng); gsub(":", "", pg)
      print pf, $2, tolower(ng), tolower(pg), ls
    }'
}

# Facts about a VF on the host, as key=value lines, then "== PF" and `ip link show dev PF`.
# shellcheck disable=SC2016,SC2034 # expanded by the remote shell; used by the sriov scripts
HOST_VF_PROBE='
d=/sys/bus/pci/devices/$1
nd=$(ls $d/net 2>/dev/null | head -n 1)
echo "netdev=$nd"
[ -n "$nd" ] && echo "netdev_type=$(cat /sys/class/net/$nd/type)"
ib=$(ls $d/infiniband 2>/dev/null | head -n 1)
echo "ibdev=$ib"
[ -n "$ib" ] && echo "ib_node_guid=$(cat /sys/class/infiniband/$ib/node_guid)"
if [ -n "$ib" ] && command -v rdma >/dev/null 2>&1; then echo "rdma_dev=$(rdma dev show "$ib" 2>&1 | head -n 1)"; fi
for l in $d/physfn/virtfn*; do
  [ "$(readlink -f $l)" = "$(readlink -f $d)" ] && echo "vf_index=${l##*virtfn}"
done
pf=$(ls $d/physfn/net 2>/dev/null | head -n 1)
echo "pf=$pf"
[ -n "$pf" ] && { echo "== $pf"; ip link show dev "$pf"; }'
