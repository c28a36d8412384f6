#include "check/inspect.h"

#include "common/crc32.h"
#include "common/error.h"

namespace tarmac::check {

size_t blob_kind(const Annotation& a, const std::string& name) {
  const std::string want = name.starts_with("__") ? name : "__" + name + "__";
  std::string have;
  for (size_t k = 0; k < a.blob_kinds().size(); ++k) {
    if (a.blob_kinds()[k] == want) return k;
    have += (k ? ", " : "") + a.blob_kinds()[k].substr(2, a.blob_kinds()[k].size() - 4);
  }
  throw FatalError("the dataset stores no '" + name +
                   "' blobs (it stores: " + (have.empty() ? "none" : have) + ")");
}

std::vector<uint8_t> read_blob(const DatasetSource& src, const Annotation& a, size_t kind,
                               uint64_t i) {
  const BlobRef b = a.blob(kind, i);
  if (b.shard < 0 || static_cast<size_t>(b.shard) >= a.shards().size() || b.offset < 0 ||
      b.size < 0)
    throw FatalError("sample '" + a.key(i) +
                     "': the annotation file places its blob nowhere valid");
  const std::string& shard = a.shards()[static_cast<size_t>(b.shard)];
  std::vector<uint8_t> out =
      src.read_range(shard, static_cast<uint64_t>(b.offset), static_cast<uint64_t>(b.size));
  if (crc32_of(out) != b.crc32)
    throw FatalError("sample '" + a.key(i) + "': the bytes in '" + src.location(shard) +
                     "' do not match their CRC-32 (corrupt; run tarmac verify)");
  return out;
}

nlohmann::ordered_json sample_json(const Annotation& a, uint64_t i) {
  nlohmann::ordered_json j;
  j["key"] = a.key(i);
  j["index"] = i;
  j["labels"] = a.labels_json(i);
  if (const auto m = a.affine(i))
    j["affine"] = {{(*m)[0], (*m)[1], (*m)[2]}, {(*m)[3], (*m)[4], (*m)[5]}};
  for (size_t k = 0; k < a.blob_kinds().size(); ++k) {
    const BlobRef b = a.blob(k, i);
    const bool valid = b.shard >= 0 && static_cast<size_t>(b.shard) < a.shards().size();
    j[a.blob_kinds()[k]] = {
        {"shard", valid ? a.shards()[static_cast<size_t>(b.shard)] : std::string("?")},
        {"offset", b.offset},
        {"size", b.size},
        {"width", b.width},
        {"height", b.height}};
  }
  return j;
}

}  // namespace tarmac::check
