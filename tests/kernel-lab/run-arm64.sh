#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The arm64 kernel lab: run one command as root inside a throwaway linux/arm64 VM, as the kernel
# lab's run.sh does for x86_64. qemu-system-aarch64 (TCG: the instructions are emulated) boots
# Debian 12's arm64 kernel (linux-image-arm64, the one Grace nodes run on Debian) over an arm64
# Debian root filesystem: the arm64 binaries built here (build-arm64/) run natively inside, with
# libibverbs:arm64 and rxe's provider, iproute2's ip and rdma, kmod, jq and bash of arm64.
#
#   run-arm64.sh [--nics N] [--mem MiB] [--timeout S] [--modules "m1 m2"] -- CMD [ARG...]
#
# The current directory is shared read-write at the same path (a build tree made outside is used
# inside); the root file system is the cached arm64 one, read-only under a tmpfs overlay. --nics N
# adds N virtio-net PCI NICs (eth0..) on one emulated Ethernet segment (rxe traffic flows between
# them). The exit status is CMD's; 124 when the VM ran past --timeout, 125 when it stopped first.
#
# The root file system is made once by mmdebstrap (--variant=extract: the packages' files, no
# maintainer script, so nothing arm64 runs on this machine) from Debian's archive, with the kernel
# and its modules (depmod run here), and cached with the VM's initrd in
# ${KERNEL_LAB_ARM64_CACHE:-/var/cache/ibcni-kernel-lab-arm64} (remade when this script is newer).
# Needs qemu-system-arm, mmdebstrap, cpio and kmod (scripts/install-deps.sh).
set -euo pipefail

nics=0 mem=2048 timeout_s=600
modules="virtio_net rdma_rxe ib_uverbs rdma_ucm ib_umad ib_ipoib veth macvlan bridge"
while (($#)); do
  case "$1" in
    --nics) nics=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --modules) modules="$modules $2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "kernel-lab-arm64: unknown option $1 (use -- before the command)" >&2; exit 2 ;;
  esac
done
(($#)) || { echo "kernel-lab-arm64: no command given" >&2; exit 2; }
for tool in qemu-system-aarch64 mmdebstrap cpio depmod; do
  command -v "$tool" >/dev/null ||
    { echo "kernel-lab-arm64: $tool is missing: run scripts/install-deps.sh" >&2; exit 2; }
done

# What the VM's root file system holds (arm64 packages of Debian 12).
packages=bash,dash,coreutils,util-linux,mount,procps,findutils,grep,sed,gawk,jq,kmod,iproute2,ethtool,iputils-ping
packages+=,busybox-static,libc-bin,libstdc++6,libmnl0,libnl-3-200,libnl-route-3-200,libyaml-0-2,libcurl4,strace,libibverbs1,ibverbs-providers,rdma-core,ibverbs-utils
packages+=,containernetworking-plugins,linux-image-arm64

cache=${KERNEL_LAB_ARM64_CACHE:-/var/cache/ibcni-kernel-lab-arm64}
rootfs=$cache/rootfs
initrd=$cache/initrd.gz
self=$(readlink -f "${BASH_SOURCE[0]}")
if [[ ! -s $initrd || $initrd -ot $self ]]; then
  echo "kernel-lab-arm64: making the arm64 root file system in $rootfs (once)" >&2
  rm -rf "$rootfs" "$initrd"
  mkdir -p "$cache"
  mmdebstrap --quiet --variant=extract --arch=arm64 --include="$packages" bookworm "$rootfs.tmp" >&2
  # What maintainer scripts would have made: the awk alternative, /var/run as /run.
  [[ -e $rootfs.tmp/usr/bin/awk ]] || ln -s gawk "$rootfs.tmp/usr/bin/awk"
  if [[ ! -L $rootfs.tmp/var/run ]]; then
    rm -rf "$rootfs.tmp/var/run"
    ln -s /run "$rootfs.tmp/var/run"
  fi
  mv "$rootfs.tmp" "$rootfs"
  kver=$(ls "$rootfs/lib/modules")
  depmod -b "$rootfs" "$kver"
  # The initrd: arm64 busybox, the modules that reach the root file system, and an init that mounts
  # it (9p, read-only) under a tmpfs overlay and chroots into it.
  stage=$(mktemp -d)
  mkdir -p "$stage"/{bin,proc,sys,dev,host,ov}
  cp "$rootfs/bin/busybox" "$stage/bin/busybox"
  for a in sh mount insmod mkdir chroot sleep poweroff cat; do ln -s busybox "$stage/bin/$a"; done
  : >"$stage/modules"
  for m in virtio_pci 9pnet_virtio 9p overlay; do
    modprobe -d "$rootfs" -S "$kver" --show-depends "$m" | awk '$1=="insmod"{print $2}' |
      while read -r f; do
        rel=/$(realpath -m --relative-to="$rootfs" "$f")
        grep -qxF "$rel" "$stage/modules" && continue
        mkdir -p "$stage$(dirname "$rel")"; cp "$f" "$stage$rel"; echo "$rel" >>"$stage/modules"
      done
  done
  cat >"$stage/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
while read -r m; do insmod "$m"; done </modules
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 labroot /host 2>/dev/null && break; sleep 0.25
done
mount -t tmpfs tmpfs /ov; mkdir -p /ov/u /ov/w /ov/m
mount -t overlay overlay -o lowerdir=/host,upperdir=/ov/u,workdir=/ov/w /ov/m
for d in proc sys dev; do mount --move /$d /ov/m/$d; done
mount -t tmpfs tmpfs /ov/m/run
mkdir -p /ov/m/run/kl-ctl
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 klctl /ov/m/run/kl-ctl
exec chroot /ov/m /bin/sh /run/kl-ctl/stage2
INIT
  chmod +x "$stage/init"
  (cd "$stage" && find . | cpio -o -H newc 2>/dev/null | gzip -1 >"$initrd.tmp") && mv "$initrd.tmp" "$initrd"
  rm -rf "$stage"
fi
kver=$(ls "$rootfs/lib/modules")
kimg=$rootfs/boot/vmlinuz-$kver

work=$(pwd -P)
ctl=$(mktemp -d /tmp/kernel-lab-arm64.XXXXXX)
trap 'rm -rf "$ctl"' EXIT
printf '%q ' "$@" >"$ctl/cmd"
# Stage 2 runs inside the chroot: share the work dir, load modules, run CMD, report.
cat >"$ctl/stage2" <<STAGE2
#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 KERNEL_LAB=1 KERNEL_LAB_ARCH=arm64
mkdir -p "$work" /root
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none klwork "$work"
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts 2>/dev/null
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
for m in $modules; do modprobe -q \$m || echo "kernel-lab-arm64: module \$m not loaded" >&2; done
ip link set lo up
ulimit -l unlimited
cd "$work"
sh -c "\$(cat /run/kl-ctl/cmd)" </dev/null
echo \$? >/run/kl-ctl/rc
sync
echo 0 >/proc/sys/kernel/printk
/bin/busybox poweroff -f 2>/dev/null || echo o >/proc/sysrq-trigger
sleep 30 2>/dev/null
STAGE2
chmod +x "$ctl/stage2"

netargs=()
for ((i = 0; i < nics; i++)); do
  netargs+=(-netdev "hubport,id=n$i,hubid=0" -device "virtio-net-pci,netdev=n$i,mac=52:54:00:12:35:$(printf %02x $((i + 16)))")
done
((nics)) || netargs=(-nic none)

# -cpu max: every architecture feature QEMU emulates (Grace is Armv9); pointer authentication with
# QEMU's own cheap algorithm instead of QARMA (the same instructions, a fraction of the TCG time).
set +e
timeout --foreground -k 5 "$timeout_s" qemu-system-aarch64 \
  -machine virt -accel tcg,thread=multi -cpu max,pauth-impdef=on -smp 2 -m "$mem" \
  -display none -serial stdio -monitor none -no-reboot \
  -kernel "$kimg" -initrd "$initrd" \
  -append "console=ttyAMA0 quiet loglevel=3 panic=-1 init=/init" \
  -fsdev local,id=fs0,path="$rootfs",security_model=none,readonly=on,multidevs=remap -device virtio-9p-pci,fsdev=fs0,mount_tag=labroot \
  -fsdev local,id=fs1,path="$ctl",security_model=none -device virtio-9p-pci,fsdev=fs1,mount_tag=klctl \
  -fsdev local,id=fs2,path="$work",security_model=none -device virtio-9p-pci,fsdev=fs2,mount_tag=klwork \
  "${netargs[@]}" </dev/null 2> >(grep -v -e 'is not connected to host network' -e 'Multiple devices detected' >&2) | tr -d '\r'
qrc=${PIPESTATUS[0]}
set -e
if [[ -s $ctl/rc ]]; then exit "$(cat "$ctl/rc")"; fi
((qrc == 124)) && { echo "kernel-lab-arm64: VM ran past ${timeout_s}s" >&2; exit 124; }
echo "kernel-lab-arm64: the VM stopped before the command finished (qemu exit $qrc)" >&2
exit 125
