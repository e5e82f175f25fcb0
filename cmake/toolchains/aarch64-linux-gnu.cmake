# SPDX-License-Identifier: Apache-2.0
# Cross-building for linux/arm64 (Grace nodes: GH200, GB200, GB300) on an x86_64 Debian 12 machine with
# Debian's cross compiler (g++-aarch64-linux-gnu) and the arm64 libraries installed through multiarch
# (dpkg --add-architecture arm64; libnl-3-dev:arm64 and the rest, scripts/install-deps.sh --arm64).
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
# Test programs built here run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR), so CTest runs them
# on this machine; the multiarch loader and libraries need no sysroot option.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Multiarch: the arm64 libraries and their pkg-config files live beside the build machine's, under
# lib/aarch64-linux-gnu; headers are shared (/usr/include) and arch-specific ones are found by the
# cross compiler itself (/usr/include/aarch64-linux-gnu).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

find_program(IBCNI_QEMU_AARCH64 qemu-aarch64)
if(IBCNI_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${IBCNI_QEMU_AARCH64})
endif()
