// SPDX-License-Identifier: Apache-2.0
// The byte format of the embedded IPAM's store files, apart from where they live: the frame every
// file carries (kind, format, length, CRC-32), the attachment record inside it, and a record's
// file name. No I/O: FileStore reads and writes the files, free_index.h encodes the index body.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>

#include "ipam/policy/allocation.h"
#include "ipam/policy/allocation_space.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::ipam::codec {

/// The format number every frame carries; a file of another format is corrupt.
inline constexpr int kFormat = 1;

/// CRC-32 of `data` (IEEE 802.3: zlib's crc32()).
[[nodiscard]] std::uint32_t crc32(const std::string& data);

/// `body` framed as "ibcni-ipam <kind> <format> <body length> <crc32 hex>\n" + body. A frame
/// makes truncation, extension and bit rot of the file detectable by unframe().
[[nodiscard]] std::string frame(const char* kind, const std::string& body);

/// The body of the framed file `text`, which must hold a `kind` of format kFormat whose length and
/// CRC-32 match. Never repairs: anything else is corruptFile(path, why, fix).
[[nodiscard]] os::SysResult<std::string> unframe(const std::string& text, const char* kind, const std::string& path,
                                                 const std::string& fix);

/// The error for a corrupt store file: EUCLEAN, naming `path`, what is wrong and `fix` (what the
/// operator does about it).
[[nodiscard]] std::unexpected<os::SysError> corruptFile(const std::string& path, const std::string& why,
                                                        const std::string& fix);

/// The framed record of `a` (kind "attachment", a JSON object on one line).
/// decodeRecord(encodeRecord(a), a.key, path) == a.
[[nodiscard]] std::string encodeRecord(const Allocation& a);

/// The allocation in the record `text`, which must be framed, have every field with its type,
/// valid values of `space` (addresses, or GUIDs), and describe `key`; anything else is a
/// corruptFile() error naming `path`.
[[nodiscard]] os::SysResult<Allocation> decodeRecord(const std::string& text, const AttachmentKey& key,
                                                     const std::string& path, const IdentSpace& space = ipSpace());

/// Whether `key` may name a record: a valid container ID and interface name, so that the record's
/// name is one path component and splits back into the same key.
[[nodiscard]] bool isValidKey(const AttachmentKey& key);

/// The file name of `key`'s record: "<containerID>:<ifname>". Claims point at it.
[[nodiscard]] std::string recordName(const AttachmentKey& key);

/// The key a record name stands for (split at its first ':'); nullopt when there is no ':' or the
/// key is not isValidKey().
[[nodiscard]] std::optional<AttachmentKey> keyFromRecordName(const std::string& name);

}  // namespace ibcni::ipam::codec
