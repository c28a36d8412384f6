#include "read/derived_column.h"

#include "format/column_file.h"
#include "format/safetensors.h"
#include "read/mapped_file.h"

namespace tarmac {

DerivedColumn::~DerivedColumn() = default;
DerivedColumn::DerivedColumn(DerivedColumn&&) noexcept = default;
DerivedColumn& DerivedColumn::operator=(DerivedColumn&&) noexcept = default;

DerivedColumn::DerivedColumn(const std::string& path, const std::string& name, uint64_t num_samples,
                             const std::string& labels_crc32)
    : name_(name), path_(path), file_(std::make_unique<MappedFile>(path)), n_(num_samples) {
  const auto bytes = file_->bytes();
  SafetensorsHeader header;  // ColumnLayout points into it
  format::ColumnLayout l;
  try {
    header = parse_safetensors(bytes);
    l = format::read_column_layout(header);
  } catch (const ParseError& e) {
    throw ParseError(path + ": " + e.what());
  }
  if (l.name != name) throw ParseError(path + ": the file says it is column '" + l.name + "'");
  if (l.labels_crc32 != labels_crc32 || l.num_samples != num_samples)
    throw DataError(path + ": column '" + name +
                    "' was computed from another version of the dataset (annotation file CRC-32 " +
                    l.labels_crc32 + ", " + std::to_string(l.num_samples) +
                    " samples; the dataset now has " + labels_crc32 + ", " +
                    std::to_string(num_samples) +
                    "): its outputs belong to other samples. Derive it again (`tarmac column rm` "
                    "it first)");
  dtype_ = l.dtype;
  ndim_ = l.ndim;
  uniform_ = l.uniform_shape.has_value();
  values_.dtype = l.dtype;
  values_.shape.ndim = l.values->shape.size();
  std::copy(l.values->shape.begin(), l.values->shape.end(), values_.shape.dims.begin());
  values_.bytes = bytes.subspan(l.values->begin, l.values->end - l.values->begin);
  auto i64 = [&](const TensorInfo* t) {
    return std::span<const int64_t>(reinterpret_cast<const int64_t*>(bytes.data() + t->begin),
                                    (t->end - t->begin) / sizeof(int64_t));
  };
  offsets_ = i64(l.offsets);
  shapes_ = i64(l.shapes);
}

TensorView DerivedColumn::values() const {
  return values_;
}

TensorView DerivedColumn::value(size_t i) const {
  if (i >= n_)
    throw IndexError("sample " + std::to_string(i) + " of " + std::to_string(n_) + " (column '" +
                     name_ + "')");
  const size_t esz = dtype_size(dtype_);
  const auto total = static_cast<int64_t>(values_.bytes.size() / esz);
  const int64_t b = offsets_[i], e = offsets_[i + 1];
  TensorView v;
  v.dtype = dtype_;
  v.shape.ndim = ndim_;
  int64_t elements = 1;
  bool bad = false;
  for (size_t a = 0; a < ndim_; ++a) {
    const int64_t dim = shapes_[i * ndim_ + a];
    if (dim < 0 || (dim > 0 && elements > total / dim)) bad = true;
    if (!bad) elements *= dim;
    v.shape.dims[a] = dim;
  }
  if (bad || b < 0 || e < b || e > total || e - b != elements)
    throw DataError(path_ + ": sample " + std::to_string(i) + "'s output has offsets " +
                    std::to_string(b) + ".." + std::to_string(e) +
                    " that disagree with its shape or the " + std::to_string(total) +
                    " values (run tarmac verify)");
  v.bytes = values_.bytes.subspan(static_cast<size_t>(b) * esz, static_cast<size_t>(e - b) * esz);
  return v;
}

}  // namespace tarmac
