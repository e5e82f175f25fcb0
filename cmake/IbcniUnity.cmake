# SPDX-License-Identifier: Apache-2.0
# Unity builds of the product code (lib/, ipam/, plugin/ and what is compiled as they are): each
# library and program is compiled in units of several of its source files. The header work
# (nlohmann/json, spdlog, fmt) is done once per unit instead of once per file: about half the CPU
# time of building ibcni, ibcni-ipam and ibcni-agent at -O2 (190 s against 383 s on 2 cores), in
# every tree that builds them: release, sanitized, arm64, and both platforms' image builds
# (deploy/Dockerfile); the code the tests run is the code the image ships.
#   IBCNI_UNITY_BUILD (default ON): units of CMAKE_UNITY_BUILD_BATCH_SIZE files (8: enough units for
#     two cores to share the largest library), and the tests and benchmarks in units of 4 files
#     (ibcni_unity_tests); OFF compiles each file on its own (an edit of one file then recompiles
#     only that file).
#   IBCNI_QUICK_BUILD (`make demo`'s build tree): each library and program as one unit, unoptimized,
#     for a quick look.
# The one rule for the sources: file-local names (anonymous namespaces, using-declarations) must not
# clash across the files of a target; the demo's build (one unit per target) checks it for the
# product code. In the tests a clash shows as a compile error of the unit the two files share
# (a redefinition, or an ambiguous call where two files' helpers differ only in their parameters):
# a helper that several test files need belongs in their fixture's header.
option(IBCNI_UNITY_BUILD "Compile the product code in units of several files" ON)
option(IBCNI_QUICK_BUILD "Build each library as one unit, at -O0 (make demo)" OFF)

if(IBCNI_QUICK_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 0)
  # After the build type's -O2, so it wins.
  add_compile_options(-O0)
elseif(IBCNI_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 8)
endif()

# ibcni_quick_pch(): in the quick build, every library and program of lib/, ipam/ and plugin/
# compiles against one precompiled header (nlohmann/json, fmt and the standard headers most files
# include), built once. With clang (make demo's compiler), 40.6 CPU-s against 59.3 without it (GCC:
# 84.9, where code generation dominates and the header saves nothing). The release, sanitized and
# arm64 trees (and the image) compile without it, so a missing include still fails there (and
# header_check compiles each header alone).
function(ibcni_quick_pch)
  if(NOT IBCNI_QUICK_BUILD)
    return()
  endif()
  add_library(ibcni_quick_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/quick_pch.cpp)
  ibcni_warnings(ibcni_quick_pch)
  target_link_libraries(ibcni_quick_pch PRIVATE nlohmann_json::nlohmann_json)
  target_precompile_headers(ibcni_quick_pch PRIVATE
    <algorithm> <chrono> <cstdint> <expected> <filesystem> <functional> <map> <memory> <optional> <set>
    <string> <string_view> <utility> <variant> <vector> <fmt/core.h> <nlohmann/json.hpp>)
  foreach(dir lib ipam plugin)
    ibcni_targets_below(targets ${PROJECT_SOURCE_DIR}/${dir})
    foreach(t ${targets})
      get_target_property(type ${t} TYPE)
      if(type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
        target_precompile_headers(${t} REUSE_FROM ibcni_quick_pch)
      endif()
    endforeach()
  endforeach()
endfunction()

# ibcni_unity_tests(): the tests and benchmarks (defined after this call) in units of 4 files. A
# test file's own compile is mostly what every file of its program instantiates again (GoogleTest,
# nlohmann/json, fmt; their headers are already precompiled, cmake/IbcniTest.cmake): clang's
# sanitized tree compiled its 133 test files in 867 CPU-s one by one and in 436 in units of 4.
# Units of 4 keep two cores busy on the largest program (plugin_test) and an edit recompiling
# three files more than itself.
macro(ibcni_unity_tests)
  if(IBCNI_UNITY_BUILD AND NOT IBCNI_QUICK_BUILD)
    set(CMAKE_UNITY_BUILD ON)
    set(CMAKE_UNITY_BUILD_BATCH_SIZE 4)
  else()
    set(CMAKE_UNITY_BUILD OFF)
  endif()
endmacro()
