#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# verbs_bench against a real verbs device: inside the kernel-lab VM, rxe0 (soft-RoCE) on eth0 with
# an address, so that the check opens the device, queries port 1, reads its pkey and GID tables
# (and judges the address's RoCE v2 GID), from a fresh netns (shared RDMA netns mode: rxe0 is
# visible there). `make bench` boots the VM for it; by hand, from the repository root:
#   ../shared/kernel-lab/run.sh --nics 1 -- bench/verbs_bench_vm.sh build/bench/verbs_bench [ARGS...]
# ARGS go to both verbs_bench runs after the defaults below (e.g. --samples 100).
#
# Targets here: the VM is emulated (QEMU TCG, no KVM) and reads its root file system over 9p
# without a cache. Process creation and library loading, which are most of the check, run 20 to
# over 100 times slower there than on the host, depending on its load (ibv_open_device and the
# port, pkey and GID queries take under 1 ms together even in the VM; dlopen and
# ibv_get_device_list, which reads sysfs and loads the provider libraries, take the rest), so an
# absolute figure says more about the emulator than about the check. The absolute 20 ms target is
# the host run's; here the target is relative, against `ibv_devinfo -v -d rxe0` run in the same VM
# and netns: the check must cost less than that one process. A first, report-only pass without a
# device repeats the host run's path, so that the emulator's slowdown on the same code can be
# read off.
set -u
BENCH=$(readlink -f "${1:?usage: $0 <verbs_bench> [verbs_bench args...]}")
shift
if [[ ${KERNEL_LAB:-} != 1 ]]; then
  echo "FAIL: run inside the kernel-lab VM (KERNEL_LAB=1): ../shared/kernel-lab/run.sh --nics 1 -- $0 $BENCH"
  exit 1
fi
IP=10.77.0.1
echo "$(nproc) vCPUs, QEMU TCG (emulated, no KVM), kernel $(uname -r)"

# The host run's path (no RDMA device), for the emulator's slowdown on the same code: report only.
echo "== no RDMA device yet (the host run's path; report only) =="
"$BENCH" --samples 20 --timeout-ms 30000 --target-ms 0 "$@"
rc0=$?
echo

echo "== rxe0 port 1 (target: below one ibv_devinfo -v process) =="
modprobe rdma_rxe 2>/dev/null
ip link set eth0 up
ip addr add "$IP/24" dev eth0
if ! rdma link add rxe0 type rxe netdev eth0; then
  echo "FAIL rxe0 made on eth0"
  exit 1
fi
# The port goes ACTIVE shortly after eth0 is up, and the GID of the address follows.
for _ in $(seq 100); do
  [[ $(rdma -j link show rxe0/1 2>/dev/null | jq -r '.[0].state') == ACTIVE ]] && break
  sleep 0.1
done
state=$(rdma -j link show rxe0/1 2>/dev/null | jq -r '.[0].state')
if [[ $state != ACTIVE ]]; then
  echo "FAIL rxe0/1 is ACTIVE (it is $state)"
  exit 1
fi
echo "rxe0/1 is ACTIVE on eth0 ($IP)"
echo "note: emulated VM: absolute times are the emulator's; the target here is relative (the check costs less" \
  "than one ibv_devinfo -v process in the same VM and netns); the absolute 20 ms target is the host run's"
"$BENCH" --device rxe0 --port 1 --ip "$IP" --timeout-ms 30000 --target-ms 0 --target-ratio 1 "$@"
rc=$?
rdma link delete rxe0
((rc == 0)) && rc=$rc0
exit "$rc"
