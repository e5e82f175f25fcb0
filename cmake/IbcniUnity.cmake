# SPDX-License-Identifier: Apache-2.0
# Unity builds, for `make demo` only: a release build compiles every source file as its own unit.
# IBCNI_QUICK_BUILD (`make demo`'s build tree) compiles each library and plugin as one unit,
# unoptimized: the same code, built in about a third of the release build's time, for a quick look.
# Its one rule for the sources: file-local names (anonymous namespaces, using-declarations) must not
# clash across the files of a target, which the demo's build checks.
option(IBCNI_QUICK_BUILD "Build each library as one unit, at -O0 (make demo)" OFF)

if(IBCNI_QUICK_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 0)
  # After the build type's -O2, so it wins.
  add_compile_options(-O0)
endif()
