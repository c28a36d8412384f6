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

/// Rewrites `dir`'s manifest.json with `edit` applied, sealed again (format::sealed_manifest_text),
/// atomically (the caller holds the directory's lock). Returns false, changing nothing, when
/// there is no manifest. Throws FatalError when it cannot be parsed or written.
bool update_manifest(const std::filesystem::path& dir,
                     const std::function<void(format::Manifest&)>& edit);

}  // namespace tarmac
