#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Hardware validation of ibcni's ipoib mode on a real InfiniBand Kubernetes cluster
# (Multus + an IPoIB parent netdev on each node + a subnet manager with the partition).
#
# It applies manifests/nad-ipoib.yaml (parent, pkey and IPoIB mode from the options), starts two
# pods from manifests/pod-ipoib-template.yaml and checks inside each pod that net1 is an IPoIB
# child (link/infiniband, 20-byte address, the port's GID) with the expected pkey and mode, pings
# and runs ib_send_bw over RDMA CM between the pods, deletes them and checks on each node
# (hostNetwork helper pod) that no IPoIB child of ibcni is left and the parent is unchanged.
#
# See README.md next to this file. Output: PASS/FAIL/SKIP lines, then "N passed, M failed".
# Exit 0 if nothing failed, 1 if a check failed, 2 on a usage or setup error.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAD_MANIFEST=$HERE/manifests/nad-ipoib.yaml
POD_TEMPLATE=$HERE/manifests/pod-ipoib-template.yaml
# The checks' reporting (pass/fail/skip, finish), cleanup, and the nodes' helper pods.
HELPER_POD_PREFIX=ibcni-ipoib-host
# shellcheck source=e2e/lib/hw-validate.sh
. "$HERE/../lib/hw-validate.sh"

usage() {
  cat <<'EOF'
Usage: validate-ipoib.sh [options]

  -n, --nad NAME          NetworkAttachmentDefinition, NAME or NAMESPACE/NAME (default: ib-ipoib-hw)
      --no-nad-apply      do not apply manifests/nad-ipoib.yaml; validate the existing NAD (its
                          parent, pkey and mode; --master ... --mode are then refused)
      --master NETDEV     IPoIB parent netdev on every node (default: the manifest's, ib0)
      --rdma-device DEV   instead of --master: the RDMA device whose port's IPoIB netdev is the
      --port N            parent, e.g. --rdma-device mlx5_0 --port 1 (port default: 1)
      --pkey PKEY         partition of the child, 0x0001-0x7fff or 0x8001-0xffff (default: 0x7fff)
      --mode MODE         datagram or connected (default: none in the NAD, the parent's mode)
  -N, --namespace NS      namespace of the test and helper pods (default: default)
  -i, --image IMAGE       test image with sh, sleep, ping, ip (iproute2), ib_send_bw
                          (default: docker.io/mellanox/rping-test:latest)
      --host-image IMAGE  node helper image with sh, ip (iproute2), rdma optional
                          (default: docker.io/nicolaka/netshoot:latest)
      --rdma-resource RES extended resource that gives the test pods /dev/infiniband (e.g.
                          rdma/hca_shared_devices_a); needed for ib_send_bw unless --privileged
      --privileged        run the test containers privileged (they then see /dev/infiniband)
      --node-a NODE       node of the first pod  (default: the scheduler decides)
      --node-b NODE       node of the second pod (use another node than --node-a to cross the
                          fabric; giving both also takes the node snapshots before the test)
      --ip-a CIDR         address requested for the first pod  (default: 192.168.110.201/24)
      --ip-b CIDR         address requested for the second pod (default: 192.168.110.202/24)
  -t, --timeout SECONDS   wait for pods, deletion and the children's removal (default: 180)
      --keep              leave the test pods (and the NAD) for debugging; no teardown checks
      --kubectl CMD       kubectl to use (default: kubectl; e.g. "oc")
  -h, --help
EOF
}

die() { echo "validate-ipoib: $*" >&2; exit 2; }

NAD=ib-ipoib-hw NAD_APPLY=1 NS=default IMAGE=docker.io/mellanox/rping-test:latest
HOST_IMAGE=docker.io/nicolaka/netshoot:latest NODE_A="" NODE_B=""
OPT_MASTER="" OPT_RDMA_DEV="" OPT_PORT="" OPT_PKEY=0x7fff OPT_MODE="" RENDER_OPTS=""
RDMA_RESOURCE="" PRIVILEGED=false
IP_A=192.168.110.201/24 IP_B=192.168.110.202/24 TIMEOUT=180 KEEP=0 KUBECTL=kubectl
IFN=net1 # the interface name the pod template asks Multus for

while (($#)); do
  common_opt "$@" && { shift "$OPT_TAKEN"; continue; }
  case $1 in
    --master) OPT_MASTER=${2-}; RENDER_OPTS+=" $1"; shift ;;
    --rdma-device) OPT_RDMA_DEV=${2-}; RENDER_OPTS+=" $1"; shift ;;
    --port) OPT_PORT=${2-}; RENDER_OPTS+=" $1"; shift ;;
    --pkey) OPT_PKEY=${2-}; RENDER_OPTS+=" $1"; shift ;;
    --mode) OPT_MODE=${2-}; RENDER_OPTS+=" $1"; shift ;;
    --rdma-resource) RDMA_RESOURCE=${2-}; shift ;;
    --privileged) PRIVILEGED=true ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

# --- argument checks ------------------------------------------------------------------------------

PKEY_RE='^0[xX][0-9a-fA-F]{1,4}$'
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout must be a number of seconds"
if ((NAD_APPLY == 0)) && [[ -n $RENDER_OPTS ]]; then
  die "${RENDER_OPTS# }: these render the NAD that this script applies; with --no-nad-apply the NAD's own values are checked"
fi
[[ -z $OPT_MASTER || -z $OPT_RDMA_DEV ]] || die "give --master or --rdma-device/--port, not both"
[[ -z $OPT_PORT || -n $OPT_RDMA_DEV ]] || die "--port goes with --rdma-device"
[[ -n $OPT_RDMA_DEV && -z $OPT_PORT ]] && OPT_PORT=1
[[ -z $OPT_MASTER || $OPT_MASTER =~ ^[A-Za-z0-9_.-]{1,15}$ ]] || die "--master '$OPT_MASTER': not a netdev name"
[[ -z $OPT_RDMA_DEV || $OPT_RDMA_DEV =~ ^[A-Za-z0-9_.-]+$ ]] || die "--rdma-device '$OPT_RDMA_DEV': not an RDMA device name"
[[ -z $OPT_PORT || $OPT_PORT =~ ^[1-9][0-9]?$ ]] || die "--port must be a port number (1, 2, ...)"
# valid_pkey PKEY: 0x0001-0x7fff or 0x8001-0xffff.
valid_pkey() { [[ $1 =~ $PKEY_RE ]] && (($1 & 0x7fff)); }
valid_pkey "$OPT_PKEY" || die "--pkey '$OPT_PKEY': give 0x0001-0x7fff or 0x8001-0xffff"
[[ -z $OPT_MODE || $OPT_MODE == datagram || $OPT_MODE == connected ]] || die "--mode must be datagram or connected"
[[ -z $RDMA_RESOURCE || $RDMA_RESOURCE =~ ^[A-Za-z0-9.-]+/[A-Za-z0-9._-]+$ ]] \
  || die "--rdma-resource '$RDMA_RESOURCE': expected DOMAIN/NAME"
check_common_args 192.168.110.201/24

start_run ibcni-ipoib

trap cleanup EXIT
trap 'exit 130' INT TERM HUP

declare -A HELPER HELPER_ERR HINFO SNAPSHOT SNAP_WHEN PARENT PREFLIGHTED
HROWS="" LOG_FILE=""

# pkey_full PKEY: the pkey as the kernel reports an IPoIB link's (full-membership bit set, 0x%04x).
pkey_full() { printf '0x%04x' $(($1 | 0x8000)); }

# --- the NetworkAttachmentDefinition --------------------------------------------------------------

NADS=network-attachment-definitions.k8s.cni.cncf.io
existing=$(kc -n "$NAD_NS" get "$NADS" "$NAD_NAME" -o json 2>/dev/null)
if ((NAD_APPLY)); then
  if [[ -n $existing ]] \
    && [[ $(jq -r '.metadata.labels["app.kubernetes.io/created-by"] // ""' <<<"$existing") != "$CREATED_BY" ]]; then
    die "NAD $NAD_NS/$NAD_NAME exists and was not created by this kit; validate it with --no-nad-apply or choose another --nad"
  fi
  manifest=$(kc create --dry-run=client -o json -f "$NAD_MANIFEST" 2>&1) \
    || die "cannot read $NAD_MANIFEST (is the NetworkAttachmentDefinition CRD, i.e. Multus, installed?): $manifest"
  manifest=$(jq --arg n "$NAD_NAME" --arg ns "$NAD_NS" --arg master "$OPT_MASTER" --arg dev "$OPT_RDMA_DEV" \
    --arg port "$OPT_PORT" --arg pkey "$OPT_PKEY" --arg mode "$OPT_MODE" '
      .metadata.name = $n | .metadata.namespace = $ns
      | .spec.config |= (fromjson
          | .name = $n | .pkey = $pkey
          | if $dev != "" then del(.master) | .rdmaDevice = $dev | .port = ($port | tonumber)
            elif $master != "" then del(.rdmaDevice, .port) | .master = $master
            else . end
          | if $mode != "" then .ipoibMode = $mode else del(.ipoibMode) end
          | tojson)
    ' <<<"$manifest") || die "cannot adapt $NAD_MANIFEST"
  out=$(kc apply -f - <<<"$manifest" 2>&1) || die "applying the NAD failed: $out"
  [[ -z $existing ]] && NAD_CREATED=1
  pass nad_applied "$NAD_NS/$NAD_NAME from manifests/nad-ipoib.yaml"
fi
nad_json=$(kc -n "$NAD_NS" get "$NADS" "$NAD_NAME" -o json 2>&1) \
  || die "cannot read NetworkAttachmentDefinition $NAD_NS/$NAD_NAME: $nad_json"
CONF=$(jq -c '.spec.config // "{}" | fromjson | if has("plugins") then ([.plugins[] | select(.type == "ibcni")][0] // {}) else . end' \
  <<<"$nad_json" 2>/dev/null) || die "the NAD's spec.config is not JSON"
MASTER=$(conf '.master // ""')
RDMA_DEV=$(conf '.rdmaDevice // ""')
PORT=$(conf '.port // 1 | tostring')
NAD_PKEY=$(conf '.pkey // "" | tostring')
NAD_MODE=$(conf '.ipoibMode // ""')
NAD_UMCAST=$(conf 'if has("umcast") then .umcast | tostring else "" end')
NAD_MTU=$(conf '.mtu // "" | tostring')
LOG_FILE=$(conf '.logFile // ""')

problems=()
[[ $(conf '.type // ""') == ibcni ]] || problems+=("type is not ibcni")
[[ $(conf '.mode // ""') == ipoib ]] || problems+=("mode is not ipoib")
if [[ -n $MASTER && -n $RDMA_DEV ]]; then
  problems+=("both master and rdmaDevice are set")
elif [[ -z $MASTER && -z $RDMA_DEV ]]; then
  problems+=("neither master nor rdmaDevice is set")
fi
[[ -z $MASTER || $MASTER =~ ^[A-Za-z0-9_.-]{1,15}$ ]] || problems+=("master '$MASTER' is not a netdev name")
[[ -z $RDMA_DEV || ($RDMA_DEV =~ ^[A-Za-z0-9_.-]+$ && $PORT =~ ^[1-9][0-9]?$) ]] \
  || problems+=("rdmaDevice '$RDMA_DEV' / port '$PORT' malformed")
[[ -z $NAD_PKEY ]] || valid_pkey "$NAD_PKEY" || problems+=("pkey '$NAD_PKEY' is not 0x0001-0x7fff or 0x8001-0xffff")
[[ -z $NAD_MODE || $NAD_MODE == datagram || $NAD_MODE == connected ]] || problems+=("ipoibMode '$NAD_MODE' is not datagram or connected")
[[ -z $NAD_UMCAST || $NAD_UMCAST == true || $NAD_UMCAST == false ]] || problems+=("umcast '$NAD_UMCAST' is not a bool")
[[ -z $NAD_MTU || $NAD_MTU =~ ^[0-9]+$ ]] || problems+=("mtu '$NAD_MTU' is not a number")
if [[ -n $MASTER ]]; then PARENT_DESC="master $MASTER"; else PARENT_DESC="rdmaDevice $RDMA_DEV port $PORT"; fi
if ((${#problems[@]})); then
  fail nad_config "$(IFS=';'; echo "${problems[*]}")"
  finish
fi
dflt="the parent's"
pass nad_config "type ibcni, mode ipoib, $PARENT_DESC, pkey ${NAD_PKEY:-$dflt}, ipoibMode ${NAD_MODE:-$dflt}${NAD_UMCAST:+, umcast $NAD_UMCAST}${NAD_MTU:+, mtu $NAD_MTU}, log ${LOG_FILE:-stderr}"
IPS_CAP=$(conf '.capabilities.ips // false')
[[ $IPS_CAP == true ]] || note "the NAD has no capabilities.ips: the IPAM picks the addresses, not --ip-a/--ip-b"
echo "NAD $NAD_NS/$NAD_NAME, namespace $NS, image $IMAGE, run $RUN"

# --- node helper pods (hostNetwork: they see the node's host network and RDMA namespace) ---------

# Arguments MASTER RDMA_DEV PORT. Resolves the parent (MASTER, or the IPoIB parent netdev of
# RDMA_DEV's PORT: type 32, has create_child, i.e. is no pkey child, dev_port = PORT - 1), prints
# key=value facts about it and its IB port, then "== ipoib" and `ip -d link show type ipoib`.
# shellcheck disable=SC2016 # expanded by the remote shell
HOST_PROBE='
master=$1 rdev=$2 port=$3
if [ -z "$master" ]; then
  for n in /sys/class/net/*; do
    [ "$(cat "$n/type" 2>/dev/null)" = 32 ] && [ -e "$n/create_child" ] && [ -e "$n/device/infiniband/$rdev" ] || continue
    dp=$(cat "$n/dev_port" 2>/dev/null); [ -n "$dp" ] || dp=0
    if [ "$((dp + 1))" = "$port" ]; then master=${n##*/}; break; fi
  done
fi
echo "parent=$master"
echo "kernel=$(uname -r)"
echo "rdma_netns=$( (rdma system show 2>/dev/null || echo "ib_core netns_mode=$(cat /sys/module/ib_core/parameters/netns_mode 2>/dev/null)") | head -n 1)"
n=/sys/class/net/$master
if [ -n "$master" ] && [ -e "$n" ]; then
  echo "parent_type=$(cat "$n/type")"
  [ -e "$n/create_child" ] && echo "parent_is_parent=1"
  ib=$(ls "$n/device/infiniband" 2>/dev/null | head -n 1)
  dp=$(cat "$n/dev_port" 2>/dev/null); [ -n "$dp" ] || dp=0
  p=$((dp + 1))
  echo "parent_ibdev=$ib"
  [ -e "$n/device" ] && echo "parent_pci=$(basename "$(readlink -f "$n/device")")"
  echo "parent_port=$p"
  pd=/sys/class/infiniband/$ib/ports/$p
  if [ -n "$ib" ] && [ -d "$pd" ]; then
    echo "port_state=$(cat "$pd/state")"
    echo "port_lid=$(cat "$pd/lid")"
    echo "port_sm_lid=$(cat "$pd/sm_lid")"
    echo "pkeys=$(cat "$pd"/pkeys/* 2>/dev/null | grep -v "^0x0000$" | sort -u | tr "\n" " ")"
  fi
fi
echo "== ipoib"
ip -d link show type ipoib'

# ipoib_rows: from `ip -d link show` text, one line per link:
#   NAME PARENT PKEY MODE UMCAST MTU FLAGS ADDRESS
# PARENT is "-" unless ip prints NAME@PARENT (a child); "-" for what ip does not print.
ipoib_rows() {
  awk '
    function emit() {
      if (name != "") print name, parent, (pk == "" ? "-" : tolower(pk)), (md == "" ? "-" : md), \
        (um == "" ? "-" : um), mtu, flags, (addr == "" ? "-" : tolower(addr))
    }
    /^[0-9]+: / {
      emit()
      name = $2; sub(/:$/, "", name); parent = "-"
      i = index(name, "@")
      if (i) { parent = substr(name, i + 1); name = substr(name, 1, i - 1) }
      flags = $3; mtu = "-"
      for (j = 4; j < NF; j++) if ($j == "mtu") { mtu = $(j + 1); break }
      pk = ""; md = ""; um = ""; addr = ""
      next
    }
    $1 == "link/infiniband" { addr = $2 }
    {
      for (j = 1; j <= NF; j++) if ($j == "ipoib") {
        for (k = j + 1; k < NF; k++) {
          if ($k == "pkey" && pk == "") pk = $(k + 1)
          if ($k == "mode" && md == "") md = $(k + 1)
          if ($k == "umcast" && um == "") um = $(k + 1)
        }
        break
      }
    }
    END { emit() }'
}

# row_of ROWS NAME: the row of link NAME.
row_of() { awk -v n="$2" '$1 == n' <<<"$1"; }
# parent_sig ROW: what must not change on the parent: flags, mtu, pkey, mode, umcast, address.
parent_sig() { awk '{print "flags " $7 " mtu " $6 " pkey " $3 " mode " $4 " umcast " $5 " addr " $8}' <<<"$1"; }
# host_probe NODE: probe the node; the facts go to HINFO[NODE], the ipoib rows to HROWS.
host_probe() {
  local h
  h=$(on_host "$1" "$HOST_PROBE" "$MASTER" "$RDMA_DEV" "$PORT")
  HINFO[$1]=$(sed '/^== ipoib$/,$d' <<<"$h")
  HROWS=$(sed -n '/^== ipoib$/,$p' <<<"$h" | sed 1d | ipoib_rows)
}
# stale_children ROWS NODE: rows of IPoIB links that ibcni may have left: its temporary names
# (ibc + 8 hex), the pod interface name, or a child of the parent with the test pkey.
stale_children() {
  awk -v parent="${PARENT[$2]:-}" -v pk="$(node_pkey "$2")" -v ifn="$IFN" '
    $1 ~ /^ibc[0-9a-f]{8}$/ || $1 == ifn || ($2 == parent && parent != "" && pk != "" && $3 == pk)' <<<"$1"
}
# node_pkey NODE: the pkey ibcni's children get on NODE (full-membership bit set), "" if unknown.
node_pkey() {
  local r
  if [[ -n $NAD_PKEY ]]; then pkey_full "$NAD_PKEY"; return; fi
  r=$(row_of "${SNAPSHOT[$1]:-}" "${PARENT[$1]:-}")
  [[ -n $r && $(awk '{print $3}' <<<"$r") =~ $PKEY_RE ]] && pkey_full "$(awk '{print $3}' <<<"$r")"
}
# node_mode NODE: the IPoIB mode ibcni's children get on NODE, "" if unknown.
node_mode() {
  if [[ -n $NAD_MODE ]]; then echo "$NAD_MODE"; return; fi
  awk '{print $4}' <<<"$(row_of "${SNAPSHOT[$1]:-}" "${PARENT[$1]:-}")" | grep -E '^(datagram|connected)$'
}

# node_preflight NODE BEFORE: helper pod, the parent and its port, the partition in the port's
# pkey table, and the snapshot of the node's IPoIB links (BEFORE 1: no test pod exists yet; 0: the
# test pods run, their children are in the pods' namespaces and not part of it).
node_preflight() {
  local node=$1 before=$2 rows prow state lid smlid pkeys k found="" want stale
  PREFLIGHTED[$node]=1
  if ! ensure_helper "$node"; then
    skip "node_parent_$node" "${HELPER_ERR[$node]}"
    return
  fi
  host_probe "$node"
  rows=$HROWS
  SNAPSHOT[$node]=$rows
  if ((before)); then SNAP_WHEN[$node]="before the test"; else SNAP_WHEN[$node]="while the test pods ran"; fi
  PARENT[$node]=$(hfact "${HINFO[$node]}" parent)
  note "node $node: kernel $(hfact "${HINFO[$node]}" kernel), RDMA $(hfact "${HINFO[$node]}" rdma_netns)"
  if [[ -z ${PARENT[$node]} ]]; then
    fail "node_parent_$node" "no IPoIB parent netdev of $RDMA_DEV port $PORT on $node: $(head -n 1 <<<"${HINFO[$node]}") (an InfiniBand port with ib_ipoib loaded?)"
    return
  fi
  prow=$(row_of "$rows" "${PARENT[$node]}")
  state=$(hfact "${HINFO[$node]}" port_state) lid=$(hfact "${HINFO[$node]}" port_lid)
  smlid=$(hfact "${HINFO[$node]}" port_sm_lid)
  if [[ -z $(hfact "${HINFO[$node]}" parent_type) ]]; then
    fail "node_parent_$node" "${PARENT[$node]} does not exist on $node"
    return
  elif [[ $(hfact "${HINFO[$node]}" parent_type) != 32 || -z $prow ]]; then
    fail "node_parent_$node" "${PARENT[$node]} on $node is not an IPoIB netdev (ARPHRD type $(hfact "${HINFO[$node]}" parent_type); 'ip -d link show type ipoib' $([[ -n $prow ]] && echo lists || echo "does not list") it)"
    return
  elif [[ -z $(hfact "${HINFO[$node]}" parent_is_parent) ]]; then
    fail "node_parent_$node" "${PARENT[$node]} on $node is itself a pkey child (no create_child); name the parent"
    return
  elif [[ $state != *ACTIVE* ]]; then
    fail "node_parent_$node" "${PARENT[$node]} ($(hfact "${HINFO[$node]}" parent_ibdev) port $(hfact "${HINFO[$node]}" parent_port)) is ${state:-?}, not ACTIVE (no SM, or cable/port down)"
  elif [[ ! $lid =~ ^0x[0-9a-fA-F]+$ || ! $smlid =~ ^0x[0-9a-fA-F]+$ ]] || ((lid == 0 || smlid == 0)); then
    fail "node_parent_$node" "${PARENT[$node]}: LID $lid, SM LID $smlid (no subnet manager?)"
  else
    pass "node_parent_$node" "${PARENT[$node]} ($(hfact "${HINFO[$node]}" parent_ibdev) port $(hfact "${HINFO[$node]}" parent_port), $state, lid $lid): $(parent_sig "$prow")"
  fi

  # The partition ibcni will use must be in the port's pkey table, or the child has no carrier.
  want=$(node_pkey "$node") pkeys=$(hfact "${HINFO[$node]}" pkeys)
  for k in $pkeys; do
    [[ -n $want && $k =~ $PKEY_RE ]] && (((k & 0x7fff) == (want & 0x7fff))) && found=$k
  done
  if [[ -z $want ]]; then
    skip "node_pkey_$node" "pkey to use unknown (the NAD sets none and the parent's was not read)"
  elif [[ -n $found ]]; then
    pass "node_pkey_$node" "$found in the pkey table of ${PARENT[$node]}'s port ($( ((found & 0x8000)) && echo full || echo limited) member)"
  else
    fail "node_pkey_$node" "pkey $want not in the pkey table of ${PARENT[$node]}'s port (${pkeys:-empty}): add the node's port GUID to that partition in the SM"
  fi

  # ibcni's temporary names and the pod interface name never belong in the host netns; another
  # child of the parent with the test pkey may be the admin's (not a failure, not a leftover).
  stale=$(stale_children "$rows" "$node")
  named=$(awk -v ifn="$IFN" '$1 ~ /^ibc[0-9a-f]{8}$/ || $1 == ifn' <<<"$stale")
  others=$(awk -v ifn="$IFN" '!($1 ~ /^ibc[0-9a-f]{8}$/ || $1 == ifn)' <<<"$stale")
  [[ -n $others ]] && note "$node already has $(awk '{print $1 "@" $2 " pkey " $3}' <<<"$others" | tr '\n' ' ')(not counted as leftovers)"
  if [[ -n $named ]]; then
    fail "no_stale_children_$node" "${SNAP_WHEN[$node]}: $(awk '{print $1 "@" $2 " pkey " $3}' <<<"$named" | tr '\n' ' ')in the host netns (leftover of a failed ADD/DEL; remove: ip link del <name>)"
  else
    pass "no_stale_children_$node" "${SNAP_WHEN[$node]}: no IPoIB link named ibcXXXXXXXX or $IFN in the host netns"
  fi
}

if [[ -n $NODE_A || -n $NODE_B ]]; then
  for node in $(printf '%s\n' "$NODE_A" "$NODE_B" | sort -u); do
    kc get node "$node" >/dev/null 2>&1 || die "node $node not found"
    node_preflight "$node" 1
  done
fi

# --- test pods ------------------------------------------------------------------------------------

# render_pod NAME NODE IP: the pod template with its placeholders replaced.
render_pod() {
  local name=$1 node=$2 ip=$3 t host=""
  t=$(grep -v '^[[:space:]]*#' "$POD_TEMPLATE") # comments would get substituted too
  if [[ -n $node ]]; then
    host=$(kc get node "$node" -o jsonpath='{.metadata.labels.kubernetes\.io/hostname}' 2>/dev/null)
    [[ -n $host ]] || die "node $node has no kubernetes.io/hostname label"
  else
    # shellcheck disable=SC2016 # the placeholder is literal
    t=$(grep -v 'kubernetes.io/hostname: "${NODE}"' <<<"$t")
  fi
  # shellcheck disable=SC2016 # the placeholder is literal
  [[ -n $RDMA_RESOURCE ]] || t=$(grep -v '^[[:space:]]*resources:.*${RDMA_RESOURCE}' <<<"$t")
  # shellcheck disable=SC2016 # the placeholders are literal
  {
    t=${t//'${NAME}'/"$name"}
    t=${t//'${RUN}'/"$RUN"}
    t=${t//'${NAD_NAMESPACE}'/"$NAD_NS"}
    t=${t//'${NAD}'/"$NAD_NAME"}
    t=${t//'${IP}'/"$ip"}
    t=${t//'${IMAGE}'/"$IMAGE"}
    t=${t//'${PRIVILEGED}'/"$PRIVILEGED"}
    t=${t//'${RDMA_RESOURCE}'/"$RDMA_RESOURCE"}
    t=${t//'${NODE}'/"$host"}
  }
  # shellcheck disable=SC2016 # a literal "${"
  [[ $t != *'${'* ]] || die "pod template has a placeholder the script does not know"
  printf '%s\n' "$t"
}

declare -A WANT_IP NODE
WANT_IP[$POD_A]=$IP_A WANT_IP[$POD_B]=$IP_B NODE[$POD_A]=$NODE_A NODE[$POD_B]=$NODE_B
for p in "$POD_A" "$POD_B"; do
  manifest=$(render_pod "$p" "${NODE[$p]}" "${WANT_IP[$p]}") || exit 2
  out=$(kc -n "$NS" apply -f - <<<"$manifest" 2>&1) || die "creating pod $p failed: $out"
done

ready=1
for p in "$POD_A" "$POD_B"; do
  if kc -n "$NS" wait --for=condition=Ready "pod/$p" --timeout="${TIMEOUT}s" >/dev/null 2>&1; then
    NODE[$p]=$(kc -n "$NS" get pod "$p" -o jsonpath='{.spec.nodeName}')
    pass "pod_ready_$p" "on node ${NODE[$p]}"
  else
    ready=0
    NODE[$p]=$(kc -n "$NS" get pod "$p" -o jsonpath='{.spec.nodeName}' 2>/dev/null)
    fail "pod_ready_$p" "not Ready within ${TIMEOUT}s on node ${NODE[$p]:-<not scheduled>}; last events:"
    kc -n "$NS" get events --field-selector "involvedObject.name=$p" --sort-by=.lastTimestamp 2>/dev/null \
      | tail -n 8 | sed 's/^/     /'
    [[ -n ${NODE[$p]} ]] && ensure_helper "${NODE[$p]}"
  fi
done
((ready)) || finish

SAME_NODE=0 OLD_KERNEL=0
if [[ ${NODE[$POD_A]} == "${NODE[$POD_B]}" ]]; then
  SAME_NODE=1
  kver=$(kc get node "${NODE[$POD_A]}" -o jsonpath='{.status.nodeInfo.kernelVersion}' 2>/dev/null)
  if [[ $kver =~ ^([0-9]+)\.([0-9]+) ]] \
    && ((BASH_REMATCH[1] < 5 || (BASH_REMATCH[1] == 5 && BASH_REMATCH[2] < 8))); then
    OLD_KERNEL=1
  fi
  note "both pods run on ${NODE[$POD_A]} (kernel ${kver:-?}): traffic does not leave the HCA; use --node-a/--node-b on two nodes to cross the fabric"
  ((OLD_KERNEL)) && note "IPoIB between two children of one port needs kernel >= 5.8 (enhanced IPoIB loopback); ping failures are then SKIPs"
fi
for p in "$POD_A" "$POD_B"; do
  [[ -n ${PREFLIGHTED[${NODE[$p]}]:-} ]] && continue
  note "node ${NODE[$p]} was not given with --node-a/--node-b: its snapshot is taken while the test pods run"
  node_preflight "${NODE[$p]}" 0
done

# --- Multus network-status ------------------------------------------------------------------------

declare -A IPADDR
for p in "$POD_A" "$POD_B"; do
  ann=$(kc -n "$NS" get pod "$p" -o json | jq -r '.metadata.annotations["k8s.v1.cni.cncf.io/network-status"]
          // .metadata.annotations["k8s.v1.cni.cncf.io/networks-status"] // ""')
  entry=$(jq -c --arg a "$NAD_NS/$NAD_NAME" --arg b "$NAD_NAME" \
    '[.[] | select(.name == $a or .name == $b)][0] // empty' <<<"$ann" 2>/dev/null)
  if [[ -z $entry ]]; then
    fail "network_status_$p" "no entry for $NAD_NS/$NAD_NAME in the network-status annotation: ${ann:-<none>}"
    continue
  fi
  ifname=$(jq -r '.interface // ""' <<<"$entry")
  IPADDR[$p]=$(jq -r '[.ips[]? | select(test("^[0-9.]+$"))][0] // ""' <<<"$entry")
  if [[ $ifname != "$IFN" || -z ${IPADDR[$p]} ]]; then
    fail "network_status_$p" "expected interface $IFN with an IPv4 address: $entry"
  elif [[ $IPS_CAP == true && ${IPADDR[$p]} != "${WANT_IP[$p]%/*}" ]]; then
    fail "network_status_$p" "got ${IPADDR[$p]}, requested ${WANT_IP[$p]} (the NAD's IPAM range must contain --ip-a/--ip-b)"
  else
    pass "network_status_$p" "$ifname ${IPADDR[$p]} mac $(jq -r '.mac // "-"' <<<"$entry")"
  fi
  # The HCA behind net1 (device-info that ibcni writes when Multus passes runtimeConfig.CNIDeviceInfoFile,
  # capabilities.CNIDeviceInfoFile in the NAD): the parent's RDMA device and PCI function on the pod's
  # node, what a pod reads to set NCCL_IB_HCA.
  node=${NODE[$p]:-}
  want_dev=$( [[ -n $node ]] && hfact "${HINFO[$node]:-}" parent_ibdev)
  want_pci=$( [[ -n $node ]] && hfact "${HINFO[$node]:-}" parent_pci)
  got_dev=$(jq -r '.["device-info"].pci["rdma-device"] // ""' <<<"$entry")
  got_pci=$(jq -r '.["device-info"].pci["pci-address"] // ""' <<<"$entry")
  if [[ -z $(jq -r '.["device-info"] // empty' <<<"$entry") ]]; then
    skip "device_info_$p" "no device-info in network-status: Multus passed no runtimeConfig.CNIDeviceInfoFile (it derives that path from a device plugin's deviceID: only a NAD with a resourceName, e.g. the RDMA shared device plugin's rdma/rdma_shared_device_a, gets one)"
  elif [[ -z $want_dev ]]; then
    skip "device_info_$p" "device-info says ${got_dev:-?} ${got_pci:-?}; the parent's RDMA device on ${node:-?} is unknown"
  elif [[ $got_dev != "$want_dev" || ( -n $want_pci && $got_pci != "$want_pci" ) ]]; then
    fail "device_info_$p" "device-info says rdma-device ${got_dev:-<none>}, pci-address ${got_pci:-<none>}; the parent ${PARENT[$node]:-?} on $node is $want_dev at ${want_pci:-?}"
  else
    pass "device_info_$p" "rdma-device $got_dev, pci-address $got_pci: ${PARENT[$node]}'s HCA on $node"
  fi
done
if [[ -n ${IPADDR[$POD_A]:-} && ${IPADDR[$POD_A]} == "${IPADDR[$POD_B]:-}" ]]; then
  fail ip_distinct "both pods got ${IPADDR[$POD_A]}: node-local IPAM on two nodes; enable capabilities.ips in the NAD or give per-node ranges"
fi

# --- inside each pod ------------------------------------------------------------------------------

# Facts about net1 and the RDMA devices the pod sees, as key=value lines.
# shellcheck disable=SC2016 # expanded by the remote shell
POD_PROBE='
ifn=$1 d=/sys/class/net/$1
printf "tools="; for t in ib_send_bw ping ip timeout; do command -v $t >/dev/null 2>&1 && printf "%s " $t; done; echo
if [ -e "$d" ]; then
  echo "if_type=$(cat $d/type)"
  echo "if_flags=$(cat $d/flags)"
  echo "if_carrier=$(cat $d/carrier 2>/dev/null)"
  echo "if_addr=$(cat $d/address)"
  echo "if_mtu=$(cat $d/mtu)"
  echo "if_pkey=$(cat $d/pkey 2>/dev/null)"
  echo "if_mode=$(cat $d/mode 2>/dev/null)"
  command -v ip >/dev/null 2>&1 && echo "if_ipv4=$(ip -o -4 addr show dev "$ifn" | tr "\n" " ")"
fi
echo "ib_devs=$(ls /sys/class/infiniband 2>/dev/null | tr "\n" " ")"
echo "uverbs=$(ls /dev/infiniband 2>/dev/null | tr "\n" " ")"'

declare -A FACTS
# gid_of ADDR: the 16-byte GID of a 20-byte IPoIB hardware address (the part after flags + QPN).
gid_of() { cut -d: -f5- <<<"$1" | tr 'A-F' 'a-f'; }

for p in "$POD_A" "$POD_B"; do
  node=${NODE[$p]}
  FACTS[$p]=$(kc -n "$NS" exec "$p" -- sh -c "$POD_PROBE" sh "$IFN" 2>&1 | tr -d '\r')

  tools=$(fact "$p" tools)
  missing=""
  for t in ib_send_bw ping ip; do [[ " $tools " == *" $t "* ]] || missing+=" $t"; done
  if [[ -z $missing ]]; then pass "tools_$p" "$tools"; else fail "tools_$p" "image $IMAGE lacks:$missing"; fi

  # net1 is an IPoIB netdev, up with carrier (the SM has the port in the partition), with the
  # address from network-status and a 20-byte hardware address (flags + QPN, then the GID).
  type=$(fact "$p" if_type) flags=$(fact "$p" if_flags) ipv4=$(fact "$p" if_ipv4)
  addr=$(fact "$p" if_addr) mtu=$(fact "$p" if_mtu)
  if [[ -z $type ]]; then
    fail "net1_ipoib_$p" "$IFN does not exist in the pod: $(head -n 3 <<<"${FACTS[$p]}" | tr '\n' ' ')"
  elif [[ $type != 32 ]]; then
    fail "net1_ipoib_$p" "$IFN has ARPHRD type $type, not 32 (link/infiniband)"
  elif [[ ! $addr =~ ^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){19}$ ]]; then
    fail "net1_ipoib_$p" "$IFN hardware address '$addr' is not 20 bytes"
  elif (((flags & 1) == 0)); then
    fail "net1_ipoib_$p" "$IFN is not up (flags $flags)"
  elif [[ $(fact "$p" if_carrier) != 1 ]]; then
    fail "net1_ipoib_$p" "$IFN is up but has no carrier: the port is not a member of pkey $(node_pkey "$node") (SM partitions.conf), or the port is down"
  elif [[ -n ${IPADDR[$p]:-} && $ipv4 != *" ${IPADDR[$p]}/"* ]]; then
    fail "net1_ipoib_$p" "$IFN lacks ${IPADDR[$p]}: $ipv4"
  elif [[ -n $NAD_MTU && $mtu != "$NAD_MTU" ]]; then
    fail "net1_ipoib_$p" "$IFN has mtu $mtu, the NAD asks for $NAD_MTU"
  else
    pass "net1_ipoib_$p" "link/infiniband $addr, up, carrier, mtu $mtu"
  fi

  # `ip -d link show net1`: kind ipoib with the expected pkey (full-membership bit set) and mode.
  ipd=$(kc -n "$NS" exec "$p" -- ip -d link show dev "$IFN" 2>&1 | tr -d '\r')
  row=$(ipoib_rows <<<"$ipd" | head -n 1)
  read -r _ _ pk md um _ <<<"${row:-- - - - -}"
  src="ip -d link show"
  if [[ $pk == - && -n $type ]]; then
    # iproute2 without ipoib support (busybox): the same values from sysfs.
    pk=$(fact "$p" if_pkey) md=$(fact "$p" if_mode) um=- src="sysfs (ip -d printed no ipoib details)"
  fi
  want_pk=$(node_pkey "$node") want_md=$(node_mode "$node")
  problems=()
  if [[ -z $type ]]; then
    problems+=("$IFN missing")
  elif [[ ! $pk =~ $PKEY_RE ]]; then
    problems+=("no IPoIB pkey for $IFN: $(head -n 3 <<<"$ipd" | tr '\n' ' ')")
  else
    [[ -z $want_pk || $((pk)) -eq $((want_pk)) ]] || problems+=("pkey $pk, want $want_pk")
    [[ -z $want_md || $md == "$want_md" ]] || problems+=("mode $md, want $want_md")
    if [[ -n $NAD_UMCAST && $um != - ]]; then
      [[ $um == 0x* ]] || um=0x$um
      [[ $((um != 0)) == $([[ $NAD_UMCAST == true ]] && echo 1 || echo 0) ]] || problems+=("umcast $um, the NAD says $NAD_UMCAST")
    fi
  fi
  if ((${#problems[@]})); then
    fail "net1_pkey_mode_$p" "$(IFS=';'; echo "${problems[*]}")"
  else
    pass "net1_pkey_mode_$p" "$src: ipoib pkey $pk mode $md$([[ $um != - ]] && echo " umcast $um")$([[ -z $want_pk || -z $want_md ]] && echo " (parent's values unknown: not all compared)")"
  fi

  # The child is on the parent's port: same GID (the last 16 bytes of the hardware address).
  prow=$(row_of "${SNAPSHOT[$node]:-}" "${PARENT[$node]:-}")
  paddr=$(awk '{print $8}' <<<"$prow")
  if [[ -z $type || ! $addr =~ ^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){19}$ ]]; then
    skip "net1_gid_$p" "no 20-byte address for $IFN"
  elif [[ -z $paddr || $paddr == - ]]; then
    skip "net1_gid_$p" "parent on $node unknown (see node_parent_$node)"
  elif [[ $(gid_of "$addr") == "$(gid_of "$paddr")" ]]; then
    pass "net1_gid_$p" "GID $(gid_of "$addr") of ${PARENT[$node]} on $node"
  else
    fail "net1_gid_$p" "GID $(gid_of "$addr") is not ${PARENT[$node]}'s $(gid_of "$paddr") on $node (child of another port?)"
  fi
done

# --- traffic between the pods ---------------------------------------------------------------------

for pair in "$POD_A:$POD_B" "$POD_B:$POD_A"; do
  src=${pair%%:*} dst=${pair#*:}
  if [[ -z ${IPADDR[$dst]:-} ]]; then
    skip "ping_${src}_to_$dst" "address of $dst unknown (see network_status)"
    continue
  fi
  if out=$(kc -n "$NS" exec "$src" -- ping -c 3 -W 3 -I "$IFN" "${IPADDR[$dst]}" 2>&1); then
    pass "ping_${src}_to_$dst" "$(grep -E 'packet loss' <<<"$out")"
  elif ((SAME_NODE && OLD_KERNEL)); then
    skip "ping_${src}_to_$dst" "failed, both pods on one node with kernel < 5.8 (no enhanced IPoIB loopback): $(tail -n 1 <<<"$out")"
  else
    fail "ping_${src}_to_$dst" "$(tail -n 2 <<<"$out" | tr '\n' ' ')"
  fi
done

# ib_send_bw over RDMA CM (-R): server in pod A, client in pod B resolving A's net1 address; the
# connection is set up by rdma_cm through IPoIB, the measurement is RDMA sends between the ports.
rdma_missing=""
for p in "$POD_A" "$POD_B"; do
  uv=$(fact "$p" uverbs) devs=$(fact "$p" ib_devs)
  if [[ -z $devs ]]; then
    rdma_missing+="$p sees no RDMA device (node RDMA netns mode exclusive? rdma system show); "
  elif [[ " $uv " != *" rdma_cm "* || " $uv " != *" uverbs"* ]]; then
    rdma_missing+="$p has no /dev/infiniband/{rdma_cm,uverbsN} (${uv:-empty}: give --rdma-resource or --privileged); "
  fi
done
if [[ -z ${IPADDR[$POD_A]:-} ]]; then
  skip rdma_send_bw "address of $POD_A unknown (see network_status)"
elif [[ -n $rdma_missing ]]; then
  skip rdma_send_bw "${rdma_missing%; }"
else
  # shellcheck disable=SC2016 # expanded by the remote shell
  bounded='if command -v timeout >/dev/null 2>&1; then exec timeout 60 "$@"; else exec "$@"; fi'
  kc -n "$NS" exec "$POD_A" -- sh -c "$bounded" sh \
    ib_send_bw -R -F --report_gbits -D 5 >"$TMP/bw-server.log" 2>&1 &
  BW_SERVER_PID=$!
  sleep 3
  for attempt in 1 2 3; do
    out=$(kc -n "$NS" exec "$POD_B" -- sh -c "$bounded" sh \
      ib_send_bw -R -F --report_gbits -D 5 "${IPADDR[$POD_A]}" 2>&1) && break
    ((attempt < 3)) && sleep 3
  done
  for ((i = 0; i < 30; i++)); do kill -0 "$BW_SERVER_PID" 2>/dev/null || break; sleep 1; done
  kill "$BW_SERVER_PID" 2>/dev/null
  BW_SERVER_PID=""
  bw=$(awk '/BW average/ {h = 1; next} h && $1 ~ /^[0-9]+$/ && NF >= 4 {print $4; exit}' <<<"$out")
  if [[ -z $bw ]]; then
    fail rdma_send_bw "no result from ib_send_bw -R $POD_B -> ${IPADDR[$POD_A]}: $(tail -n 4 <<<"$out" | tr '\n' ' ')"
    note "server side: $(tail -n 4 "$TMP/bw-server.log" | tr '\n' ' ')"
  elif awk -v a="$bw" 'BEGIN { exit !(a + 0 > 0) }'; then
    pass rdma_send_bw "$POD_B -> $POD_A (${IPADDR[$POD_A]}, rdma_cm): BW average $bw Gb/s (65536-byte sends, 5 s)"
  else
    fail rdma_send_bw "BW average $bw Gb/s"
  fi
fi

# --- teardown: nothing left on the host -----------------------------------------------------------

delete_test_pods "children's removal"

for node in $(printf '%s\n' "${NODE[$POD_A]}" "${NODE[$POD_B]}" | sort -u); do
  if ! ensure_helper "$node"; then
    for c in no_leftover_children parent_unchanged; do
      skip "${c}_$node" "${HELPER_ERR[$node]}; on $node check 'ip -d link show type ipoib'"
    done
    continue
  fi
  if [[ -z ${PARENT[$node]:-} || -z $(row_of "${SNAPSHOT[$node]:-}" "${PARENT[$node]}") ]]; then
    for c in no_leftover_children parent_unchanged; do skip "${c}_$node" "no IPoIB parent on $node to compare with (see node_parent_$node)"; done
    continue
  fi
  # kubelet runs CNI DEL asynchronously: poll until no new child is left or the timeout.
  deadline=$((SECONDS + TIMEOUT))
  while :; do
    host_probe "$node"
    rows=$HROWS
    left=$(stale_children "$rows" "$node" | awk 'NR == FNR {seen[$1]; next} !($1 in seen)' \
      <(awk '{print $1}' <<<"${SNAPSHOT[$node]}") -)
    [[ -z $left ]] && break
    ((SECONDS >= deadline)) && break
    sleep 3
  done
  if [[ -n $left ]]; then
    fail "no_leftover_children_$node" "after ${TIMEOUT}s: $(awk '{print $1 "@" $2 " pkey " $3}' <<<"$left" | tr '\n' ' ')(remove: ip link del <name>)"
  else
    pass "no_leftover_children_$node" "no new ibcXXXXXXXX, $IFN or $(node_pkey "$node") child of ${PARENT[$node]} (compared with the snapshot taken ${SNAP_WHEN[$node]})"
  fi

  before=$(parent_sig "$(row_of "${SNAPSHOT[$node]}" "${PARENT[$node]}")")
  now=$(parent_sig "$(row_of "$rows" "${PARENT[$node]}")")
  if [[ -z $(row_of "$rows" "${PARENT[$node]}") ]]; then
    fail "parent_unchanged_$node" "${PARENT[$node]} is gone from $node"
  elif [[ $before == "$now" ]]; then
    pass "parent_unchanged_$node" "${PARENT[$node]} as ${SNAP_WHEN[$node]}: $now"
  else
    fail "parent_unchanged_$node" "${PARENT[$node]} was '$before' ${SNAP_WHEN[$node]}, is '$now'"
  fi
done

finish
