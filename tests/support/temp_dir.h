// SPDX-License-Identifier: Apache-2.0
// A test's own temporary directory: TempDir makes one and removes it with everything in it;
// TempDirTest gives every test of a fixture a fresh one.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <system_error>

namespace ibcni::testing {

/// A fresh directory <base>/<prefix>-XXXXXX under the first of `bases` where one can be made,
/// removed with everything in it by the destructor. path() is "" when none could be made.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix, std::initializer_list<const char*> bases = {"/tmp"}) {
    for (const char* base : bases) {
      std::string tmpl = std::string(base) + "/" + prefix + "-XXXXXX";
      if (::mkdtemp(tmpl.data()) != nullptr) {
        path_ = tmpl;
        return;
      }
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A fixture whose every test gets a fresh directory, dir_ (/tmp/<prefix>-XXXXXX), removed with
/// everything in it after the test. A test whose directory could not be made fails in SetUp.
class TempDirTest : public ::testing::Test {
 protected:
  explicit TempDirTest(const std::string& prefix) : tmp_(prefix), dir_(tmp_.path()) {}
  void SetUp() override { ASSERT_FALSE(dir_.empty()) << "cannot create a temporary directory"; }

 private:
  TempDir tmp_;

 protected:
  std::string dir_;
};

}  // namespace ibcni::testing
