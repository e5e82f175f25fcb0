#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# containerd 1.6 (Debian's containerd, ctr and runc) drives ibcni: `ctr run --cni --rootfs` with a
# busybox-static root filesystem, ibcni in "sriov" mode with the embedded ibcni-ipam, a veth end
# ("vf0") standing in for a VF.
#
# How to run (as root; the packages come from scripts/install-deps.sh):
#   ctest --test-dir build -R containerd_ctr_cni --output-on-failure
#   tests/runtime/containerd/ctr_cni_test.sh build/ibcni build/ibcni-ipam
# Exit 0 = every check passed, 1 = a check failed (or a package is missing), 77 = not root (skip).
#
# Isolation: the whole test runs in a new network and mount namespace (unshare). ctr reads the first
# configuration of /etc/cni/net.d, runs plugins from /opt/cni/bin and caches results in
# /var/lib/cni; the containerd shims and ctr use /run/containerd. None of these paths can be changed
# on ctr 1.6, so inside that mount namespace /etc/cni/net.d is a private tmpfs and /opt, /var/lib
# and /run are overlays whose writes land in a tmpfs: the machine's own files are never changed.
# containerd itself runs with a private config (CRI plugin disabled), root, state and socket under
# the test's temporary directory, in a containerd namespace of its own, and is stopped by PID.
#
# What ctr 1.6 does (cmd/ctr/commands/run/run.go, run_unix.go), which the cases below rely on:
#   - ADD runs after the task is created and before it starts, with CNI_NETNS=/proc/<task pid>/ns/net
#     (a netns runc made for the container; no /run/netns entry), CNI_CONTAINERID=<namespace>-<id>,
#     CNI_IFNAME=eth0.
#   - DEL runs only in the `ctr run` process that did ADD, when it sees the task exit (after
#     deleting the task), with an EMPTY CNI_NETNS: ibcni falls back to the netns its record holds,
#     which is gone by then. `ctr task rm` / `ctr container rm` never call CNI on 1.6. A `ctr run`
#     that dies (kill -9) never sends DEL: only `ibcni reconcile` can clean up after it.
#   - No image is needed: --rootfs runs a plain directory.
# So the pod netns is never pinned here: pinning it (`--with-ns network:/run/netns/X`) would not make
# DEL move the device home, since DEL gets no netns path and the recorded /proc/<pid>/ns/net is gone
# once the task is. The container's netns dies with its task, and a veth in it dies with it (only a
# physical/PCI device comes back to the host): after each case the test checks that the record and
# the allocation are gone and no link or netns is left; that the device comes back home with its
# name, MTU, MAC, state and alias is proven in the kernel lab (tests/kernel-lab, virtio PCI NICs).
#
# Cases:
#   1. the container exits: ibcni's address is inside it while it runs; ctr sends DEL; nothing left.
#   2. kill -9 of the task: ctr sees the exit and sends DEL; nothing left; `ibcni reconcile` finds
#      nothing to do.
#   3. kill -9 of ctr: no DEL; `ibcni reconcile` leaves the live pod alone (record, allocation,
#      device in the container); once the task is killed, `ibcni reconcile` removes the record and
#      the allocation.
#
#   ctr_cni_test.sh IBCNI IBCNI_IPAM
set -uo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 IBCNI IBCNI_IPAM" >&2
  exit 2
fi
if [[ ${_IBCNI_CTR_INNER:-} != 1 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: needs root (runs containerd and creates network namespaces)"
    exit 77
  fi
  missing=()
  for tool in containerd containerd-shim-runc-v2 ctr runc busybox jq unshare nsenter ip; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  if ((${#missing[@]})); then
    echo "FAIL: missing ${missing[*]}: run scripts/install-deps.sh (packages containerd, runc," \
      "busybox-static, jq, util-linux, iproute2)" >&2
    exit 1
  fi
  if ldd "$(command -v busybox)" >/dev/null 2>&1; then
    echo "FAIL: $(command -v busybox) is dynamically linked: the container needs busybox-static" >&2
    exit 1
  fi
  for bin in "$1" "$2"; do
    [[ -x $bin ]] || { echo "FAIL: $bin is not an executable: build ibcni and ibcni-ipam first" >&2; exit 1; }
  done
  exec env _IBCNI_CTR_INNER=1 unshare --net --mount --propagation private bash "$0" "$(readlink -f "$1")" \
    "$(readlink -f "$2")"
fi

ibcni=$1
ibcni_ipam=$2
# shellcheck source=../../support/check.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../../support/check.sh"

work=$(mktemp -d /tmp/ibcni-ctr.XXXXXX)
ns=ibcni-$$                # containerd namespace: also the cgroup parent runc uses (/<ns>/<id>)
sock=$work/containerd.sock
network=ctr-ib
state=$work/ibcni-state
ipam=$work/ibcni-ipam
log=$work/ibcni.log
rootfs=$work/rootfs
containerd_pid=
ctr_pids=()
mounts=()

# Everything this test started, by PID: the ctr clients, the tasks and shims (their PID files in
# containerd's state directory), containerd; then the cgroups runc made, the mounts, the directory.
# A PID is signalled only while it is still ours: a ctr or shim whose command line names this
# test's socket, a task in this test's cgroup (its containerd namespace).
ours() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF -- "$sock"; }
in_our_cgroup() { grep -q ":/$ns/" "/proc/$1/cgroup" 2>/dev/null; }
gone() { [[ ! -e /proc/$1 ]] || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
killed=()
kill9() { kill -9 "$1" 2>/dev/null && killed+=("$1"); }
cleanup() {
  local pid f id
  for pid in "${ctr_pids[@]}"; do  # this shell's children: reaped here, quietly
    ours "$pid" && { kill9 "$pid" && wait "$pid"; } 2>/dev/null
  done
  for f in "$work"/run/io.containerd.runtime.v2.task/"$ns"/*/init.pid; do
    [[ -e $f ]] && pid=$(<"$f") && in_our_cgroup "$pid" && kill9 "$pid"
  done
  if [[ -n $containerd_pid ]] && kill -0 "$containerd_pid" 2>/dev/null; then
    for id in $(ctrc containers ls -q 2>/dev/null); do
      ctrc tasks delete --force "$id" >/dev/null 2>&1
      ctrc containers delete "$id" >/dev/null 2>&1
    done
  fi
  for f in "$work"/run/io.containerd.runtime.v2.task/"$ns"/*/shim.pid; do
    [[ -e $f ]] && pid=$(<"$f") && ours "$pid" && kill9 "$pid"
  done
  if [[ -n $containerd_pid ]]; then
    kill "$containerd_pid" 2>/dev/null
    for _ in $(seq 50); do gone "$containerd_pid" && break; sleep 0.1; done
    kill9 "$containerd_pid"
    wait "$containerd_pid" 2>/dev/null
  fi
  # Until they are gone: a dying task or shim still holds its cgroup and this mount namespace.
  for pid in "${killed[@]}"; do
    for _ in $(seq 50); do gone "$pid" && break; sleep 0.1; done
  done
  local cg
  for cg in /sys/fs/cgroup/*/"$ns" /sys/fs/cgroup/"$ns"; do
    [[ -d $cg ]] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -l "${mounts[i]}" 2>/dev/null
  done
  ip link del vf0 2>/dev/null
  ip link del vf0-peer 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ctrc() { ctr --address "$sock" --namespace "$ns" "$@"; }
fatal() {
  echo "FAIL $*"
  failed=$((failed + 1))
  finish_checks
}
# wait_for SECONDS CMD...: polls CMD every 0.1 s.
wait_for() {
  local n=$(($1 * 10))
  shift
  for ((; n > 0; n--)); do
    "$@" && return 0
    sleep 0.1
  done
  "$@"
}

# private_dir PATH: PATH, empty and writable in this mount namespace only. An existing directory
# gets a tmpfs over it; otherwise its nearest existing ancestor gets an overlay whose writes go to
# the test's tmpfs (the ancestor's entries stay visible), and PATH is made there.
mount -t tmpfs tmpfs "$work" && mounts+=("$work")
declare -A overlaid
private_dir() {
  local path=$1 top=$1
  if [[ -d $path ]]; then
    mount -t tmpfs tmpfs "$path" && mounts+=("$path")
    return
  fi
  while [[ ! -d $top ]]; do top=$(dirname "$top"); done
  local key=${top//\//_}
  if [[ -z ${overlaid[$top]:-} ]]; then
    overlaid[$top]=1
    mkdir -p "$work/ovl/$key/up" "$work/ovl/$key/work"
    mount -t overlay overlay -o "lowerdir=$top,upperdir=$work/ovl/$key/up,workdir=$work/ovl/$key/work" "$top" &&
      mounts+=("$top")
  fi
  mkdir -p "$path"
}
for d in /etc/cni/net.d /opt/cni/bin /var/lib/cni /run/containerd /run/netns; do
  private_dir "$d" || fatal "cannot make $d private to this mount namespace"
done
ip link set lo up

# The plugins and the network configuration, where ctr looks for them.
# (Debian's ctr also searches /usr/lib/cni, after /opt/cni/bin.)
{ cp "$ibcni" /opt/cni/bin/ibcni && cp "$ibcni_ipam" /opt/cni/bin/ibcni-ipam; } || fatal "cannot copy the plugins"
cat >/etc/cni/net.d/10-ibcni.conflist <<CONF
{
  "cniVersion": "1.0.0",
  "name": "$network",
  "plugins": [{
    "type": "ibcni",
    "mode": "sriov",
    "device": "vf0",
    "mtu": 2044,
    "stateDir": "$state",
    "logLevel": "debug",
    "logFile": "$log",
    "ipam": {
      "type": "ibcni-ipam",
      "ranges": [[{"subnet": "10.56.217.0/24", "gateway": "10.56.217.1"}]],
      "dataDir": "$ipam"
    }
  }]
}
CONF

# A busybox-static root filesystem: no image, no snapshotter.
mkdir -p "$rootfs/bin" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev" "$rootfs/tmp"
cp "$(readlink -f "$(command -v busybox)")" "$rootfs/bin/busybox"
for applet in sh ip sleep cat echo; do ln -s busybox "$rootfs/bin/$applet"; done

# containerd, private: config, root, state, socket, opt dir; CRI off (it would read the CNI config
# itself and serve on a TCP port).
cat >"$work/containerd.toml" <<TOML
version = 2
root = "$work/root"
state = "$work/run"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp",
                    "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$work/containerd.ttrpc.sock"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$work/opt"
TOML
containerd --config "$work/containerd.toml" >"$work/containerd.log" 2>&1 &
containerd_pid=$!
if ! wait_for 30 ctrc version >/dev/null 2>&1; then
  cat "$work/containerd.log"
  fatal "containerd did not start"
fi
echo "containerd $(containerd --version | awk '{print $3}') started (pid $containerd_pid)"

vf_mac=02:00:00:0c:71:01
# A fresh veth pair for each case: "vf0" with its own MTU, MAC, alias and state.
make_vf() {
  ip link add vf0 type veth peer name vf0-peer &&
    ip link set vf0 mtu 1800 address "$vf_mac" alias "vf0 before ctr" up
}
record_file() { echo "$state/attachments/$network/$ns-$1/eth0.json"; }
alloc_file() { echo "$ipam/$network/attachments/$ns-$1:eth0"; }
task_pid() { ctrc tasks ls 2>/dev/null | awk -v id="$1" '$1 == id {print $2}'; }
task_running() { ctrc tasks ls 2>/dev/null | awk -v id="$1" '$1 == id && $3 == "RUNNING" {f=1} END {exit !f}'; }
no_task() { [[ -z $(ctrc tasks ls -q 2>/dev/null) ]]; }
only_lo() { [[ $(ip -o link show | awk -F': ' '{print $2}') == lo ]]; }
no_process_in_netns() {  # no process of the machine is in the netns with inode $1
  local f
  for f in /proc/[0-9]*/ns/net; do
    [[ $(readlink "$f" 2>/dev/null) == "net:[$1]" ]] && return 1
  done
  return 0
}
pod_has_vf0() {  # the netns of PID $1 has vf0 as eth0: its MAC, ibcni's alias
  nsenter -t "$1" -n ip -j link show dev eth0 |
    jq -e --arg mac "$vf_mac" '.[0].address == $mac and .[0].ifalias == "ibcni:vf0"' >/dev/null
}
no_records() { [[ -z $(find "$state/attachments" -name '*.json*' 2>/dev/null) ]]; }
no_allocations() {
  [[ -z $(find "$ipam/$network/attachments" -type f 2>/dev/null) ]] &&
    [[ -z $(find "$ipam/$network/ips" -type f 2>/dev/null) ]]
}
# DEL invocations for container ID (one ibcni PID each) in ibcni's log.
dels_for() { grep -o "ibcni\[[0-9]*\] DEL containerID=$ns-$1 " "$log" | sort -u | wc -l; }

# run_container ID: `ctr run --cni` in the background; the container prints its eth0, then waits
# for /go-ID to appear in its root filesystem and exits.
run_container() {
  local id=$1
  # ctr itself, not a subshell: $ctr_pid is the process case 3 kills.
  ctr --address "$sock" --namespace "$ns" run --cni --rm --fifo-dir "$work/fifo" \
    --rootfs "$rootfs" "$id" /bin/sh -c \
    "ip -o addr show dev eth0; echo MTU \$(cat /sys/class/net/eth0/mtu); echo READY;
     while [ ! -e /go-$id ]; do sleep 0.1; done" \
    </dev/null >"$work/$id.out" 2>"$work/$id.err" &
  ctr_pid=$!
  ctr_pids+=("$ctr_pid")
  wait_for 30 grep -qs READY "$work/$id.out"
}

# While the container runs: the address, MTU and device ibcni gave it; the record and allocation.
check_attached() {
  local id=$1 pid addr
  pid=$(task_pid "$id")
  check "[$id] the task runs (pid ${pid:-none})" [ -n "$pid" ] || return 1
  netns_inode=$(stat -L -c %i "/proc/$pid/ns/net")
  check "[$id] vf0 left the host" bash -c '! ip link show vf0 >/dev/null 2>&1'
  check "[$id] ibcni wrote its record, for netns /proc/$pid/ns/net" \
    jq -e --arg n "/proc/$pid/ns/net" '.netns == $n' "$(record_file "$id")" >/dev/null
  check "[$id] the record keeps vf0's own name, MTU, MAC, alias and state for DEL" \
    jq -e --arg mac "$vf_mac" '.host | .name == "vf0" and .mtu == 1800 and .mac == $mac and
      .alias == "vf0 before ctr" and .up == true' "$(record_file "$id")" >/dev/null
  check "[$id] ibcni-ipam recorded the allocation" test -f "$(alloc_file "$id")"
  addr=$(grep -o '10\.56\.217\.[0-9]*' "$(alloc_file "$id")" | head -1)
  check "[$id] the container sees its address $addr on eth0" grep -q "inet $addr/24" "$work/$id.out"
  check "[$id] the container sees MTU 2044 on eth0" grep -qx 'MTU 2044' "$work/$id.out"
  check "[$id] eth0 in the task's netns is vf0 (its MAC, ibcni's alias)" pod_has_vf0 "$pid"
}

# After a case: nothing of it left on the node. vf0 is a veth: it was destroyed with the container's
# netns (its peer with it), so it cannot be home again (the kernel lab proves that part).
check_clean() {
  local id=$1
  check "[$id] no task left" wait_for 10 no_task
  check "[$id] the container's netns is gone" wait_for 10 no_process_in_netns "$netns_inode"
  check "[$id] no stray link: the node has only lo (the veth died with the netns)" wait_for 10 only_lo
  check "[$id] no netns under /run/netns" test -z "$(ls -A /run/netns)"
  check "[$id] no ibcni record" no_records
  check "[$id] no IPAM allocation" no_allocations
}

reconcile_ok() { [[ $1 -eq 0 ]] && jq -e '.attachments and .allocations' <<<"$reconciled" >/dev/null; }
# reconcile ID WHAT: `ibcni reconcile --json` over this test's dirs; its JSON in $reconciled.
# An ibcni without the subcommand takes it for a CNI call (CNI_COMMAND missing): a failed check.
reconcile() {
  local id=$1 what=$2 rc
  reconciled=$("$ibcni" reconcile --json --state-dir "$state" --ipam-data-dir "$ipam" 2>"$work/reconcile.err")
  rc=$?
  echo "  ibcni reconcile (exit $rc): $reconciled $(tr '\n' ' ' <"$work/reconcile.err")"
  if grep -q CNI_COMMAND <<<"$reconciled$(cat "$work/reconcile.err")"; then
    check "[$id] $what: this ibcni has no \`reconcile\` subcommand (it answered as to a CNI call)" false
    return 1
  fi
  check "[$id] $what: ibcni reconcile exits 0 with its JSON report" reconcile_ok "$rc"
}

echo "== 1. the container exits: DEL from ctr"
make_vf || fatal "cannot create the veth pair"
check "[c1] ctr run --cni starts the container" run_container c1 || { cat "$work/c1.err"; fatal "ctr run"; }
check_attached c1
touch "$rootfs/go-c1"
wait "$ctr_pid"
rc=$?
check "[c1] ctr run exits 0 when the container does" [ "$rc" -eq 0 ] || cat "$work/c1.err"
check "[c1] ctr sent one DEL" [ "$(dels_for c1)" -eq 1 ]
check_clean c1

echo "== 2. kill -9 of the task: ctr still sees the exit and sends DEL"
make_vf || fatal "cannot create the veth pair"
check "[c2] ctr run --cni starts the container" run_container c2 || { cat "$work/c2.err"; fatal "ctr run"; }
check_attached c2
kill -9 "$(task_pid c2)"
wait "$ctr_pid"
rc=$?
check "[c2] ctr run exits 137 (the task's SIGKILL)" [ "$rc" -eq 137 ] || cat "$work/c2.err"
check "[c2] ctr sent one DEL" [ "$(dels_for c2)" -eq 1 ]
check_clean c2
if reconcile c2 "after DEL"; then
  check "[c2] reconcile had nothing to undo" jq -e '.attachments == [] and .allocations == []' <<<"$reconciled" >/dev/null
  check "[c2] still no record" no_records
  check "[c2] still no allocation" no_allocations
fi

echo "== 3. kill -9 of ctr while the container runs: no DEL; reconcile"
make_vf || fatal "cannot create the veth pair"
check "[c3] ctr run --cni starts the container" run_container c3 || { cat "$work/c3.err"; fatal "ctr run"; }
check_attached c3
pid3=$(task_pid c3)
{ kill -9 "$ctr_pid" && wait "$ctr_pid"; } 2>/dev/null
sleep 0.5
check "[c3] the task outlives ctr" task_running c3
check "[c3] no DEL was sent" [ "$(dels_for c3)" -eq 0 ]
if reconcile c3 "pod alive"; then
  check "[c3] reconcile reports the attachment alive" \
    jq -e '[.attachments[] | select(.containerID == "'"$ns-c3"'") | .action] == ["alive"]' <<<"$reconciled" >/dev/null
fi
check "[c3] the record is still there" test -f "$(record_file c3)"
check "[c3] the allocation is still there" test -f "$(alloc_file c3)"
check "[c3] eth0 is still in the container" pod_has_vf0 "$pid3"

ctrc tasks kill --signal SIGKILL c3 >/dev/null 2>&1
check "[c3] the task dies" wait_for 10 bash -c "! kill -0 $pid3 2>/dev/null"
ctrc tasks delete c3 >/dev/null 2>&1
ctrc containers delete c3 >/dev/null 2>&1
check "[c3] no stray link once the netns is gone (the veth died with it)" wait_for 10 only_lo
check "[c3] ctr task rm and ctr container rm sent no DEL" [ "$(dels_for c3)" -eq 0 ]
check "[c3] the record survives the task (nobody sent DEL)" test -f "$(record_file c3)"
if reconcile c3 "pod gone"; then
  check "[c3] reconcile undid the attachment" \
    jq -e '[.attachments[] | select(.containerID == "'"$ns-c3"'") | .action] == ["undone"]' <<<"$reconciled" >/dev/null
  check_clean c3
fi
if ((failed)); then
  echo "== ibcni's log"; cat "$log"
  echo "== containerd's log (end)"; grep -v 'loading plugin' "$work/containerd.log" | tail -n 40
fi
finish_checks
