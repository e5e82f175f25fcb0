// SPDX-License-Identifier: Apache-2.0
// The translation unit that builds the quick build's precompiled header (cmake/IbcniUnity.cmake,
// ibcni_quick_pch); it holds nothing of its own.
