# SPDX-License-Identifier: Apache-2.0
# ibcni_add_test(NAME SOURCES src... DEPENDS lib... LABELS unit|netns)
# Builds one GoogleTest executable and registers each of its tests with CTest.
include(GoogleTest)

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
  gtest_discover_tests(${name}
    PROPERTIES LABELS "${T_LABELS}"
    DISCOVERY_TIMEOUT 60)
endfunction()
