// SPDX-License-Identifier: Apache-2.0
// The kernel and library ABI the plugin's bytes depend on, per architecture: ibcni ships for x86_64
// and aarch64 (Grace nodes), built from one source. This runs in the unit tier of both builds (the
// arm64 one under qemu-user) and pins, for each architecture, what is the same and what is not.
//
// The same on both (little endian, LP64, the same alignment): every netlink header and attribute
// payload ibcni writes or reads (RTM_NEWLINK for VF GUIDs, link state and IPoIB children; RDMA
// netlink; the kernel's error answers), the NS_GET_NSTYPE ioctl (asm-generic numbering on both),
// and libibverbs' ibv_port_attr and ibv_gid that the verbs check reads through dlsym. So the
// golden bytes of tests/unit/netlink and tests/unit/rdma hold on both (the arm64 kernel lab also
// compares them with arm64's iproute2: tests/kernel-lab/native_gtests_vm.sh).
//
// Different per architecture, and used by none of ibcni's messages (they go through the C library,
// compiled for each): struct stat (144 bytes on x86_64, 128 on aarch64), struct epoll_event (packed
// to 12 bytes on x86_64 only), the values of O_DIRECTORY, O_NOFOLLOW and O_DIRECT, and the
// signedness of plain char (signed on x86_64, unsigned on aarch64) — which the byte codecs must not
// depend on: the last test feeds them every byte value.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/nsfs.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/epoll.h>
#include <sys/stat.h>

#include <bit>
#include <climits>
#include <cstddef>
#include <string>

#include "ibcni/os/text.h"

namespace {

#if defined(__x86_64__)
constexpr const char* kArch = "x86_64";
#elif defined(__aarch64__)
constexpr const char* kArch = "aarch64";
#else
#error "ibcni is built for x86_64 and aarch64 only"
#endif

TEST(KernelAbi, NetlinkHeadersAndVfPayloadsAreTheSameOnEveryArchitecture) {
  SCOPED_TRACE(kArch);
  EXPECT_EQ(std::endian::native, std::endian::little);
  EXPECT_EQ(sizeof(nlmsghdr), 16u);
  EXPECT_EQ(sizeof(nlattr), 4u);
  EXPECT_EQ(sizeof(ifinfomsg), 16u);
  EXPECT_EQ(sizeof(nlmsgerr), 20u);
  EXPECT_EQ(sizeof(sockaddr_nl), 12u);
  // {__u32 vf; __u64 guid;}: 4 bytes of padding after vf, on both (vf_messages.h zeroes them).
  EXPECT_EQ(sizeof(ifla_vf_guid), 16u);
  EXPECT_EQ(offsetof(ifla_vf_guid, guid), 8u);
  EXPECT_EQ(sizeof(ifla_vf_mac), 36u);
  EXPECT_EQ(sizeof(ifla_vf_link_state), 8u);
  EXPECT_EQ(static_cast<unsigned long>(NS_GET_NSTYPE), 0xb703ul);
  // Not used by ibcni (no ioctl on interfaces), the same anyway.
  EXPECT_EQ(sizeof(ifreq), 40u);
}

TEST(KernelAbi, TheVerbsStructsReadThroughDlsymAreTheSameOnEveryArchitecture) {
  SCOPED_TRACE(kArch);
  EXPECT_EQ(sizeof(ibv_port_attr), 52u);
  EXPECT_EQ(offsetof(ibv_port_attr, gid_tbl_len), 12u);
  EXPECT_EQ(sizeof(ibv_gid), 16u);
}

TEST(KernelAbi, WhatDiffersPerArchitectureIsWhatTheCLibraryCarries) {
#if defined(__x86_64__)
  EXPECT_EQ(sizeof(struct stat), 144u);
  EXPECT_EQ(sizeof(epoll_event), 12u);
  EXPECT_EQ(O_DIRECTORY, 0200000);
  EXPECT_EQ(O_NOFOLLOW, 0400000);
  EXPECT_EQ(O_DIRECT, 040000);
  EXPECT_LT(CHAR_MIN, 0) << "plain char is signed on x86_64";
#elif defined(__aarch64__)
  EXPECT_EQ(sizeof(struct stat), 128u);
  EXPECT_EQ(sizeof(epoll_event), 16u);
  EXPECT_EQ(O_DIRECTORY, 040000);
  EXPECT_EQ(O_NOFOLLOW, 0100000);
  EXPECT_EQ(O_DIRECT, 0200000);
  EXPECT_EQ(CHAR_MIN, 0) << "plain char is unsigned on aarch64";
#endif
}

TEST(KernelAbi, ByteCodecsDoNotDependOnTheSignednessOfChar) {
  std::string every;
  for (int b = 0; b < 256; ++b) {
    every.push_back(static_cast<char>(b));
  }
  const std::string text = ibcni::os::base64Encode(every);
  EXPECT_EQ(text.substr(0, 8), "AAECAwQF");
  EXPECT_EQ(text.substr(text.size() - 8), "/P3+/w==") << "the bytes 0xfc-0xff";
  const auto back = ibcni::os::base64Decode(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, every);
}

}  // namespace
