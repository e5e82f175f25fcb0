# SPDX-License-Identifier: Apache-2.0
# A compiler cache shared by the build trees that compile the same files with the same compiler:
# the release tree and the image's native build stage (deploy/Dockerfile), the arm64 tree and the
# image's cross build stage. `make test` builds the image (tests/deploy/image_test.sh) from the
# sources it has just compiled, so with the cache the image's stage links what the release and
# arm64 trees compiled instead of compiling it again. Only the product code (lib/, ipam/, plugin/)
# is compiled through it: the top CMakeLists.txt turns it off after them.
#   IBCNI_CCACHE_DIR (default empty: no cache): ccache's directory. Every compile runs as
#     `ccache COMPILER ...` with CCACHE_BASEDIR set to the source root, so that paths under it are
#     hashed relative to the compile's directory: two trees whose build directory sits one level
#     below their source root (build/, build-arm64/, the image's /src/build) share results.
#     CCACHE_COMPILERCHECK=content: a container's compiler of the same Debian package has another
#     mtime than the machine's. The locale is the same everywhere (LANG=C.UTF-8, the LC_ variables
#     ccache hashes unset): ccache counts it in, and a container has none where a shell has one.
set(IBCNI_CCACHE_DIR "" CACHE PATH "ccache's directory (empty: compile without a cache)")

if(IBCNI_CCACHE_DIR)
  find_program(IBCNI_CCACHE ccache REQUIRED)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env --unset=LC_ALL --unset=LC_CTYPE --unset=LC_MESSAGES LANG=C.UTF-8
      CCACHE_DIR=${IBCNI_CCACHE_DIR} CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_COMPILERCHECK=content
      CCACHE_NOHASHDIR=1 ${IBCNI_CCACHE})
endif()
