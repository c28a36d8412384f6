#include "format/column_file.h"

#include <cstdio>

#include "common/error.h"
#include "format/names.h"

namespace tarmac::format {
namespace {

constexpr const char* kMergedSuffix = ".safetensors";
constexpr const char* kPartsSuffix = ".parts";
constexpr const char* kPartialSuffix = ".partial";

}  // namespace

bool is_valid_column_name(std::string_view name) {
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  // every character is checked, to the last: no pattern that stops early or before a newline
  if (name.empty() || name.size() > 128 || !alnum(name[0])) return false;
  for (const char c : name)
    if (!alnum(c) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

std::string column_file(std::string_view name) {
  return std::string(kColumnsDir) + "/" + std::string(name) + kMergedSuffix;
}

std::string column_parts_dir(std::string_view name) {
  return std::string(kColumnsDir) + "/" + std::string(name) + kPartsSuffix;
}

std::string column_partial_file(std::string_view name) {
  return std::string(kColumnsDir) + "/." + std::string(name) + kMergedSuffix + kPartialSuffix;
}

ColumnEntry column_entry(std::string_view file_name, std::string* name) {
  if (file_name.ends_with(std::string(kMergedSuffix) + kPartialSuffix)) return ColumnEntry::Partial;
  for (const auto& [suffix, kind] : {std::pair{kMergedSuffix, ColumnEntry::Merged},
                                     std::pair{kPartsSuffix, ColumnEntry::Parts}}) {
    const std::string_view s(suffix);
    if (file_name.size() <= s.size() || !file_name.ends_with(s)) continue;
    const std::string_view stem = file_name.substr(0, file_name.size() - s.size());
    if (!is_valid_column_name(stem)) return ColumnEntry::None;
    if (name) *name = std::string(stem);
    return kind;
  }
  return ColumnEntry::None;
}

std::string part_record_name(uint64_t rank, uint64_t world) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "part-%05llu-of-%05llu.json",
                static_cast<unsigned long long>(rank), static_cast<unsigned long long>(world));
  return buf;
}

SampleRange rank_share(uint64_t n, uint64_t rank, uint64_t world) {
  if (world == 0 || rank >= world || world >= (1ull << 32))
    throw ArgumentError("rank " + std::to_string(rank) + " of world " + std::to_string(world));
  // floor(r * n / world) without overflow: r * (n / world) + floor(r * (n % world) / world),
  // exact while r * (n % world) fits, i.e. for any world below 2^32.
  auto at = [&](uint64_t r) { return r * (n / world) + r * (n % world) / world; };
  return {at(rank), at(rank + 1)};
}

bool is_crc32_hex(std::string_view s) {
  if (s.size() != 8) return false;
  for (const char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

namespace {

const std::string& meta(const SafetensorsHeader& h, const char* key) {
  const auto it = h.metadata.find(key);
  if (it == h.metadata.end())
    throw ParseError(std::string("column file: its metadata has no '") + key + "' entry");
  return it->second;
}

uint64_t decimal(const SafetensorsHeader& h, const char* key) {
  const std::string& s = meta(h, key);
  if (s.empty() || s.size() > kMaxNumSamplesDigits ||
      s.find_first_not_of("0123456789") != std::string::npos)
    throw ParseError(std::string("column file: '") + key + "' is '" + s +
                     "', not a decimal of at most " + std::to_string(kMaxNumSamplesDigits) +
                     " digits");
  return std::stoull(s);
}

const TensorInfo& tensor(const SafetensorsHeader& h, const char* name) {
  const TensorInfo* t = h.find(name);
  if (!t) throw ParseError(std::string("column file: it has no '") + name + "' tensor");
  if (t->begin % dtype_size(t->dtype) != 0)
    throw ParseError(std::string("column file: tensor '") + name +
                     "' is not aligned to its element size");
  return *t;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + std::to_string(s[k]);
  return out + "]";
}

}  // namespace

ColumnLayout read_column_layout(const SafetensorsHeader& h) {
  ColumnLayout c;
  const std::string& fmt = meta(h, "format");
  if (fmt != kColumnFormat)
    throw ParseError("column file: format is '" + fmt + "', this reader reads '" +
                     std::string(kColumnFormat) + "'");
  c.name = meta(h, "column");
  if (!is_valid_column_name(c.name))
    throw ParseError("column file: the column name '" + c.name + "' is not a valid name");
  c.num_samples = decimal(h, "num_samples");
  c.world = decimal(h, "world");
  c.labels_crc32 = meta(h, "labels_crc32");
  c.fn = meta(h, "fn");
  c.tool = meta(h, "tool");
  c.values_crc32 = meta(h, "values_crc32");
  c.offsets_crc32 = meta(h, "offsets_crc32");
  c.shapes_crc32 = meta(h, "shapes_crc32");
  for (const std::string* s : {&c.labels_crc32, &c.values_crc32, &c.offsets_crc32, &c.shapes_crc32})
    if (!is_crc32_hex(*s))
      throw ParseError("column file: '" + *s + "' is not a CRC-32 of 8 lowercase hex digits");
  const auto n = static_cast<int64_t>(c.num_samples);
  const bool has_digest = h.find(kColumnDigest) != nullptr;
  if (h.tensors.size() != (has_digest ? 4u : 3u))
    throw ParseError("column file: it holds " + std::to_string(h.tensors.size()) +
                     " tensors; a column file holds values, offsets, shapes and (optionally) "
                     "digest");
  if (has_digest) {
    const TensorInfo& dig = tensor(h, kColumnDigest);
    if (dig.dtype != DType::U8 || dig.shape != std::vector<int64_t>{n, kDigestBytes})
      throw ParseError("column file: 'digest' is " + std::string(dtype_name(dig.dtype)) + " " +
                       shape_text(dig.shape) + ", expected U8 [" + std::to_string(n) + ", " +
                       std::to_string(kDigestBytes) + "]");
    c.digest_crc32 = meta(h, "digest_crc32");
    if (!is_crc32_hex(c.digest_crc32))
      throw ParseError("column file: '" + c.digest_crc32 +
                       "' is not a CRC-32 of 8 lowercase hex digits");
    c.digest = &dig;
  }
  const TensorInfo& off = tensor(h, kColumnOffsets);
  if (off.dtype != DType::I64 || off.shape != std::vector<int64_t>{n + 1})
    throw ParseError("column file: 'offsets' is " + std::string(dtype_name(off.dtype)) + " " +
                     shape_text(off.shape) + ", expected I64 [" + std::to_string(n + 1) + "]");
  const TensorInfo& shp = tensor(h, kColumnShapes);
  if (shp.dtype != DType::I64 || shp.shape.size() != 2 || shp.shape[0] != n || shp.shape[1] < 0 ||
      shp.shape[1] >= static_cast<int64_t>(kMaxDims))
    throw ParseError("column file: 'shapes' is " + std::string(dtype_name(shp.dtype)) + " " +
                     shape_text(shp.shape) + ", expected I64 [" + std::to_string(n) +
                     ", D] with D below " + std::to_string(kMaxDims));
  const TensorInfo& val = tensor(h, kColumnValues);
  c.ndim = static_cast<size_t>(shp.shape[1]);
  c.dtype = val.dtype;
  if (val.shape.size() == c.ndim + 1 && val.shape[0] == n && (c.ndim > 0 || n > 0)) {
    c.uniform_shape = std::vector<int64_t>(val.shape.begin() + 1, val.shape.end());
  } else if (val.shape.size() != 1) {
    throw ParseError("column file: 'values' is " + shape_text(val.shape) + ", expected [" +
                     std::to_string(n) + ", ...] (one shape) or [E] (outputs of several shapes)");
  }
  c.values = &val;
  c.offsets = &off;
  c.shapes = &shp;
  return c;
}

}  // namespace tarmac::format
