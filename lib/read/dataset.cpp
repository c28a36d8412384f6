#include "read/dataset.h"

#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <optional>
#include <unordered_map>

#include "common/crc32.h"
#include "format/column_file.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "format/npy_blob.h"
#include "format/safetensors.h"
#include "read/derived_column.h"
#include "read/mapped_file.h"
#include "transform/image_codec.h"

static_assert(std::endian::native == std::endian::little,
              "tarmac's reader casts little-endian file bytes in place");

namespace tarmac {
namespace fs = std::filesystem;
namespace {

// Decoding at read time refuses images larger than this many pixels (1 gigapixel).
constexpr uint64_t kMaxDecodePixels = uint64_t{1} << 30;

struct TjHandle {
  tjhandle h = tjInitDecompress();
  ~TjHandle() { tjDestroy(h); }
};

tjhandle decompressor() {
  thread_local TjHandle t;
  return t.h;
}

// Copies a decoded BGR 8-bit picture into `out` as RGB (channels 3) or grey (channels 1) of
// width x height, resizing when allowed.
void store_rgb(const cv::Mat& bgr, std::span<uint8_t> out, int width, int height, bool resize,
               size_t i, int channels = 3) {
  cv::Mat dst(height, width, channels == 1 ? CV_8UC1 : CV_8UC3, out.data());
  const int code = channels == 1 ? cv::COLOR_BGR2GRAY : cv::COLOR_BGR2RGB;
  if (bgr.cols == width && bgr.rows == height) {
    cv::cvtColor(bgr, dst, code);
    return;
  }
  if (!resize)
    throw DataError("sample " + std::to_string(i) + ": image is " + std::to_string(bgr.cols) + "x" +
                    std::to_string(bgr.rows) + ", the batch wants " + std::to_string(width) + "x" +
                    std::to_string(height) + " (enable resizing or use a fixed --size)");
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, code);
  const bool shrink = width < bgr.cols && height < bgr.rows;
  cv::resize(rgb, dst, cv::Size(width, height), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
}

}  // namespace

int64_t Shape::elements() const {
  int64_t e = 1;
  for (size_t k = 0; k < ndim; ++k) e *= dims[k];
  return e;
}

struct Dataset::Tensor {
  std::string name;
  DType dtype = DType::U8;
  Shape shape;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;

  TensorView view() const { return {dtype, shape, {data, static_cast<size_t>(bytes)}}; }
};

struct Dataset::BlobState {
  std::array<const Tensor*, format::kNumBlobColumns> columns;
  std::optional<format::StoredEncoding> encoding;
};

struct Dataset::State {
  std::map<std::string, std::string> metadata;
  std::unordered_map<std::string, Tensor> tensors;
  std::vector<BlobState> blobs;  ///< parallel to blob_kinds_
  /// Per field (schema order, then __affine__): values and, when ragged, offsets.
  struct FieldTensors {
    const Tensor *values, *offsets;
    const Tensor* valid = nullptr;  ///< nullable fields: NAME.valid
  };
  std::vector<FieldTensors> fields;
  const Tensor* key_values = nullptr;
  const Tensor* key_offsets = nullptr;
  const Tensor* affine = nullptr;
  /// Derived columns, opened on first use: the column or what opening it threw.
  std::mutex derived_mu;
  std::map<std::string, std::unique_ptr<DerivedColumn>, std::less<>> derived;
  std::map<std::string, std::exception_ptr, std::less<>> derived_errors;
  std::optional<std::string> labels_crc32;
  /// Shards fetched on first use: fetch, and per shard a lock and whether it is mapped. Not
  /// std::call_once: a fetch that throws must leave the shard to be tried again, which
  /// call_once does only where pthread_once unwinds (not under ThreadSanitizer: it hangs).
  ShardFetcher fetch;
  std::unique_ptr<std::mutex[]> fetch_locks;
  std::unique_ptr<std::atomic<bool>[]> fetched;
};

Dataset::~Dataset() = default;
Dataset::Dataset(Dataset&&) noexcept = default;
Dataset& Dataset::operator=(Dataset&&) noexcept = default;

Dataset::Dataset(const std::string& dir, ShardFetcher fetch)
    : Dataset(dir, std::move(fetch), true) {}

Dataset::Dataset(const std::string& dir) : Dataset(dir, {}, false) {}

Dataset::Dataset(const std::string& dir, ShardFetcher fetch, bool lazy)
    : dir_(dir), st_(std::make_unique<State>()) {
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw FatalError("'" + dir + "' is not a directory");
  const fs::path labels = root / format::kLabelsFile;
  if (!fs::exists(labels, ec))
    throw FatalError("'" + dir + "' is not a tarmac dataset: no " + format::kLabelsFile +
                     (fs::exists(root / format::kStagingDir, ec)
                          ? " (a conversion into it did not finish)"
                          : ""));
  labels_ = std::make_unique<MappedFile>(labels.string());
  const auto file = labels_->bytes();
  SafetensorsHeader h = parse_safetensors(file);
  const DatasetLayout layout = read_layout(h);  // everything later accesses trust
  n_ = layout.num_samples;
  for (const TensorInfo& t : h.tensors) {
    Tensor x;
    x.name = t.name;
    x.dtype = t.dtype;
    x.shape.ndim = t.shape.size();
    std::copy(t.shape.begin(), t.shape.end(), x.shape.dims.begin());
    x.data = file.data() + t.begin;
    x.bytes = t.end - t.begin;
    st_->tensors.emplace(t.name, std::move(x));
  }
  st_->metadata = std::move(h.metadata);
  auto mine = [&](const TensorInfo* t) { return t ? &st_->tensors.at(t->name) : nullptr; };
  st_->key_values = mine(layout.key_values);
  st_->key_offsets = mine(layout.key_offsets);
  for (const BlobLayout& b : layout.blobs) {
    blob_kinds_.push_back(b.kind);
    BlobState sb{};
    for (size_t c = 0; c < format::kNumBlobColumns; ++c) sb.columns[c] = mine(b.columns[c]);
    sb.encoding = b.encoding;
    st_->blobs.push_back(sb);
  }
  if (has_images()) {
    st_->affine = mine(layout.affine);
    affine_field_ = {format::kAffineColumn, FieldKind::Numeric, DType::F64, {2, 3}, false, ""};
  }
  for (const FieldLayout& f : layout.fields) {
    fields_.push_back(f.spec);
    st_->fields.push_back({mine(f.values), mine(f.offsets), mine(f.valid)});
  }
  st_->fields.push_back({st_->affine, nullptr});

  shard_names_ = layout.shards;
  if (lazy) {
    if (!fetch) throw ArgumentError("Dataset: an empty ShardFetcher");
    st_->fetch = std::move(fetch);
    st_->fetch_locks = std::make_unique<std::mutex[]>(shard_names_.size());
    st_->fetched = std::make_unique<std::atomic<bool>[]>(shard_names_.size());
    shards_.resize(shard_names_.size());
  }
  for (const std::string& s : lazy ? std::vector<std::string>() : shard_names_) {
    if (!fs::exists(root / s, ec))
      throw FatalError("dataset '" + dir + "' is incomplete: shard '" + s + "' is missing");
    shards_.emplace_back((root / s).string());
  }
  for (fs::directory_iterator it(root / format::kColumnsDir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name;
    if (format::column_entry(it->path().filename().string(), &name) == format::ColumnEntry::Merged)
      derived_names_.push_back(std::move(name));
  }
  std::sort(derived_names_.begin(), derived_names_.end());
}

const DerivedColumn& Dataset::derived(std::string_view name) const {
  if (!std::binary_search(derived_names_.begin(), derived_names_.end(), name)) {
    std::string there;
    for (const auto& d : derived_names_) there += (there.empty() ? "" : ", ") + d;
    std::error_code ec;
    if (format::is_valid_column_name(name) &&
        fs::exists(fs::path(dir_) / format::column_file(name), ec))
      throw ArgumentError("derived column '" + std::string(name) + "' of '" + dir_ +
                          "' was merged after the dataset was opened: open it again to read it");
    throw ArgumentError("dataset '" + dir_ + "' has no derived column '" + std::string(name) +
                        "' (" + (there.empty() ? "it has none" : "it has: " + there) + ")");
  }
  std::lock_guard lock(st_->derived_mu);
  if (const auto it = st_->derived.find(name); it != st_->derived.end()) return *it->second;
  if (const auto it = st_->derived_errors.find(name); it != st_->derived_errors.end())
    std::rethrow_exception(it->second);
  try {
    if (!st_->labels_crc32) {
      // The manifest records the annotation file's CRC-32 (`tarmac verify` checks that it is
      // true); without a manifest the file is summed here, once.
      std::optional<std::string> said;
      try {
        if (const auto m = format::read_manifest(dir_)) said = m->labels_crc32;
      } catch (const ParseError&) {  // `tarmac verify` names it; the file is summed instead
      }
      if (!said) said = crc32_hex(crc32_of(labels_->bytes()));
      st_->labels_crc32 = said;
    }
    const std::string path = (fs::path(dir_) / format::column_file(name)).string();
    auto col = std::make_unique<DerivedColumn>(path, std::string(name), n_, *st_->labels_crc32);
    return *st_->derived.emplace(std::string(name), std::move(col)).first->second;
  } catch (...) {
    st_->derived_errors.emplace(std::string(name), std::current_exception());
    throw;
  }
}

const std::map<std::string, std::string>& Dataset::metadata() const {
  return st_->metadata;
}

size_t Dataset::field_index(std::string_view name) const {
  for (size_t k = 0; k < fields_.size(); ++k)
    if (fields_[k].name == name) return k;
  if (has_images() && name == format::kAffineColumn) return fields_.size();
  return fields_.size() + 1;
}

const FieldSpec* Dataset::find_field(std::string_view name) const {
  const size_t k = field_index(name);
  return k < fields_.size() ? &fields_[k] : k == fields_.size() ? &affine_field_ : nullptr;
}

const Dataset::Tensor* Dataset::find_tensor(std::string_view name) const {
  auto it = st_->tensors.find(std::string(name));
  return it == st_->tensors.end() ? nullptr : &it->second;
}

const Dataset::Tensor& Dataset::tensor(std::string_view name) const {
  const Tensor* t = find_tensor(name);
  if (!t)
    throw ArgumentError("dataset '" + dir_ + "' has no field or tensor '" + std::string(name) +
                        "'");
  return *t;
}

void Dataset::check_index(size_t i) const {
  if (i >= n_)
    throw IndexError("sample index " + std::to_string(i) + " is out of range for " +
                     std::to_string(n_) + " samples");
}

template <class T>
T Dataset::scalar(const Tensor& t, size_t i) const {
  T v;
  std::memcpy(&v, t.data + i * sizeof(T), sizeof(T));
  return v;
}

std::pair<int64_t, int64_t> Dataset::ragged_range(const Tensor& offsets, int64_t rows, size_t i,
                                                  std::string_view field) const {
  const auto b = scalar<int64_t>(offsets, i), e = scalar<int64_t>(offsets, i + 1);
  if (b < 0 || b > e || e > rows)
    throw DataError("dataset '" + dir_ + "': sample " + std::to_string(i) + " of field '" +
                    std::string(field) + "' has offsets " + std::to_string(b) + ".." +
                    std::to_string(e) + ", not an ordered range inside its " +
                    std::to_string(rows) + " values");
  return {b, e};
}

std::string_view Dataset::key(size_t i) const {
  check_index(i);
  const auto [b, e] =
      ragged_range(*st_->key_offsets, st_->key_values->shape[0], i, format::kKeyColumn);
  return {reinterpret_cast<const char*>(st_->key_values->data) + b, static_cast<size_t>(e - b)};
}

TensorView Dataset::value(std::string_view name, size_t i) const {
  // The hot path: no string is built and nothing is hashed per access.
  const size_t k = field_index(name);
  if (k > fields_.size())
    throw ArgumentError("dataset '" + dir_ + "' has no field '" + std::string(name) + "'");
  const FieldSpec& f = k < fields_.size() ? fields_[k] : affine_field_;
  const State::FieldTensors& t = st_->fields[k];
  check_index(i);
  TensorView v = t.values->view();
  if (!f.ragged) {
    const uint64_t row = f.sample_bytes();
    v.shape.ndim -= 1;
    std::copy(v.shape.dims.begin() + 1, v.shape.dims.end(), v.shape.dims.begin());
    v.bytes = v.bytes.subspan(i * row, row);
    return v;
  }
  const Tensor& values = *t.values;
  const auto [b, e] = ragged_range(*t.offsets, values.shape[0], i, name);
  const uint64_t row = values.shape[0] ? values.bytes / static_cast<uint64_t>(values.shape[0]) : 0;
  v.shape.dims[0] = e - b;
  v.bytes = v.bytes.subspan(static_cast<size_t>(b) * row, static_cast<size_t>(e - b) * row);
  return v;
}

bool Dataset::has_value(std::string_view name, size_t i) const {
  const size_t k = field_index(name);
  if (k > fields_.size())
    throw ArgumentError("dataset '" + dir_ + "' has no field '" + std::string(name) + "'");
  check_index(i);
  const Tensor* valid = st_->fields[k].valid;
  return !valid || valid->data[i] != 0;
}

Column Dataset::column(std::string_view name) const {
  const size_t k = field_index(name);
  if (k <= fields_.size()) {
    const State::FieldTensors& t = st_->fields[k];
    if (!t.offsets) return {t.values->view(), {}};
    return {t.values->view(),
            {reinterpret_cast<const int64_t*>(t.offsets->data),
             static_cast<size_t>(t.offsets->shape[0])}};
  }
  return {tensor(name).view(), {}};
}

std::span<const double, 6> Dataset::affine(size_t i) const {
  if (!st_->affine) throw ArgumentError("dataset '" + dir_ + "' has no images, hence no affine");
  check_index(i);
  return std::span<const double, 6>(reinterpret_cast<const double*>(st_->affine->data) + 6 * i, 6);
}

const Dataset::BlobState& Dataset::blob_state(std::string_view kind) const {
  for (size_t k = 0; k < blob_kinds_.size(); ++k)
    if (blob_kinds_[k] == kind) return st_->blobs[k];
  throw ArgumentError("dataset '" + dir_ + "' stores no blob kind '" + std::string(kind) + "'");
}

BlobRef Dataset::blob_ref(size_t i, std::string_view kind) const {
  const BlobState& b = blob_state(kind);
  check_index(i);
  using namespace format;
  BlobRef r{
      scalar<int32_t>(*b.columns[kBlobShard], i), scalar<int64_t>(*b.columns[kBlobOffset], i),
      scalar<int64_t>(*b.columns[kBlobSize], i),  scalar<uint32_t>(*b.columns[kBlobCrc32], i),
      scalar<int32_t>(*b.columns[kBlobWidth], i), scalar<int32_t>(*b.columns[kBlobHeight], i)};
  auto where = [&] {
    return "dataset '" + dir_ + "': sample " + std::to_string(i) + " " + std::string(kind);
  };
  if (r.shard < 0 || static_cast<size_t>(r.shard) >= shards_.size())
    throw DataError(where() + " names shard " + std::to_string(r.shard) + " of " +
                    std::to_string(shards_.size()));
  const uint64_t shard_size = shard(static_cast<size_t>(r.shard)).bytes().size();
  if (r.offset < 0 || r.size < 0 || static_cast<uint64_t>(r.offset) > shard_size ||
      static_cast<uint64_t>(r.size) > shard_size - static_cast<uint64_t>(r.offset))
    throw DataError(where() + " lies at bytes " + std::to_string(r.offset) + "+" +
                    std::to_string(r.size) + ", beyond shard '" +
                    shard_names_[static_cast<size_t>(r.shard)] + "' of " +
                    std::to_string(shard_size) + " bytes");
  return r;
}

const MappedFile& Dataset::shard(size_t k) const {
  if (st_->fetch && !st_->fetched[k].load(std::memory_order_acquire)) {
    const std::lock_guard lock(st_->fetch_locks[k]);
    if (!st_->fetched[k].load(std::memory_order_relaxed)) {
      shards_[k] = MappedFile(st_->fetch(k));  // a throw leaves it to the next access
      st_->fetched[k].store(true, std::memory_order_release);
    }
  }
  return shards_[k];
}

std::span<const uint8_t> Dataset::shard_bytes(size_t k) const {
  if (k >= shards_.size())
    throw IndexError("shard " + std::to_string(k) + " of " + std::to_string(shards_.size()));
  return shard(k).bytes();
}

std::span<const uint8_t> Dataset::blob(size_t i, std::string_view kind) const {
  const BlobRef r = blob_ref(i, kind);
  return shard(static_cast<size_t>(r.shard))
      .bytes()
      .subspan(static_cast<size_t>(r.offset), static_cast<size_t>(r.size));
}

BlobEncoding Dataset::encoding(size_t i, std::string_view kind) const {
  const BlobRef r = blob_ref(i, kind);
  const auto bytes = shard(static_cast<size_t>(r.shard)).bytes();
  const auto stored = blob_state(kind).encoding;
  if (stored) switch (*stored) {
      case format::StoredEncoding::Jpeg:
        return BlobEncoding::Jpeg;
      case format::StoredEncoding::Png:
        return BlobEncoding::Png;
      case format::StoredEncoding::Webp:
        return BlobEncoding::Webp;
      case format::StoredEncoding::Raw:
        return BlobEncoding::Raw;
      case format::StoredEncoding::Npy:
        return BlobEncoding::Npy;
      case format::StoredEncoding::Source:
        break;  // the magic bytes tell
    }
  // Files written before `blob_encodings`: the member's ustar header sits in the 512 bytes
  // before the data, and its name ends with the extension. Raw pixels have no magic bytes.
  if (!stored && r.offset >= 512) {
    const uint8_t* hdr = bytes.data() + r.offset - 512;
    if (std::memcmp(hdr + 257, "ustar", 5) == 0) {
      const std::string_view name(reinterpret_cast<const char*>(hdr),
                                  strnlen(reinterpret_cast<const char*>(hdr), 100));
      if (name.ends_with(".rgb")) return BlobEncoding::Raw;
    }
  }
  const auto d = bytes.subspan(static_cast<size_t>(r.offset), static_cast<size_t>(r.size));
  try {
    switch (probe_image(d).format) {
      case ImageFormat::Jpeg:
        return BlobEncoding::Jpeg;
      case ImageFormat::Png:
        return BlobEncoding::Png;
      case ImageFormat::Webp:
        return BlobEncoding::Webp;
      case ImageFormat::Bmp:
        return BlobEncoding::Bmp;
      case ImageFormat::Tiff:
        return BlobEncoding::Tiff;
      case ImageFormat::Unknown:
        break;
    }
  } catch (const ParseError&) {
  }
  if (!stored && r.width > 0 && r.height > 0 &&
      uint64_t(r.size) == uint64_t(r.width) * uint64_t(r.height) * 3)
    return BlobEncoding::Raw;
  throw DataError("dataset '" + dir_ + "': sample " + std::to_string(i) + " " + std::string(kind) +
                  " is in no format tarmac decodes");
}

std::pair<int, int> Dataset::decoded_size(size_t i) const {
  auto where = [&] { return "dataset '" + dir_ + "': sample " + std::to_string(i) + " image"; };
  int w = 0, h = 0;
  if (encoding(i) == BlobEncoding::Raw) {
    const BlobRef r = blob_ref(i);
    w = r.width;
    h = r.height;
  } else {
    try {
      const ImageHeader hdr = probe_image(image(i));
      w = hdr.orientation >= 5 ? hdr.height : hdr.width;
      h = hdr.orientation >= 5 ? hdr.width : hdr.height;
    } catch (const ParseError& e) {
      throw DataError(where() + ": " + e.what());
    }
  }
  // Checked here, not only when decoding: callers allocate what this returns.
  if (w <= 0 || h <= 0)
    throw DataError(where() + " has no valid size (" + std::to_string(w) + "x" + std::to_string(h) +
                    ")");
  if (uint64_t(w) * uint64_t(h) > kMaxDecodePixels)
    throw DataError(where() + " is " + std::to_string(w) + "x" + std::to_string(h) +
                    ", more than the " + std::to_string(kMaxDecodePixels) +
                    " pixels tarmac decodes");
  return {w, h};
}

int Dataset::decoded_channels(size_t i) const {
  if (encoding(i) == BlobEncoding::Raw) return 3;
  try {
    return probe_image(image(i)).grey ? 1 : 3;
  } catch (const ParseError& e) {
    throw DataError("dataset '" + dir_ + "': sample " + std::to_string(i) + " image: " + e.what());
  }
}

void Dataset::decode_into(size_t i, std::span<uint8_t> out, int width, int height, bool resize,
                          int channels) const {
  if (channels != 1 && channels != 3) throw ArgumentError("decode_into: channels must be 1 or 3");
  if (width <= 0 || height <= 0 || out.size() != size_t(width) * size_t(height) * size_t(channels))
    throw ArgumentError("decode_into: the buffer must hold height*width*channels bytes");
  const auto bytes = image(i);
  auto where = [&] {
    return "dataset '" + dir_ + "': sample " + std::to_string(i) + " (" + std::string(key(i)) +
           ") image: ";
  };
  const BlobEncoding enc = encoding(i);
  if (enc == BlobEncoding::Raw) {
    const BlobRef r = blob_ref(i);
    if (uint64_t(r.size) != uint64_t(r.width) * uint64_t(r.height) * 3 || r.width <= 0 ||
        r.height <= 0)
      throw DataError(where() + "raw pixels of " + std::to_string(r.size) + " bytes do not make " +
                      std::to_string(r.width) + "x" + std::to_string(r.height) + " RGB");
    if (r.width == width && r.height == height && channels == 3) {
      std::memcpy(out.data(), bytes.data(), out.size());
      return;
    }
    cv::Mat rgb(r.height, r.width, CV_8UC3, const_cast<uint8_t*>(bytes.data()));
    cv::Mat bgr;
    cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
    store_rgb(bgr, out, width, height, resize, i, channels);
    return;
  }
  try {
    if (enc == BlobEncoding::Jpeg && channels == 3) {
      // Fast path: libjpeg-turbo straight to RGB into the caller's buffer.
      int w = 0, h = 0, ss = 0, cs = 0;
      tjhandle tj = decompressor();
      if (tjDecompressHeader3(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), &w, &h,
                              &ss, &cs) == 0 &&
          w == width && h == height && cs != TJCS_CMYK && cs != TJCS_YCCK &&
          probe_image(bytes).orientation == 1) {
        if (tjDecompress2(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), out.data(), w,
                          0, h, TJPF_RGB, 0) != 0) {
          const std::string msg = tjGetErrorStr2(tj);
          if (tjGetErrorCode(tj) != TJERR_WARNING ||
              msg.find("extraneous bytes") == std::string::npos)
            throw ParseError("corrupt or truncated JPEG: " + msg);
        }
        return;
      }
    }
    store_rgb(decode_image(bytes, kMaxDecodePixels), out, width, height, resize, i, channels);
  } catch (const ParseError& e) {
    throw DataError(where() + e.what());
  } catch (const cv::Exception& e) {
    throw DataError(where() + e.what());
  }
}

Pixels Dataset::decode(size_t i) const {
  const auto [w, h] = decoded_size(i);
  Pixels p;
  p.width = w;
  p.height = h;
  p.channels = decoded_channels(i);
  p.data.resize(size_t(w) * size_t(h) * size_t(p.channels));
  decode_into(i, p.data, w, h, false, p.channels);
  return p;
}

TensorView Dataset::dense_array(size_t i, std::string_view kind) const {
  if (blob_state(kind).encoding != format::StoredEncoding::Npy)
    throw ArgumentError("dataset '" + dir_ + "': blob kind '" + std::string(kind) +
                        "' is not stored as .npy arrays");
  const BlobRef r = blob_ref(i, kind);
  const auto bytes = blob(i, kind);
  format::NpyBlob a;
  try {
    a = format::parse_npy_blob(bytes);
  } catch (const ParseError& e) {
    throw DataError("dataset '" + dir_ + "': sample " + std::to_string(i) + " " +
                    std::string(kind) + ": " + e.what());
  }
  if (a.shape[0] != r.height || a.shape[1] != r.width)
    throw DataError("dataset '" + dir_ + "': sample " + std::to_string(i) + " " +
                    std::string(kind) + ": the array is " + std::to_string(a.shape[1]) + "x" +
                    std::to_string(a.shape[0]) + " but the annotation file says " +
                    std::to_string(r.width) + "x" + std::to_string(r.height));
  TensorView v;
  v.dtype = a.dtype;
  v.shape.ndim = a.shape.size();
  std::copy(a.shape.begin(), a.shape.end(), v.shape.dims.begin());
  v.bytes = a.data;
  return v;
}

Pixels Dataset::decode_dense(size_t i, std::string_view kind) const {
  if (blob_state(kind).encoding == format::StoredEncoding::Npy) {
    const TensorView v = dense_array(i, kind);
    Pixels p;
    p.height = static_cast<int>(v.shape[0]);
    p.width = static_cast<int>(v.shape[1]);
    p.channels = v.shape.ndim == 3 ? static_cast<int>(v.shape[2]) : 1;
    p.dtype = v.dtype;
    p.data.assign(v.bytes.begin(), v.bytes.end());
    return p;
  }
  const auto bytes = blob(i, kind);
  cv::Mat m;
  try {
    m = tarmac::decode_dense(bytes, kMaxDecodePixels);
  } catch (const ParseError& e) {
    throw DataError("dataset '" + dir_ + "': sample " + std::to_string(i) + " " +
                    std::string(kind) + ": " + e.what());
  }
  if (m.depth() != CV_8U && m.depth() != CV_16U)
    throw DataError("dataset '" + dir_ + "': sample " + std::to_string(i) + " " +
                    std::string(kind) + ": unsupported pixel depth");
  if (m.channels() == 3) cv::cvtColor(m, m, cv::COLOR_BGR2RGB);
  if (m.channels() == 4) cv::cvtColor(m, m, cv::COLOR_BGRA2RGBA);
  Pixels p;
  p.width = m.cols;
  p.height = m.rows;
  p.channels = m.channels();
  p.dtype = m.depth() == CV_16U ? DType::U16 : DType::U8;
  const size_t row = size_t(m.cols) * m.elemSize();
  p.data.resize(row * size_t(m.rows));
  for (int y = 0; y < m.rows; ++y) std::memcpy(p.data.data() + row * size_t(y), m.ptr(y), row);
  return p;
}

}  // namespace tarmac
