# SPDX-License-Identifier: Apache-2.0
# IBCNI_SANITIZE (OFF by default; `make build-sanitize`, run by `make test`): everything (libraries,
# plugins, tests, benchmarks) built with AddressSanitizer and UndefinedBehaviorSanitizer, any report
# fatal. GCC or clang. With clang (the Makefile's choice: clang++-16 compiles this tree about four
# times faster than GCC 12), the same tree also builds the libFuzzer targets of tests/fuzz, the
# libraries they call instrumented for coverage, and the fuzz_smoke test that runs them.
option(IBCNI_SANITIZE "Build everything with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)

# -O0 (after the build type's -O2, so it wins): with clang, instrumented code at -O1 took four
# times as long to compile (46.7 against 12.7 s for the largest test file) and the tree's tests ran
# only 10% faster; the libraries the fuzz targets call get -O1 back (tests/fuzz). -g1: line
# tables, so that reports name file and line, at little cost in build time.
set(IBCNI_SANITIZER_FLAGS -O0 -fsanitize=address,undefined -fno-sanitize-recover=all
    -fno-omit-frame-pointer -g1)

if(IBCNI_SANITIZE)
  add_compile_options(${IBCNI_SANITIZER_FLAGS})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC's flow analysis reports uninitialized reads inside ASan-instrumented libstdc++ code
    # (std::regex's std::function at -O1) that the uninstrumented build does not have.
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  add_link_options(-fsanitize=address,undefined -fno-sanitize-recover=all)
  # clang links through lld when it is installed (lld-16, scripts/install-deps.sh): ld.bfd took 11 s
  # for plugin_test, lld 1.3 s; the tree links about seventy test programs.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    include(CheckLinkerFlag)
    check_linker_flag(CXX -fuse-ld=lld IBCNI_LINKER_LLD)
    if(IBCNI_LINKER_LLD)
      add_link_options(-fuse-ld=lld)
    endif()
  endif()
  # Tests run the built plugins with a fresh environment (as a runtime does), so ASAN_OPTIONS
  # set around ctest would not reach them: every executable carries its defaults
  # (sanitizer_defaults.cpp). A variable in the environment still overrides them. The runtimes
  # look for "llvm-symbolizer" in PATH, which Debian's clang-16 installs as llvm-symbolizer-16:
  # its path goes into the defaults, so that a report names functions, files and lines.
  string(REGEX MATCH "^[0-9]+" ibcni_cxx_major "${CMAKE_CXX_COMPILER_VERSION}")
  find_program(IBCNI_LLVM_SYMBOLIZER NAMES llvm-symbolizer-${ibcni_cxx_major} llvm-symbolizer
               llvm-symbolizer-16)
  set(IBCNI_SANITIZER_SYMBOLIZER_OPTION "")
  if(IBCNI_LLVM_SYMBOLIZER)
    set(IBCNI_SANITIZER_SYMBOLIZER_OPTION ":external_symbolizer_path=${IBCNI_LLVM_SYMBOLIZER}")
  endif()
  configure_file(${CMAKE_CURRENT_LIST_DIR}/sanitizer_defaults.cpp.in
                 ${PROJECT_BINARY_DIR}/sanitizer_defaults.cpp @ONLY)
  # Compiled once, its object added to every target as an object of its own: never merged into a
  # unity unit (cmake/IbcniUnity.cmake), where it would come with a library's code and clash with
  # the executable's copy.
  add_library(ibcni_sanitizer_defaults OBJECT ${PROJECT_BINARY_DIR}/sanitizer_defaults.cpp)
  link_libraries(ibcni_sanitizer_defaults)
endif()

if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  # GCC-only warnings named in IbcniWarnings.cmake
  add_compile_options(-Wno-unknown-warning-option)
  # libstdc++ 12 offers std::expected only when __cpp_concepts >= 202002L, which clang announces
  # from version 19 on although clang 16 implements what <expected> needs (P0848R3).
  if(CMAKE_CXX_COMPILER_VERSION VERSION_LESS 19)
    add_compile_options(-Wno-macro-redefined -D__cpp_concepts=202002L)
  endif()
endif()
