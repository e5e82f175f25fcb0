# SPDX-License-Identifier: Apache-2.0
# ibcni_add_test(NAME SOURCES src... DEPENDS lib... LABELS unit|netns)
# Builds one GoogleTest executable and registers each of its tests with CTest.
include(GoogleTest)
# The architecture as Debian and OCI name it, for labels: arm64 for aarch64.
if(CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64")
  set(IBCNI_ARCH_LABEL arm64)
else()
  set(IBCNI_ARCH_LABEL ${CMAKE_SYSTEM_PROCESSOR})
endif()

# Every test program compiles against one precompiled header, built once with ibcni_test_support
# (tests/support): GoogleTest, gmock, nlohmann/json and the standard headers most tests include.
# Parsing them took 2-3 s of every test file's compile time.
function(ibcni_test_pch target)
  target_precompile_headers(${target} REUSE_FROM ibcni_test_support)
endfunction()

function(ibcni_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;DEPENDS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  ibcni_warnings(${name})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/plugin)
  target_link_libraries(${name} PRIVATE ${T_DEPENDS} GTest::gtest GTest::gmock GTest::gtest_main)
  ibcni_test_pch(${name})
  # A cross build (build-arm64) registers only its unit tests, run under qemu-user with a label of
  # their own (unit-arm64); its other tests are built for the arm64 kernel lab, which runs them in
  # the VM (tests/kernel-lab/kernel_lab.sh).
  if(CMAKE_CROSSCOMPILING)
    if(NOT "unit" IN_LIST T_LABELS)
      return()
    endif()
    set(T_LABELS unit-${IBCNI_ARCH_LABEL})
  endif()
  gtest_discover_tests(${name}
    PROPERTIES LABELS "${T_LABELS}"
    DISCOVERY_TIMEOUT 60)
endfunction()
