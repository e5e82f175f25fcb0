# SPDX-License-Identifier: Apache-2.0
# Unity builds. A release build compiles a few groups of files as one unit each (ibcni_unity_groups:
# files split for readers, one unit for GCC's inlining limits, see plugin/netlink). IBCNI_QUICK_BUILD
# (`make demo`'s build tree) compiles each library and plugin as one unit, unoptimized: the same code,
# built in about a third of the release build's time, for a quick look. Every source file must
# therefore compile in one unit with the other files of its target: file-local names (anonymous
# namespaces, using-declarations) must not clash across the files of a target.
option(IBCNI_QUICK_BUILD "Build each library as one unit, at -O0 (make demo)" OFF)

if(IBCNI_QUICK_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 0)
  # After the build type's -O3, so it wins.
  add_compile_options(-O0)
endif()

# Compiles the files of `target` that carry a UNITY_GROUP property as one unit per group (release
# builds); a quick build already compiles the whole target as one unit.
function(ibcni_unity_groups target)
  if(NOT IBCNI_QUICK_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
  endif()
endfunction()
