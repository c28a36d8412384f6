#include "write/column_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/error.h"
#include "format/names.h"
#include "write/file_util.h"

namespace tarmac {
namespace {

constexpr size_t kBufferSize = 1 << 20;
// A record's tag: dtype | kind << kKindShift, or kMissingTag for a sample without a value.
constexpr int kKindShift = 5;
constexpr uint8_t kMissingTag = 0xFF;
static_assert(static_cast<int>(DType::F64) < (1 << kKindShift));

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? std::nanf("") : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Element i of a buffer as a double (floats) or int64 (integers); `is_float` says which.
void read_element(DType t, const uint8_t* p, double& d, int64_t& i, uint64_t& u, bool& is_float,
                  bool& is_unsigned) {
  is_float = false;
  is_unsigned = false;
  switch (t) {
    case DType::BOOL:
      i = load<uint8_t>(p) != 0;
      break;
    case DType::U8:
      i = load<uint8_t>(p);
      break;
    case DType::I8:
      i = load<int8_t>(p);  // NOLINT(bugprone-signed-char-misuse): I8 is signed
      break;
    case DType::U16:
      i = load<uint16_t>(p);
      break;
    case DType::I16:
      i = load<int16_t>(p);
      break;
    case DType::U32:
      i = load<uint32_t>(p);
      break;
    case DType::I32:
      i = load<int32_t>(p);
      break;
    case DType::U64:
      u = load<uint64_t>(p);
      is_unsigned = true;
      break;
    case DType::I64:
      i = load<int64_t>(p);
      break;
    case DType::F16:
      d = half_to_float(load<uint16_t>(p));
      is_float = true;
      break;
    case DType::BF16: {
      const uint32_t bits = uint32_t{load<uint16_t>(p)} << 16;
      d = load<float>(reinterpret_cast<const uint8_t*>(&bits));
      is_float = true;
      break;
    }
    case DType::F32:
      d = load<float>(p);
      is_float = true;
      break;
    case DType::F64:
      d = load<double>(p);
      is_float = true;
      break;
  }
}

template <typename T>
void store(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

}  // namespace

void convert_elements(DType from, const uint8_t* src, uint64_t count, DType to,
                      std::vector<uint8_t>& out) {
  const size_t fs = dtype_size(from);
  if (from == to) {
    out.insert(out.end(), src, src + count * fs);
    return;
  }
  out.reserve(out.size() + count * dtype_size(to));
  for (uint64_t k = 0; k < count; ++k) {
    double d = 0;
    int64_t i = 0;
    uint64_t u = 0;
    bool is_float, is_unsigned;
    read_element(from, src + k * fs, d, i, u, is_float, is_unsigned);
    if (is_float) {
      i = static_cast<int64_t>(d);
      u = static_cast<uint64_t>(i);
    } else if (is_unsigned) {
      d = static_cast<double>(u);
      i = static_cast<int64_t>(u);
    } else {
      d = static_cast<double>(i);
      u = static_cast<uint64_t>(i);
    }
    switch (to) {
      case DType::BOOL:
        store<uint8_t>(out, is_float ? d != 0 : i != 0);
        break;
      case DType::U8:
        store(out, static_cast<uint8_t>(i));
        break;
      case DType::I8:
        store(out, static_cast<int8_t>(i));
        break;
      case DType::U16:
        store(out, static_cast<uint16_t>(i));
        break;
      case DType::I16:
        store(out, static_cast<int16_t>(i));
        break;
      case DType::U32:
        store(out, static_cast<uint32_t>(i));
        break;
      case DType::I32:
        store(out, static_cast<int32_t>(i));
        break;
      case DType::U64:
        store(out, u);
        break;
      case DType::I64:
        store(out, i);
        break;
      case DType::F32:
        store(out, static_cast<float>(d));
        break;
      case DType::F64:
        store(out, d);
        break;
      case DType::F16:
      case DType::BF16:
        throw std::logic_error("conversion to F16/BF16 is never needed by the schema rules");
    }
  }
}

SpillColumn::SpillColumn(std::string name, std::string path)
    : name_(std::move(name)), path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io_error("cannot create column spill file", path_, errno);
  buffer_.reserve(kBufferSize);
}

SpillColumn::SpillColumn(std::string name, std::string path, Mark at)
    : name_(std::move(name)), path_(std::move(path)), count_(at.count), flushed_(at.bytes) {
  fd_ = reopen_cut_back(path_, at.bytes);
  buffer_.reserve(kBufferSize);
}

SpillColumn::Mark SpillColumn::checkpoint() {
  flush();
  if (::fdatasync(fd_) != 0) throw_write_error("cannot fsync", path_, errno);
  return {flushed_, count_};
}

SpillColumn::~SpillColumn() {
  if (fd_ >= 0) ::close(fd_);
}

void SpillColumn::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)  // write(2) of a regular file returns 0 only when no byte fits
      throw_write_error("cannot write " + std::to_string(buffer_.size() - done) + " bytes to",
                        path_, n < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(n);
  }
  flushed_ += buffer_.size();
  buffer_.clear();
}

void SpillColumn::append_missing() {
  store<uint8_t>(buffer_, kMissingTag);
  store<uint8_t>(buffer_, 0);
  store<uint64_t>(buffer_, 0);
  if (buffer_.size() >= kBufferSize) flush();
  ++count_;
}

void SpillColumn::append(DType dtype, std::span<const int64_t> shape,
                         std::span<const uint8_t> bytes, FieldKind kind) {
  store<uint8_t>(buffer_, static_cast<uint8_t>(static_cast<uint8_t>(dtype) |
                                               (static_cast<uint8_t>(kind) << kKindShift)));
  store<uint8_t>(buffer_, static_cast<uint8_t>(shape.size()));
  for (int64_t d : shape) store(buffer_, d);
  store<uint64_t>(buffer_, bytes.size());
  if (buffer_.size() + bytes.size() > kBufferSize) flush();
  if (bytes.size() >= kBufferSize) {
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
    flush();
  } else {
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
  }
  ++count_;
}

void SpillColumn::close() {
  if (fd_ < 0) return;
  flush();
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw_write_error("cannot close", path_, errno);
  }
  fd_ = -1;
}

namespace {

// Reads a spill file record by record.
class SpillReader {
 public:
  explicit SpillReader(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_io_error("cannot open column spill file", path, errno);
  }
  ~SpillReader() { ::close(fd_); }
  /// Next record; false at the end. `missing`: a sample without a value (no shape, no bytes).
  bool next(DType& dtype, std::vector<int64_t>& shape, std::vector<uint8_t>& bytes,
            bool* missing = nullptr, FieldKind* kind = nullptr) {
    uint8_t head[2];
    if (!read_exact(head, 2, true)) return false;
    const bool none = head[0] == kMissingTag;
    if (missing) *missing = none;
    dtype = none ? DType::U8 : static_cast<DType>(head[0] & ((1 << kKindShift) - 1));
    if (kind) *kind = none ? FieldKind::Numeric : static_cast<FieldKind>(head[0] >> kKindShift);
    shape.resize(head[1]);
    for (auto& d : shape) read_exact(reinterpret_cast<uint8_t*>(&d), 8, false);
    uint64_t n;
    read_exact(reinterpret_cast<uint8_t*>(&n), 8, false);
    bytes.resize(n);
    read_exact(bytes.data(), n, false);
    return true;
  }

 private:
  bool read_exact(uint8_t* p, uint64_t n, bool eof_ok) {
    while (n > 0) {
      if (pos_ == len_) {
        ssize_t r = ::read(fd_, buf_.data(), buf_.size());
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) throw_io_error("cannot read column spill file", path_, errno);
        if (r == 0) {
          if (eof_ok) return false;
          throw FatalError("column spill file '" + path_ + "' is truncated");
        }
        pos_ = 0;
        len_ = static_cast<size_t>(r);
      }
      const size_t take = std::min<uint64_t>(n, len_ - pos_);
      std::memcpy(p, buf_.data() + pos_, take);
      pos_ += take;
      p += take;
      n -= take;
      eof_ok = false;
    }
    return true;
  }
  std::string path_;
  int fd_;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(kBufferSize);
  size_t pos_ = 0, len_ = 0;
};

// A numeric record's elements as JSON values nested by its shape.
nlohmann::json numeric_json(DType dt, const std::vector<int64_t>& shape,
                            const std::vector<uint8_t>& bytes) {
  const uint64_t count = bytes.size() / dtype_size(dt);
  std::vector<uint8_t> conv;
  const DType as = dt == DType::BOOL ? DType::BOOL : dtype_is_float(dt) ? DType::F64 : DType::I64;
  convert_elements(dt, bytes.data(), count, as, conv);
  uint64_t at = 0;
  std::function<nlohmann::json(size_t)> build = [&](size_t dim) -> nlohmann::json {
    if (dim == shape.size()) {
      const uint8_t* p = conv.data() + at * dtype_size(as);
      ++at;
      if (as == DType::BOOL) return *p != 0;
      if (as == DType::I64) return load<int64_t>(p);
      const double d = load<double>(p);
      return std::isfinite(d) ? nlohmann::json(d) : nlohmann::json(nullptr);
    }
    nlohmann::json a = nlohmann::json::array();
    for (int64_t k = 0; k < shape[dim]; ++k) a.push_back(build(dim + 1));
    return a;
  };
  return build(0);
}

// One record's value as the JSON text a column of JSON text stores.
void append_json_text(FieldKind kind, DType dt, const std::vector<int64_t>& shape,
                      const std::vector<uint8_t>& bytes, std::vector<uint8_t>& out) {
  if (kind == FieldKind::Json) {
    out.insert(out.end(), bytes.begin(), bytes.end());
    return;
  }
  const std::string text = kind == FieldKind::String
                               ? nlohmann::json(std::string(bytes.begin(), bytes.end()))
                                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                               : numeric_json(dt, shape, bytes).dump();
  out.insert(out.end(), text.begin(), text.end());
}

}  // namespace

// Streams every record's elements, converted to `to`, to the sink: the values of a column.
// A record without a value adds `missing_bytes` zero bytes (a fixed column's zeros) or nothing.
static std::function<void(ByteSink&)> values_filler(std::string path, DType to,
                                                    uint64_t missing_bytes, bool as_json) {
  return [path = std::move(path), to, missing_bytes, as_json](ByteSink& sink) {
    SpillReader r(path);
    DType dt;
    std::vector<int64_t> s;
    std::vector<uint8_t> bytes, converted;
    bool missing;
    FieldKind kind;
    while (r.next(dt, s, bytes, &missing, &kind)) {
      converted.clear();
      if (missing)
        converted.assign(missing_bytes, 0);
      else if (as_json)
        append_json_text(kind, dt, s, bytes, converted);
      else
        convert_elements(dt, bytes.data(), bytes.size() / dtype_size(dt), to, converted);
      sink.write(converted);
    }
  };
}

TensorSpec SpillColumn::fixed_tensor(DType to, std::vector<int64_t> sample_shape,
                                     uint64_t n) const {
  std::vector<int64_t> shape{static_cast<int64_t>(n)};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  uint64_t elements = 1;
  for (int64_t d : sample_shape) elements *= static_cast<uint64_t>(d);
  return {name_, to, shape, values_filler(path_, to, elements * dtype_size(to), false)};
}

std::vector<TensorSpec> SpillColumn::ragged_tensors(DType to, std::vector<int64_t> inner,
                                                    uint64_t total_first_axis, uint64_t n,
                                                    bool as_json) const {
  std::vector<int64_t> vshape{static_cast<int64_t>(total_first_axis)};
  vshape.insert(vshape.end(), inner.begin(), inner.end());
  std::string path = path_;
  TensorSpec values{name_ + ".values", as_json ? DType::U8 : to, vshape,
                    values_filler(path_, to, 0, as_json)};
  TensorSpec offsets{name_ + ".offsets",
                     DType::I64,
                     {static_cast<int64_t>(n + 1)},
                     [path, as_json](ByteSink& sink) {
                       SpillReader r(path);
                       DType dt;
                       std::vector<int64_t> s;
                       std::vector<uint8_t> bytes, text;
                       bool missing;
                       FieldKind kind;
                       int64_t at = 0;
                       std::vector<uint8_t> out;
                       store(out, at);
                       while (r.next(dt, s, bytes, &missing, &kind)) {
                         if (missing) {
                           // no rows
                         } else if (as_json) {
                           text.clear();
                           append_json_text(kind, dt, s, bytes, text);
                           at += static_cast<int64_t>(text.size());
                         } else {
                           at += s.empty() ? 1 : s[0];
                         }
                         store(out, at);
                         if (out.size() >= kBufferSize) {
                           sink.write(out);
                           out.clear();
                         }
                       }
                       sink.write(out);
                     }};
  return {values, offsets};
}

TensorSpec SpillColumn::valid_tensor(uint64_t n) const {
  return {format::valid_tensor(name_),
          DType::BOOL,
          {static_cast<int64_t>(n)},
          [path = path_](ByteSink& sink) {
            SpillReader r(path);
            DType dt;
            std::vector<int64_t> s;
            std::vector<uint8_t> bytes, out;
            bool missing;
            while (r.next(dt, s, bytes, &missing)) {
              out.push_back(missing ? 0 : 1);
              if (out.size() >= kBufferSize) {
                sink.write(out);
                out.clear();
              }
            }
            sink.write(out);
          }};
}

uint64_t SpillColumn::json_text_bytes() const {
  SpillReader r(path_);
  DType dt;
  std::vector<int64_t> s;
  std::vector<uint8_t> bytes, text;
  bool missing;
  FieldKind kind;
  uint64_t total = 0;
  while (r.next(dt, s, bytes, &missing, &kind)) {
    if (missing) continue;
    text.clear();
    append_json_text(kind, dt, s, bytes, text);
    total += text.size();
  }
  return total;
}

}  // namespace tarmac
