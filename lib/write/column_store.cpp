#include "write/column_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "common/error.h"
#include "write/file_util.h"

namespace tarmac {
namespace {

constexpr size_t kBufferSize = 1 << 20;

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
  if (::fdatasync(fd_) != 0) throw_io_error("cannot fsync", path_, errno);
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
    if (n < 0)
      throw_io_error("cannot write " + std::to_string(buffer_.size() - done) + " bytes to", path_,
                     errno);
    done += static_cast<size_t>(n);
  }
  flushed_ += buffer_.size();
  buffer_.clear();
}

void SpillColumn::append(DType dtype, std::span<const int64_t> shape,
                         std::span<const uint8_t> bytes) {
  store<uint8_t>(buffer_, static_cast<uint8_t>(dtype));
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
    throw_io_error("cannot close", path_, errno);
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
  /// Next record; false at the end.
  bool next(DType& dtype, std::vector<int64_t>& shape, std::vector<uint8_t>& bytes) {
    uint8_t head[2];
    if (!read_exact(head, 2, true)) return false;
    dtype = static_cast<DType>(head[0]);
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

}  // namespace

// Streams every record's elements, converted to `to`, to the sink: the values of a column.
static std::function<void(ByteSink&)> values_filler(std::string path, DType to) {
  return [path = std::move(path), to](ByteSink& sink) {
    SpillReader r(path);
    DType dt;
    std::vector<int64_t> s;
    std::vector<uint8_t> bytes, converted;
    while (r.next(dt, s, bytes)) {
      converted.clear();
      convert_elements(dt, bytes.data(), bytes.size() / dtype_size(dt), to, converted);
      sink.write(converted);
    }
  };
}

TensorSpec SpillColumn::fixed_tensor(DType to, std::vector<int64_t> sample_shape,
                                     uint64_t n) const {
  std::vector<int64_t> shape{static_cast<int64_t>(n)};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  return {name_, to, shape, values_filler(path_, to)};
}

std::vector<TensorSpec> SpillColumn::ragged_tensors(DType to, std::vector<int64_t> inner,
                                                    uint64_t total_first_axis, uint64_t n) const {
  std::vector<int64_t> vshape{static_cast<int64_t>(total_first_axis)};
  vshape.insert(vshape.end(), inner.begin(), inner.end());
  std::string path = path_;
  TensorSpec values{name_ + ".values", to, vshape, values_filler(path_, to)};
  TensorSpec offsets{
      name_ + ".offsets", DType::I64, {static_cast<int64_t>(n + 1)}, [path](ByteSink& sink) {
        SpillReader r(path);
        DType dt;
        std::vector<int64_t> s;
        std::vector<uint8_t> bytes;
        int64_t at = 0;
        std::vector<uint8_t> out;
        store(out, at);
        while (r.next(dt, s, bytes)) {
          at += s.empty() ? 1 : s[0];
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

}  // namespace tarmac
