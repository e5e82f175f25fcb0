# SPDX-License-Identifier: Apache-2.0
# ibcni_add_test(NAME SOURCES src... DEPENDS lib... LABELS unit|netns [ARCH] [ARM64_LAB] [CONTROL_PLANE] [WHOLE])
# Builds one GoogleTest executable and registers each of its tests with CTest. A cross build
# (build-arm64) builds only the unit tests marked ARCH, and those marked ARM64_LAB, which the arm64
# kernel lab runs natively in its VM (tests/kernel-lab/kernel_lab.sh, NATIVE).
# ARCH: the test's code can behave differently on another architecture, so the arm64 unit tier
# runs it under qemu-user: it reaches the kernel's ABI (netlink bytes, syscalls, ioctls, struct
# layouts), a C library's ABI through dlopen (libibverbs, libcurl), shared memory and atomics, or
# parses untrusted bytes (char is unsigned on aarch64). Tests of logic over fakes, strings and
# values (the modes, the commands, doctor's report, the IPAM's policy) compile from the same source
# by the same compiler and run on x86_64 only.
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
  cmake_parse_arguments(T "ARCH;ARM64_LAB;CONTROL_PLANE;WHOLE" "TIMEOUT;COST" "SOURCES;DEPENDS;LABELS" ${ARGN})
  set(arm64_unit OFF)
  if("unit" IN_LIST T_LABELS AND T_ARCH)
    set(arm64_unit ON)
  endif()
  if(CMAKE_CROSSCOMPILING AND NOT arm64_unit AND NOT T_ARM64_LAB)
    add_executable(${name} EXCLUDE_FROM_ALL ${T_SOURCES})
  else()
    add_executable(${name} ${T_SOURCES})
  endif()
  ibcni_warnings(${name})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${T_DEPENDS} GTest::gtest GTest::gmock GTest::gtest_main)
  ibcni_test_pch(${name})
  # A cross build (build-arm64) builds only its ARCH unit tests and those of ARM64_LAB, and registers
  # the ARCH unit tests, run under qemu-user with a label of their own (unit-arm64), one CTest test per
  # program: starting an emulated program costs about half a second, as much as most of its tests
  # take, and discovering the tests would start each program once more at build time.
  if(CMAKE_CROSSCOMPILING)
    if(arm64_unit)
      add_test(NAME ${name} COMMAND ${name})
      set_tests_properties(${name} PROPERTIES LABELS unit-${IBCNI_ARCH_LABEL} TIMEOUT 600)
    endif()
    return()
  endif()
  set(timeout)
  if(T_TIMEOUT)
    set(timeout TIMEOUT ${T_TIMEOUT})
  endif()
  # WHOLE: one CTest test for the whole program, when its tests share a set-up that costs more than
  # they do (a control plane with a scheduler of their own), which discovered tests would each pay.
  if(T_WHOLE)
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" ${timeout})
    if(T_COST)
      set_tests_properties(${name} PROPERTIES COST ${T_COST})
    endif()
    return()
  endif()
  # The labels are set by a CTest include file read after the discovered tests: gtest_discover_tests
  # splits a list-valued property, so "etcd;timing" cannot pass through PROPERTIES.
  gtest_discover_tests(${name} TEST_LIST ${name}_tests
    PROPERTIES ${timeout}
    DISCOVERY_TIMEOUT 60)
  # COST: where `ctest -j` starts the test when it has no timings of its own yet (a fresh clone), the
  # highest first; a long test started last makes the tier wait for it on one core.
  set(extra)
  if(T_COST)
    set(extra "COST ${T_COST}")
  endif()
  if(T_CONTROL_PLANE)
    # The real API server of tests/support/control_plane.h: the fixture's one (tests/support), held
    # by one test at a time (Nodes are cluster-wide): the tests that share it run one after another,
    # so they start early (COST 40, unless given) rather than last, in a row on one core.
    target_link_libraries(${name} PRIVATE ibcni_control_plane)
    if(NOT T_COST)
      set(extra "COST 40")
    endif()
    set(extra "${extra} FIXTURES_REQUIRED control_plane RESOURCE_LOCK control_plane ENVIRONMENT IBCNI_CONTROL_PLANE=${CMAKE_BINARY_DIR}/control-plane")
  endif()
  ibcni_label_discovered(${name} "${T_LABELS}" "${extra}")
endfunction()

# ibcni_label_discovered(NAME "label;label..." [EXTRA]): the labels of NAME's discovered tests
# (TEST_LIST NAME_tests), and the properties EXTRA ("NAME VALUE ..."), set once CTest has read them.
function(ibcni_label_discovered name labels)
  set(extra "${ARGV2}")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake
    "if(${name}_tests)\n"
    "  set_tests_properties(\${${name}_tests} PROPERTIES LABELS \"${labels}\" ${extra})\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
endfunction()
