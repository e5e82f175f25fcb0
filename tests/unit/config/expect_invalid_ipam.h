// SPDX-License-Identifier: Apache-2.0
// The IPAM config tests' check of a refused `ipam` object: error 7, naming every one of `parts`.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ibcni/config/ipam_conf.h"

namespace ibcni::config::testing {

inline void expectInvalidIpam(const std::string& text, const std::vector<std::string>& parts) {
  auto c = parseIpamConfig(text);
  ASSERT_FALSE(c.has_value()) << "accepted: " << text;
  EXPECT_EQ(c.error().code, cni::Errc::kInvalidConfig) << c.error().msg;
  for (const auto& p : parts) {
    EXPECT_THAT(c.error().msg, ::testing::HasSubstr(p)) << "for " << text;
  }
}

}  // namespace ibcni::config::testing
