// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "ibcni/os/text.h"

namespace ibcni::os {
namespace {

TEST(JoinText, SeparatorOnlyBetweenParts) {
  EXPECT_EQ(joinText({}, ", "), "");
  EXPECT_EQ(joinText({"mlx5_0"}, ", "), "mlx5_0");
  EXPECT_EQ(joinText({"mlx5_0", "mlx5_1", "mlx5_2"}, ", "), "mlx5_0, mlx5_1, mlx5_2");
  EXPECT_EQ(joinText({"a", "b"}, ","), "a,b");
  EXPECT_EQ(joinText({"a", "b"}, ""), "ab");
  EXPECT_EQ(joinText({"", "b", ""}, ","), ",b,");
}

TEST(Hex64, SixteenLowerCaseDigitsZeroPadded) {
  EXPECT_EQ(hex64(0), "0000000000000000");
  EXPECT_EQ(hex64(0x0200000000000005ULL), "0200000000000005");
  EXPECT_EQ(hex64(0xFEDCBA9876543210ULL), "fedcba9876543210");
  EXPECT_EQ(hex64(~0ULL), "ffffffffffffffff");
}

}  // namespace
}  // namespace ibcni::os
