#pragma once
// manifest.json, sealed: it carries the CRC-32 of the annotation file, of every shard and of
// itself, so that `tarmac verify` finds any changed byte in a dataset (docs/format.md, 5).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include <string>
#include "common/crc32.h"  // crc32_hex

namespace tarmac {

/// zlib CRC-32 of a whole file, read with pread in pieces. Throws FatalError naming the file.
uint32_t file_crc32(const std::string& path);

/// The manifest's text (2-space indented JSON and a newline) with "manifest_crc32" added as
/// its last member: the CRC-32 of the text in which that member's 8 digits read "00000000".
std::string sealed_manifest_text(nlohmann::ordered_json manifest);

/// Rewrites `dir`'s manifest.json with `edit` applied, sealed again, atomically (the caller
/// holds the directory's lock). Returns false, changing nothing, when there is no manifest.
/// Throws FatalError when it cannot be parsed or written.
bool update_manifest(const std::filesystem::path& dir,
                     const std::function<void(nlohmann::ordered_json&)>& edit);

}  // namespace tarmac
