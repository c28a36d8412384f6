#pragma once
// manifest.json on disk, sealed: it carries the CRC-32 of the annotation file, of every shard and
// of itself, so that `tarmac verify` finds any changed byte in a dataset (docs/format.md, 5).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "common/crc32.h"  // crc32_hex
#include "format/manifest.h"

namespace tarmac {

/// zlib CRC-32 of a whole file, read with pread in pieces. Throws FatalError naming the file.
uint32_t file_crc32(const std::string& path);

/// The CRC-32 (8 hex digits) of the annotation file of the dataset in `dir`, which another run
/// is about to reuse (a --dedup-against reference, a merge part), verified first as `tarmac
/// verify` checks it: manifest.json is whole (its manifest_crc32 seal) and records that CRC-32
/// as labels_crc32. A dataset without a manifest (made by hand, by a test) has nothing to be
/// checked against: its file's CRC-32 is returned. Throws FatalError "WHAT 'DIR': ..." naming
/// the file, what differs and `tarmac verify DIR`.
std::string verified_labels_crc32(const std::filesystem::path& dir, const std::string& what);

/// Rewrites `dir`'s manifest.json with `edit` applied, sealed again (format::sealed_manifest_text),
/// atomically (the caller holds the directory's lock). Returns false, changing nothing, when
/// there is no manifest. Throws FatalError when it cannot be parsed or written.
bool update_manifest(const std::filesystem::path& dir,
                     const std::function<void(format::Manifest&)>& edit);

}  // namespace tarmac
