#include "check/annotation.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "common/error.h"
#include "common/utf8.h"

namespace tarmac::check {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

constexpr const char* kLabels = format::kLabelsFile;

double half_to_double(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(mant + 1024, exp - 25);
  return (h & 0x8000) ? -v : v;
}

// One element at `p` as JSON (non-finite floats become null: JSON has no NaN).
json element_json(DType t, const uint8_t* p) {
  auto get = [&](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  double f = 0;
  switch (t) {
    case DType::BOOL:
      return json(p[0] != 0);
    case DType::U8:
      return json(get(uint8_t{}));
    case DType::I8:
      return json(get(int8_t{}));
    case DType::U16:
      return json(get(uint16_t{}));
    case DType::I16:
      return json(get(int16_t{}));
    case DType::U32:
      return json(get(uint32_t{}));
    case DType::I32:
      return json(get(int32_t{}));
    case DType::U64:
      return json(get(uint64_t{}));
    case DType::I64:
      return json(get(int64_t{}));
    case DType::F16:
      f = half_to_double(get(uint16_t{}));
      break;
    case DType::BF16:
      f = std::bit_cast<float>(static_cast<uint32_t>(get(uint16_t{})) << 16);
      break;
    case DType::F32:
      f = get(float{});
      break;
    case DType::F64:
      f = get(double{});
      break;
  }
  return std::isfinite(f) ? json(f) : json(nullptr);
}

// Nested arrays of shape `shape` from row-major elements at `p`.
json array_json(DType t, const uint8_t* p, const std::vector<int64_t>& shape, size_t dim) {
  if (dim == shape.size()) return element_json(t, p);
  uint64_t stride = dtype_size(t);
  for (size_t d = dim + 1; d < shape.size(); ++d) stride *= static_cast<uint64_t>(shape[d]);
  json a = json::array();
  for (int64_t i = 0; i < shape[dim]; ++i)
    a.push_back(array_json(t, p + i * stride, shape, dim + 1));
  return a;
}

uint64_t product(const std::vector<int64_t>& s, size_t from) {
  uint64_t p = 1;
  for (size_t i = from; i < s.size(); ++i) p *= static_cast<uint64_t>(s[i]);
  return p;
}

}  // namespace

template <typename T>
T Annotation::at(const TensorInfo* t, uint64_t i) const {
  if (!t || (i + 1) * sizeof(T) > t->end - t->begin)
    throw ParseError("index " + std::to_string(i) + " is out of bounds of tensor '" +
                     (t ? t->name : std::string("?")) + "'");
  T v;
  std::memcpy(&v, file_.bytes().data() + t->begin + i * sizeof(T), sizeof(T));
  return v;
}

bool Annotation::check_offsets(const TensorInfo* offsets, uint64_t total, const std::string& column,
                               std::vector<Problem>& problems) const {
  int64_t prev = at<int64_t>(offsets, 0);
  if (prev != 0) {
    problems.push_back(
        {kLabels, "", "'" + column + ".offsets' starts at " + std::to_string(prev) + ", not 0"});
    return false;
  }
  for (uint64_t i = 0; i < n_; ++i) {
    const int64_t next = at<int64_t>(offsets, i + 1);
    if (next < prev || static_cast<uint64_t>(next) > total) {
      problems.push_back({kLabels, column == format::kKeyColumn ? "#" + std::to_string(i) : key(i),
                          "'" + column + ".offsets' goes from " + std::to_string(prev) + " to " +
                              std::to_string(next) + " (must not decrease nor pass " +
                              std::to_string(total) + ")"});
      return false;
    }
    prev = next;
  }
  if (static_cast<uint64_t>(prev) != total) {
    problems.push_back({kLabels, "",
                        "'" + column + ".offsets' ends at " + std::to_string(prev) +
                            " but the values hold " + std::to_string(total)});
    return false;
  }
  return true;
}

bool Annotation::open(const std::string& dir, bool deep, std::vector<Problem>& problems) {
  dir_ = dir;
  try {
    file_ = MappedFile((fs::path(dir) / kLabels).string());
    header_ = parse_safetensors(file_.bytes());
  } catch (const std::exception& e) {
    problems.push_back({kLabels, "", e.what()});
    return false;
  }
  // The header text: one JSON object, then only spaces up to a multiple of 8 (format.md 1).
  const auto bytes = file_.bytes();
  if (header_.data_start % 8 != 0)
    problems.push_back({kLabels, "",
                        "the data buffer starts at byte " + std::to_string(header_.data_start) +
                            ", not a multiple of 8"});
  size_t last = static_cast<size_t>(header_.data_start);
  while (last > 8 && bytes[last - 1] != '}') --last;
  if (bytes[8] != '{') problems.push_back({kLabels, "", "the header does not start with '{'"});
  for (size_t i = last; i < header_.data_start; ++i)
    if (bytes[i] != ' ') {
      problems.push_back(
          {kLabels, "", "byte " + std::to_string(i) + " of the header padding is not a space"});
      break;
    }

  std::vector<std::string> layout_problems;
  std::optional<DatasetLayout> layout = read_layout(header_, layout_problems);
  for (auto& what : layout_problems) problems.push_back({kLabels, "", std::move(what)});
  if (!layout) return false;
  layout_ = std::move(*layout);
  n_ = layout_.num_samples;
  for (const auto& b : layout_.blobs) blob_kinds_.push_back(b.kind);
  keys_ok_ = check_offsets(layout_.key_offsets, static_cast<uint64_t>(layout_.key_values->shape[0]),
                           format::kKeyColumn, problems);
  for (FieldLayout& f : layout_.fields)
    if (f.values && f.offsets &&
        !check_offsets(f.offsets, static_cast<uint64_t>(f.values->shape[0]), f.spec.name, problems))
      f.offsets = nullptr;
  if (deep) deep_checks(problems);
  return true;
}

void Annotation::deep_checks(std::vector<Problem>& problems) const {
  // Keys: valid UTF-8, not empty, unique (by sorted 64-bit hashes, then by the bytes).
  if (keys_ok_) {
    std::vector<std::pair<uint64_t, uint64_t>> hashes;
    hashes.reserve(n_);
    for (uint64_t i = 0; i < n_; ++i) {
      const std::string k = key(i);
      if (k.empty() || !is_valid_utf8(k))
        problems.push_back({kLabels, "#" + std::to_string(i), "key is empty or not UTF-8"});
      hashes.emplace_back(std::hash<std::string>{}(k), i);
    }
    std::sort(hashes.begin(), hashes.end());
    for (size_t j = 1; j < hashes.size(); ++j)
      if (hashes[j].first == hashes[j - 1].first &&
          key(hashes[j].second) == key(hashes[j - 1].second))
        problems.push_back({kLabels, key(hashes[j].second),
                            "key is not unique: samples #" + std::to_string(hashes[j - 1].second) +
                                " and #" + std::to_string(hashes[j].second)});
  }
  for (size_t k = 0; k < layout_.blobs.size(); ++k)
    for (uint64_t i = 0; i < n_; ++i) {
      const BlobRef b = blob(k, i);
      std::string why;
      if (b.shard < 0 || static_cast<size_t>(b.shard) >= layout_.shards.size())
        why = "shard index " + std::to_string(b.shard) + " is out of range";
      else if (b.offset < 512 || b.size < 0)
        why = "offset " + std::to_string(b.offset) + " / size " + std::to_string(b.size) +
              " is impossible";
      else if (b.width <= 0 || b.height <= 0)
        why = "width x height " + std::to_string(b.width) + "x" + std::to_string(b.height) +
              " is not positive";
      if (!why.empty()) problems.push_back({kLabels, key(i), blob_kinds_[k] + ": " + why});
    }
  if (layout_.affine)
    for (uint64_t i = 0; i < n_; ++i) {
      const auto m = *affine(i);
      if (!std::all_of(m.begin(), m.end(), [](double v) { return std::isfinite(v); }) ||
          m[1] != 0 || m[3] != 0 || !(m[0] > 0) || !(m[4] > 0))
        problems.push_back(
            {kLabels, key(i),
             std::string(format::kAffineColumn) + " is not a finite scale-and-translate map"});
    }
  for (const auto& f : layout_.fields) {
    if (f.spec.kind == FieldKind::Numeric || !f.values || !f.offsets) continue;
    for (uint64_t i = 0; i < n_; ++i) {
      const auto b = static_cast<uint64_t>(at<int64_t>(f.offsets, i));
      const auto e = static_cast<uint64_t>(at<int64_t>(f.offsets, i + 1));
      const auto text = file_.bytes().subspan(f.values->begin + b, e - b);
      if (!is_valid_utf8(text))
        problems.push_back({kLabels, key(i), "field '" + f.spec.name + "' is not valid UTF-8"});
      else if (f.spec.kind == FieldKind::Json && (!f.valid || at<uint8_t>(f.valid, i) != 0) &&
               !json::accept(text.begin(), text.end()))
        problems.push_back({kLabels, key(i),
                            "field '" + f.spec.name + "' (kind json) holds text that is not JSON"});
    }
  }
}

std::string Annotation::key(uint64_t i) const {
  // append, not "#" + ...: GCC 12 at -O3 warns falsely (-Wrestrict) on operator+ inlined here
  if (!keys_ok_ || i >= n_) return std::string("#").append(std::to_string(i));
  const auto b = static_cast<uint64_t>(at<int64_t>(layout_.key_offsets, i));
  const auto e = static_cast<uint64_t>(at<int64_t>(layout_.key_offsets, i + 1));
  return std::string(
      reinterpret_cast<const char*>(file_.bytes().data() + layout_.key_values->begin + b), e - b);
}

std::optional<uint64_t> Annotation::find(std::string_view k) const {
  for (uint64_t i = 0; i < n_; ++i)
    if (key(i) == k) return i;
  if (k.size() > 1 && k[0] == '#' &&
      std::all_of(k.begin() + 1, k.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      k.size() < 20) {
    const uint64_t i = std::stoull(std::string(k.substr(1)));
    if (i < n_) return i;
  }
  return std::nullopt;
}

BlobRef Annotation::blob(size_t kind, uint64_t i) const {
  using namespace format;
  const auto& c = layout_.blobs.at(kind).columns;
  return {at<int32_t>(c[kBlobShard], i), at<int64_t>(c[kBlobOffset], i),
          at<int64_t>(c[kBlobSize], i),  at<uint32_t>(c[kBlobCrc32], i),
          at<int32_t>(c[kBlobWidth], i), at<int32_t>(c[kBlobHeight], i)};
}

std::optional<std::array<double, 6>> Annotation::affine(uint64_t i) const {
  if (!layout_.affine) return std::nullopt;
  std::array<double, 6> m;
  for (int j = 0; j < 6; ++j) m[j] = at<double>(layout_.affine, i * 6 + j);
  return m;
}

json Annotation::labels_json(uint64_t i) const {
  json out = json::object();
  for (const auto& fl : layout_.fields) {
    const FieldSpec& f = fl.spec;
    if (!fl.values || (f.ragged && !fl.offsets) || (f.nullable && !fl.valid))
      throw ParseError("field '" + f.name + "' is unusable");
    if (fl.valid && at<uint8_t>(fl.valid, i) == 0) {  // no value: null
      out[f.name] = nullptr;
      continue;
    }
    const uint64_t row = product(f.shape, 1) * dtype_size(f.dtype);
    uint64_t b = 0, e = 0;
    std::vector<int64_t> shape = f.shape;
    if (f.ragged) {
      b = static_cast<uint64_t>(at<int64_t>(fl.offsets, i));
      e = static_cast<uint64_t>(at<int64_t>(fl.offsets, i + 1));
      shape[0] = static_cast<int64_t>(e - b);
      b *= row;
      e *= row;
    } else {
      b = i * product(f.shape, 0) * dtype_size(f.dtype);
      e = b + product(f.shape, 0) * dtype_size(f.dtype);
    }
    if (e < b || e > fl.values->end - fl.values->begin)
      throw ParseError("field '" + f.name + "' of sample #" + std::to_string(i) +
                       " is out of bounds");
    const uint8_t* p = file_.bytes().data() + fl.values->begin + b;
    if (f.kind == FieldKind::String) {
      out[f.name] = std::string(reinterpret_cast<const char*>(p), e - b);
    } else if (f.kind == FieldKind::Json) {
      // Not parse(..., false): text that is not JSON would be a "discarded" value, which dumps
      // as "<discarded>", and the document would not be JSON either.
      json v = json::parse(p, p + (e - b), nullptr, false);
      if (v.is_discarded())
        throw ParseError("field '" + f.name + "' of sample '" + key(i) +
                         "' holds text that is not JSON");
      out[f.name] = std::move(v);
    } else {
      out[f.name] = array_json(f.dtype, p, shape, 0);
    }
  }
  return out;
}

}  // namespace tarmac::check
