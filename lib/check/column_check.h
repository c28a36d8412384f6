#pragma once
// `tarmac verify` on derived columns (docs/format.md 9): every DIR/columns/NAME.safetensors is
// a valid column file of this dataset (its annotation file's CRC-32 and sample count), holds
// exactly one output per sample whose offsets agree with its shape, and every byte matches the
// CRC-32s recorded at merge. A column with parts and no merged file is a problem too: it is
// not part of the dataset yet (the readers cannot read it; a rank may never have run).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "check/annotation.h"
#include "format/manifest.h"

namespace tarmac::check {

/// The merged columns the manifest records (nullopt: a manifest from before they were).
using RecordedColumns = std::optional<std::map<std::string, format::ManifestColumn>>;

/// Appends what is wrong with the columns of the dataset in `dir`, whose annotation file has
/// CRC-32 `labels_crc32` (8 hex digits) and `num_samples` samples; adds the bytes read.
/// With `recorded`, a recorded column whose file is missing or is another file, and a column
/// file it does not record, are problems too. Returns how many column files it checked.
/// `advanced` (may be empty) is told of the bytes summed as it goes (every 64 MiB).
uint64_t check_columns(const std::filesystem::path& dir, const std::string& labels_crc32,
                       uint64_t num_samples, const RecordedColumns& recorded,
                       std::vector<Problem>& problems, uint64_t& bytes_read,
                       const std::function<void(uint64_t)>& advanced = {});

/// The bytes of the column files check_columns reads (for a progress total).
uint64_t column_files_bytes(const std::filesystem::path& dir);

}  // namespace tarmac::check
