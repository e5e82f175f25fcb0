#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Regenerates the *.hex fixtures next to this script: what iproute2's `rdma` tool sends over
# NETLINK_RDMA and what the kernel answers, captured with strace inside the kernel-lab VM (the
# development machines' kernel has no RDMA stack). From the repository root:
#
#   ../shared/kernel-lab/run.sh --nics 2 -- tests/unit/rdma/testdata/capture.sh
#
# It needs root, eth0, `rdma` (iproute2) and strace, and a node with no network namespace but the
# initial one (switching the RDMA netns mode needs that). Each command below runs as
#
#   strace -f -e trace=sendto,sendmsg,recvfrom,recvmsg -xx -s 65535 -e write=all -e read=all rdma ...
#
# `-e write=all -e read=all` makes strace print a full hex dump of every datagram next to its
# decoded form; only those dumps are kept. A .hex file holds the datagrams in the order of the
# system calls: a "# send" or "# recv" line, then the datagram's bytes in hex. Other '#' lines
# are comments. The commands, in order (the mode has to be set while no other netns exists):
#
#   sys_show_exclusive.hex  rdma system set netns exclusive; rdma system show
#   link_show.hex           rdma link add rxe0 type rxe netdev eth0; rdma link show
#   port_dump.hex           a PORT_GET dump of rxe0 (NLM_F_DUMP + DEV_INDEX). iproute2 6.1 has
#                           no command that dumps ports (`rdma link show` asks port by port), so
#                           a few lines of perl send it (perl-base is on every Debian system)
#   dev_set_netns.hex       ip netns add rdmacap; rdma dev set rxe0 netns rdmacap   (EOPNOTSUPP)
#   dev_set_name_long.hex   rdma dev set rxe0 name <70 x 'a'> (EINVAL with an extended ACK:
#                           the kernel's policy rejects a DEV_NAME longer than 64 bytes)
#   sys_show_shared.hex     ip netns del rdmacap; rdma link delete rxe0;
#                           rdma system set netns shared (retried until the netns is freed);
#                           rdma system show
set -euo pipefail

out=$(cd "$(dirname "$0")" && pwd)
if [[ ${KERNEL_LAB:-} != 1 ]]; then
  echo "capture.sh: run me inside the kernel-lab VM (see the comment at the top)" >&2
  exit 1
fi

# capture FILE DESCRIPTION RDMA-ARGS...: runs `rdma ARGS` under strace and writes FILE.
capture() {
  local file=$1 what=$2
  shift 2
  local log
  log=$(mktemp)
  local cmd=(rdma "$@") shown="rdma $*"
  if [[ $1 == --perl-port-dump ]]; then
    cmd=(perl -e "$port_dump_pl" "$2")
    shown="perl -e \"\$port_dump_pl\" $2"
  fi
  strace -f -o "$log" -e trace=sendto,sendmsg,recvfrom,recvmsg -xx -s 65535 \
    -e write=all -e read=all "${cmd[@]}" || true  # failures (EOPNOTSUPP, EINVAL) are captured too
  {
    echo "# $what"
    echo "# captured by capture.sh: $shown"
    echo "# iproute2: $(rdma -V), kernel $(uname -r)"
    # A system call line opens a datagram; the " | 00000  xx xx ..." lines are its bytes (the
    # 49 columns after the offset hold up to 16 bytes; the ASCII column is dropped).
    awk '
      /^([0-9]+ +)?(\[pid +[0-9]+\] +)?(sendto|sendmsg)\(/ { print "# send"; next }
      /^([0-9]+ +)?(\[pid +[0-9]+\] +)?(recvfrom|recvmsg)\(/ {
        if ($0 ~ /MSG_PEEK/) { skip = 1 } else { skip = 0; print "# recv" }
        next
      }
      /^ \| [0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]  / { if (!skip) { s = substr($0, 11, 49); gsub(/ +/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s); print s } }
    ' "$log"
  } >"$out/$file"
  rm -f "$log"
  echo "capture.sh: wrote $file"
}

# RDMA_NLDEV_CMD_PORT_GET dump of device index ARGV[0], as ibcni sends it: nlmsghdr (len 24,
# type RDMA_NL_NLDEV << 10 | 5, flags NLM_F_REQUEST|NLM_F_ACK|NLM_F_DUMP) | u32 DEV_INDEX. Reads
# until NLMSG_DONE or NLMSG_ERROR. AF_NETLINK = 16, SOCK_RAW = 3, NETLINK_RDMA = 20.
port_dump_pl='
  socket(my $s, 16, 3, 20) or die "socket: $!";
  my $msg = pack("LSSLL", 24, (5 << 10) | 5, 0x305, time, 0) . pack("SSL", 8, 1, $ARGV[0]);
  send($s, $msg, 0, pack("SSLL", 16, 0, 0, 0)) or die "send: $!";
  for (my $end = 0; !$end;) {
    defined(recv($s, my $buf, 65536, 0)) or die "recv: $!";
    for (my $off = 0; $off + 16 <= length $buf;) {
      my ($len, $type) = unpack("LS", substr($buf, $off, 6));
      $end = 1 if $type == 2 || $type == 3;
      last if $len < 16;
      $off += ($len + 3) & ~3;
    }
  }'

ip link set eth0 up
rdma system set netns exclusive
capture sys_show_exclusive.hex "RDMA_NLDEV_CMD_SYS_GET in exclusive mode (netns mode 0)" system show

rdma link add rxe0 type rxe netdev eth0
capture link_show.hex "device dump, then PORT_GET of each port: rxe0 port 1 on eth0" link show
rxe_index=$(rdma -j dev show rxe0 | sed -n 's/.*"ifindex":\([0-9]*\).*/\1/p')
capture port_dump.hex "PORT_GET dump (NLM_F_DUMP, DEV_INDEX $rxe_index) of rxe0: port 1 on eth0" \
  --perl-port-dump "$rxe_index"

ip netns add rdmacap
capture dev_set_netns.hex "RDMA_NLDEV_CMD_SET with RDMA_NLDEV_NET_NS_FD: rxe cannot move (EOPNOTSUPP)" \
  dev set rxe0 netns rdmacap
capture dev_set_name_long.hex "RDMA_NLDEV_CMD_SET with a too long DEV_NAME: NLMSG_ERROR with extended ACK" \
  dev set rxe0 name "$(printf 'a%.0s' {1..70})"
ip netns del rdmacap
rdma link delete rxe0

# The netns is freed asynchronously; until then the kernel answers EBUSY.
for _ in $(seq 50); do
  rdma system set netns shared 2>/dev/null && break
  sleep 0.2
done
capture sys_show_shared.hex "RDMA_NLDEV_CMD_SYS_GET in shared mode (netns mode 1)" system show
