#pragma once
// Reading single samples of a dataset for `tarmac cat` and `tarmac ls`: a blob's bytes
// (CRC-checked) and a sample's description as JSON.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "check/annotation.h"
#include "check/dataset_source.h"

namespace tarmac::check {

/// Index into a.blob_kinds() of "image" / "__image__" or a dense map "depth" / "__depth__";
/// throws FatalError listing the kinds the dataset stores.
size_t blob_kind(const Annotation& a, const std::string& name);

/// The bytes of blob `kind` of sample i, read from its shard in `src` (pread, or a Range GET).
/// Throws FatalError when the shard cannot be read or the bytes do not match their CRC-32.
std::vector<uint8_t> read_blob(const DatasetSource& src, const Annotation& a, size_t kind,
                               uint64_t i);

/// Sample i as JSON: key, index, labels, affine and each blob's place.
nlohmann::ordered_json sample_json(const Annotation& a, uint64_t i);

}  // namespace tarmac::check
