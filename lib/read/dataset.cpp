#include "read/dataset.h"

#include <turbojpeg.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <unordered_map>

#include "read/mapped_file.h"
#include "read/safetensors_file.h"
#include "transform/image_codec.h"

static_assert(std::endian::native == std::endian::little,
              "tarmac's reader casts little-endian file bytes in place");

namespace tarmac {
namespace fs = std::filesystem;
namespace {

// Decoding at read time refuses images larger than this many pixels (1 gigapixel).
constexpr uint64_t kMaxDecodePixels = uint64_t{1} << 30;

[[noreturn]] void bad_file(const std::string& reason) {
  throw ParseError("labels.safetensors: " + reason);
}

std::string shape_text(std::span<const int64_t> s) {
  std::string out = "[";
  for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + std::to_string(s[k]);
  return out + "]";
}

struct TjHandle {
  tjhandle h = tjInitDecompress();
  ~TjHandle() { tjDestroy(h); }
};

tjhandle decompressor() {
  thread_local TjHandle t;
  return t.h;
}

// Copies a decoded BGR (or grey/BGRA) 8-bit picture into `out` as RGB of width x height,
// resizing when allowed.
void store_rgb(const cv::Mat& bgr, std::span<uint8_t> out, int width, int height, bool resize,
               size_t i) {
  cv::Mat dst(height, width, CV_8UC3, out.data());
  if (bgr.cols == width && bgr.rows == height) {
    cv::cvtColor(bgr, dst, cv::COLOR_BGR2RGB);
    return;
  }
  if (!resize)
    throw DataError("sample " + std::to_string(i) + ": image is " + std::to_string(bgr.cols) + "x" +
                    std::to_string(bgr.rows) + ", the batch wants " + std::to_string(width) + "x" +
                    std::to_string(height) + " (enable resizing or use a fixed --size)");
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
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

struct Dataset::State {
  std::map<std::string, std::string> metadata;
  std::unordered_map<std::string, Tensor> tensors;
  struct Blob {
    const Tensor *shard, *offset, *size, *crc32, *width, *height;
  };
  std::unordered_map<std::string, Blob> blobs;
  const Tensor* key_values = nullptr;
  const Tensor* key_offsets = nullptr;
  const Tensor* affine = nullptr;
};

Dataset::~Dataset() = default;
Dataset::Dataset(Dataset&&) noexcept = default;
Dataset& Dataset::operator=(Dataset&&) noexcept = default;

Dataset::Dataset(const std::string& dir) : dir_(dir), st_(std::make_unique<State>()) {
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw FatalError("'" + dir + "' is not a directory");
  const fs::path labels = root / "labels.safetensors";
  if (!fs::exists(labels, ec))
    throw FatalError(
        "'" + dir + "' is not a tarmac dataset: no labels.safetensors" +
        (fs::exists(root / ".tarmac-partial", ec) ? " (a conversion into it did not finish)" : ""));
  labels_ = std::make_unique<MappedFile>(labels.string());
  const auto file = labels_->bytes();
  SafetensorsHeader h = parse_safetensors(file);
  st_->metadata = std::move(h.metadata);
  for (const TensorInfo& t : h.tensors) {
    if (t.shape.size() > kMaxDims)
      bad_file("tensor '" + t.name + "' has " + std::to_string(t.shape.size()) +
               " dimensions, more than the " + std::to_string(kMaxDims) + " tarmac reads");
    if (t.begin % dtype_size(t.dtype) != 0)
      bad_file("tensor '" + t.name + "' is not aligned to its element size");
    Tensor x;
    x.name = t.name;
    x.dtype = t.dtype;
    x.shape.ndim = t.shape.size();
    std::copy(t.shape.begin(), t.shape.end(), x.shape.dims.begin());
    x.data = file.data() + t.begin;
    x.bytes = t.end - t.begin;
    st_->tensors.emplace(t.name, std::move(x));
  }

  auto meta = [&](const char* k) -> const std::string& {
    auto it = st_->metadata.find(k);
    if (it == st_->metadata.end()) bad_file(std::string("no '") + k + "' metadata entry");
    return it->second;
  };
  if (meta("format") != "tarmac/1")
    bad_file("format is '" + meta("format") + "', this reader reads 'tarmac/1'");
  const std::string& ns = meta("num_samples");
  if (ns.empty() || ns.size() > 18 || ns.find_first_not_of("0123456789") != std::string::npos)
    bad_file("num_samples '" + ns + "' is not a decimal count");
  n_ = static_cast<size_t>(std::stoull(ns));
  const auto n = static_cast<int64_t>(n_);

  // Every tensor later accesses index is checked here for presence, dtype and shape.
  auto require = [&](const std::string& name, DType dtype, std::vector<int64_t> shape_prefix,
                     size_t ndim) -> const Tensor* {
    auto it = st_->tensors.find(name);
    if (it == st_->tensors.end()) bad_file("required tensor '" + name + "' is missing");
    const Tensor& t = it->second;
    if (t.dtype != dtype)
      bad_file("tensor '" + name + "' has dtype " + std::string(dtype_name(t.dtype)) +
               ", expected " + std::string(dtype_name(dtype)));
    bool ok = t.shape.ndim == ndim;
    for (size_t k = 0; ok && k < shape_prefix.size(); ++k) ok = t.shape[k] == shape_prefix[k];
    if (!ok)
      bad_file("tensor '" + name + "' has shape " + shape_text(t.shape.span()) + ", expected " +
               shape_text(shape_prefix) + (ndim > shape_prefix.size() ? " + more dims" : "") +
               " for " + std::to_string(n) + " samples");
    return &t;
  };
  st_->key_values = require("__key__.values", DType::U8, {}, 1);
  st_->key_offsets = require("__key__.offsets", DType::I64, {n + 1}, 1);

  try {
    const auto blobs = nlohmann::json::parse(meta("blobs"));
    const auto shards = nlohmann::json::parse(meta("shards"));
    if (!blobs.is_array() || !shards.is_array())
      bad_file("'blobs' and 'shards' metadata must be arrays");
    for (const auto& b : blobs) blob_kinds_.push_back(b.get<std::string>());
    for (const auto& s : shards) shard_names_.push_back(s.get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    bad_file(std::string("'blobs' or 'shards' metadata is not a JSON array of strings: ") +
             e.what());
  }
  for (const std::string& kind : blob_kinds_) {
    State::Blob b{};
    b.shard = require(kind + ".shard", DType::I32, {n}, 1);
    b.offset = require(kind + ".offset", DType::I64, {n}, 1);
    b.size = require(kind + ".size", DType::I64, {n}, 1);
    b.crc32 = require(kind + ".crc32", DType::U32, {n}, 1);
    b.width = require(kind + ".width", DType::I32, {n}, 1);
    b.height = require(kind + ".height", DType::I32, {n}, 1);
    st_->blobs.emplace(kind, b);
  }
  if (has_images()) {
    if (blob_kinds_.front() != "__image__") bad_file("the first blob kind must be '__image__'");
    st_->affine = require("__affine__", DType::F64, {n, 2, 3}, 3);
    affine_field_ = {"__affine__", FieldKind::Numeric, DType::F64, false, {2, 3}, "", 48};
  }

  try {
    const auto schema = nlohmann::ordered_json::parse(meta("schema"));
    if (!schema.is_object()) bad_file("'schema' metadata is not a JSON object");
    for (const auto& [name, f] : schema.items()) {
      FieldInfo fi;
      fi.name = name;
      const std::string kind = f.at("kind").get<std::string>();
      fi.kind = kind == "string" ? FieldKind::String
                : kind == "json" ? FieldKind::Json
                                 : FieldKind::Numeric;
      if (kind != "numeric" && kind != "string" && kind != "json")
        bad_file("field '" + name + "' has unknown kind '" + kind + "'");
      const auto dt = dtype_from_name(f.at("dtype").get<std::string>());
      if (!dt) bad_file("field '" + name + "' has unknown dtype " + f.at("dtype").dump());
      fi.dtype = *dt;
      fi.ragged = f.at("ragged").get<bool>();
      fi.sample_shape = f.at("shape").get<std::vector<int64_t>>();
      fi.source = f.value("source", "");
      if (fi.sample_shape.size() + 1 > kMaxDims)
        bad_file("field '" + name + "' has too many dimensions");
      if (fi.kind != FieldKind::Numeric && (!fi.ragged || fi.dtype != DType::U8))
        bad_file("field '" + name + "' of kind " + kind + " must be ragged U8");
      for (size_t k = fi.ragged ? 1 : 0; k < fi.sample_shape.size(); ++k)
        if (fi.sample_shape[k] < 0) bad_file("field '" + name + "' has a negative dimension");
      if (fi.ragged) {
        if (fi.sample_shape.empty()) bad_file("ragged field '" + name + "' has an empty shape");
        std::vector<int64_t> inner(fi.sample_shape.begin() + 1, fi.sample_shape.end());
        const Tensor* v = require(name + ".values", fi.dtype, {}, fi.sample_shape.size());
        for (size_t k = 0; k < inner.size(); ++k)
          if (v->shape[k + 1] != inner[k])
            bad_file("tensor '" + name + ".values' has shape " + shape_text(v->shape.span()) +
                     ", the schema says [*, " + shape_text(inner).substr(1));
        require(name + ".offsets", DType::I64, {n + 1}, 1);
      } else {
        std::vector<int64_t> full{n};
        full.insert(full.end(), fi.sample_shape.begin(), fi.sample_shape.end());
        require(name, fi.dtype, full, full.size());
        fi.sample_bytes = dtype_size(fi.dtype);
        for (int64_t d : fi.sample_shape) fi.sample_bytes *= static_cast<uint64_t>(d);
      }
      fields_.push_back(std::move(fi));
    }
  } catch (const nlohmann::json::exception& e) {
    bad_file(std::string("'schema' metadata is malformed: ") + e.what());
  }

  shards_.reserve(shard_names_.size());
  for (const std::string& s : shard_names_) {
    if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
      bad_file("shard name '" + s + "' is not a plain file name");
    if (!fs::exists(root / s, ec))
      throw FatalError("dataset '" + dir + "' is incomplete: shard '" + s + "' is missing");
    shards_.emplace_back((root / s).string());
  }
}

const std::map<std::string, std::string>& Dataset::metadata() const {
  return st_->metadata;
}

const FieldInfo* Dataset::find_field(std::string_view name) const {
  for (const FieldInfo& f : fields_)
    if (f.name == name) return &f;
  if (has_images() && name == "__affine__") return &affine_field_;
  return nullptr;
}

const Dataset::Tensor* Dataset::find_tensor(std::string_view name) const {
  auto it = st_->tensors.find(std::string(name));
  return it == st_->tensors.end() ? nullptr : &it->second;
}

const Dataset::Tensor& Dataset::tensor(std::string_view name) const {
  const Tensor* t = find_tensor(name);
  if (!t)
    throw std::invalid_argument("dataset '" + dir_ + "' has no field or tensor '" +
                                std::string(name) + "'");
  return *t;
}

void Dataset::check_index(size_t i) const {
  if (i >= n_)
    throw std::out_of_range("sample index " + std::to_string(i) + " is out of range for " +
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
  const auto [b, e] = ragged_range(*st_->key_offsets, st_->key_values->shape[0], i, "__key__");
  return {reinterpret_cast<const char*>(st_->key_values->data) + b, static_cast<size_t>(e - b)};
}

TensorView Dataset::value(std::string_view name, size_t i) const {
  const FieldInfo* f = find_field(name);
  if (!f)
    throw std::invalid_argument("dataset '" + dir_ + "' has no field '" + std::string(name) + "'");
  check_index(i);
  if (!f->ragged) {
    TensorView v = tensor(name).view();
    v.shape.ndim -= 1;
    std::copy(v.shape.dims.begin() + 1, v.shape.dims.end(), v.shape.dims.begin());
    v.bytes = v.bytes.subspan(i * f->sample_bytes, f->sample_bytes);
    return v;
  }
  const std::string n(name);
  const Tensor& values = tensor(n + ".values");
  const auto [b, e] = ragged_range(tensor(n + ".offsets"), values.shape[0], i, name);
  TensorView v = values.view();
  const uint64_t row = values.shape[0] ? values.bytes / static_cast<uint64_t>(values.shape[0]) : 0;
  v.shape.dims[0] = e - b;
  v.bytes = v.bytes.subspan(static_cast<size_t>(b) * row, static_cast<size_t>(e - b) * row);
  return v;
}

Column Dataset::column(std::string_view name) const {
  const FieldInfo* f = find_field(name);
  if (f && f->ragged) {
    const std::string n(name);
    const Tensor& off = tensor(n + ".offsets");
    return {tensor(n + ".values").view(),
            {reinterpret_cast<const int64_t*>(off.data), static_cast<size_t>(off.shape[0])}};
  }
  return {tensor(name).view(), {}};
}

std::span<const double, 6> Dataset::affine(size_t i) const {
  if (!st_->affine)
    throw std::invalid_argument("dataset '" + dir_ + "' has no images, hence no affine");
  check_index(i);
  return std::span<const double, 6>(reinterpret_cast<const double*>(st_->affine->data) + 6 * i, 6);
}

BlobRef Dataset::blob_ref(size_t i, std::string_view kind) const {
  auto it = st_->blobs.find(std::string(kind));
  if (it == st_->blobs.end())
    throw std::invalid_argument("dataset '" + dir_ + "' stores no blob kind '" + std::string(kind) +
                                "'");
  check_index(i);
  const State::Blob& b = it->second;
  BlobRef r{scalar<int32_t>(*b.shard, i), scalar<int64_t>(*b.offset, i),
            scalar<int64_t>(*b.size, i),  scalar<uint32_t>(*b.crc32, i),
            scalar<int32_t>(*b.width, i), scalar<int32_t>(*b.height, i)};
  auto where = [&] {
    return "dataset '" + dir_ + "': sample " + std::to_string(i) + " " + std::string(kind);
  };
  if (r.shard < 0 || static_cast<size_t>(r.shard) >= shards_.size())
    throw DataError(where() + " names shard " + std::to_string(r.shard) + " of " +
                    std::to_string(shards_.size()));
  const uint64_t shard_size = shards_[static_cast<size_t>(r.shard)].bytes().size();
  if (r.offset < 0 || r.size < 0 || static_cast<uint64_t>(r.offset) > shard_size ||
      static_cast<uint64_t>(r.size) > shard_size - static_cast<uint64_t>(r.offset))
    throw DataError(where() + " lies at bytes " + std::to_string(r.offset) + "+" +
                    std::to_string(r.size) + ", beyond shard '" +
                    shard_names_[static_cast<size_t>(r.shard)] + "' of " +
                    std::to_string(shard_size) + " bytes");
  return r;
}

std::span<const uint8_t> Dataset::shard_bytes(size_t k) const {
  return shards_.at(k).bytes();
}

std::span<const uint8_t> Dataset::blob(size_t i, std::string_view kind) const {
  const BlobRef r = blob_ref(i, kind);
  return shards_[static_cast<size_t>(r.shard)].bytes().subspan(static_cast<size_t>(r.offset),
                                                               static_cast<size_t>(r.size));
}

BlobEncoding Dataset::encoding(size_t i, std::string_view kind) const {
  const BlobRef r = blob_ref(i, kind);
  const auto shard = shards_[static_cast<size_t>(r.shard)].bytes();
  // The member's ustar header sits in the 512 bytes before the data; its name (or pax
  // fallback name) ends with the extension. Raw pixels have no magic bytes to sniff.
  if (r.offset >= 512) {
    const uint8_t* hdr = shard.data() + r.offset - 512;
    if (std::memcmp(hdr + 257, "ustar", 5) == 0) {
      const std::string_view name(reinterpret_cast<const char*>(hdr),
                                  strnlen(reinterpret_cast<const char*>(hdr), 100));
      if (name.ends_with(".rgb")) return BlobEncoding::Raw;
    }
  }
  const auto d = shard.subspan(static_cast<size_t>(r.offset), static_cast<size_t>(r.size));
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
  if (r.width > 0 && r.height > 0 && uint64_t(r.size) == uint64_t(r.width) * uint64_t(r.height) * 3)
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

void Dataset::decode_into(size_t i, std::span<uint8_t> out, int width, int height,
                          bool resize) const {
  if (width <= 0 || height <= 0 || out.size() != size_t(width) * size_t(height) * 3)
    throw std::invalid_argument("decode_into: the buffer must hold height*width*3 bytes");
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
    if (r.width == width && r.height == height) {
      std::memcpy(out.data(), bytes.data(), out.size());
      return;
    }
    cv::Mat rgb(r.height, r.width, CV_8UC3, const_cast<uint8_t*>(bytes.data()));
    cv::Mat bgr;
    cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
    store_rgb(bgr, out, width, height, resize, i);
    return;
  }
  try {
    if (enc == BlobEncoding::Jpeg) {
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
    store_rgb(decode_image(bytes, kMaxDecodePixels), out, width, height, resize, i);
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
  p.channels = 3;
  p.data.resize(size_t(w) * size_t(h) * 3);
  decode_into(i, p.data, w, h, false);
  return p;
}

Pixels Dataset::decode_dense(size_t i, std::string_view kind) const {
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
