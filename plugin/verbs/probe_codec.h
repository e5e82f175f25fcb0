// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ibcni/os/sys_error.h"
#include "ibcni/verbs/verbs_probe.h"

namespace ibcni::verbs {

/// What the probe's child process sends back through its pipe: the facts, or the error of a step
/// it took before libibverbs (joining the namespace).
using ProbeAnswer = os::SysResult<ProbeResult>;

/// Serializes an answer into one self-delimiting frame:
///
///     "IBVP" | version u8 (1) | kind u8 ('R' result, 'E' error) | body length u32 | body
///
/// Integers are little-endian; a string is its length (u32) followed by its bytes; a list is its
/// element count (u32) followed by the elements; booleans and optionals are one byte.
/// The format is private to one plugin binary talking to its own child: no compatibility
/// between versions is promised (the version byte only turns a mismatch into a decode error).
[[nodiscard]] std::string encodeProbeAnswer(const ProbeAnswer& answer);

/// Parses a frame made by encodeProbeAnswer.
/// @return nullopt for anything else: a truncated or overlong frame, a wrong magic, version or
///         kind, a length that does not match, an out-of-range enum or boolean, trailing bytes.
[[nodiscard]] std::optional<ProbeAnswer> decodeProbeAnswer(std::string_view bytes);

/// The largest frame decodeProbeAnswer accepts (and the most the parent reads from the child).
inline constexpr std::size_t kMaxProbeFrame = 1U << 20;

}  // namespace ibcni::verbs
