#include "write/column_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

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
        throw InternalError("conversion to F16/BF16 is never needed by the schema rules");
    }
  }
}

namespace {

// A chunk's header: column (u32), records (u32), bytes (u64).
constexpr size_t kChunkHeader = 16;

// write(2) of all of `data`, retrying partial writes and EINTR.
void write_fully(int fd, const std::string& path, std::span<const uint8_t> data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)  // write(2) of a regular file returns 0 only when no byte fits
      throw_write_error("cannot write " + std::to_string(data.size() - done) + " bytes to", path,
                        n < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(n);
  }
}

// pread(2) of exactly `n` bytes at `at`.
void pread_fully(int fd, const std::string& path, uint8_t* p, uint64_t n, uint64_t at) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(at));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_io_error("cannot read column spill file", path, errno);
    if (r == 0) throw FatalError("column spill file '" + path + "' is truncated");
    p += r;
    at += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
}

int open_for_reading(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_io_error("cannot open column spill file", path, errno);
  return fd;
}

}  // namespace

ColumnStore::ColumnStore(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io_error("cannot create column spill file", path_, errno);
}

ColumnStore::ColumnStore(std::string path, uint64_t bytes)
    : path_(std::move(path)), length_(bytes) {
  find_chunks(bytes);  // before anything is cut: a file that does not match stays as it is
  fd_ = reopen_cut_back(path_, bytes);
}

ColumnStore::~ColumnStore() {
  if (fd_ >= 0) ::close(fd_);
  if (read_fd_ >= 0) ::close(read_fd_);
}

void ColumnStore::find_chunks(uint64_t bytes) {
  const int fd = open_for_reading(path_);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_io_error("cannot stat column spill file", path_, errno);
  if (static_cast<uint64_t>(st.st_size) < bytes)
    throw FatalError("cannot resume writing '" + path_ + "': it holds " +
                     std::to_string(st.st_size) + " bytes, fewer than the " +
                     std::to_string(bytes) + " its checkpoint recorded");
  // Headers are read through a window of the file, so that small chunks cost no read each.
  std::vector<uint8_t> window(std::min<uint64_t>(kChunkBytes, bytes));
  uint64_t window_at = 0, window_len = 0;
  uint64_t at = 0;
  while (at < bytes) {
    if (bytes - at < kChunkHeader)
      throw FatalError("column spill file '" + path_ + "' ends inside a chunk header at byte " +
                       std::to_string(at));
    if (at < window_at || at + kChunkHeader > window_at + window_len) {
      window_len = std::min<uint64_t>(window.size(), bytes - at);
      pread_fully(fd, path_, window.data(), window_len, at);
      window_at = at;
    }
    const uint8_t* h = window.data() + (at - window_at);
    const uint32_t column = load<uint32_t>(h);
    const uint32_t records = load<uint32_t>(h + 4);
    const uint64_t n = load<uint64_t>(h + 8);
    at += kChunkHeader;
    if (n > bytes - at)
      throw FatalError("column spill file '" + path_ + "': the chunk at byte " +
                       std::to_string(at - kChunkHeader) + " runs past its checkpointed end");
    Found& f = found_[column];
    f.chunks.push_back({at, n});
    f.records += records;
    at += n;
  }
}

SpillColumn& ColumnStore::add(std::string name) {
  if (columns_.size() >= UINT32_MAX) throw FatalError("more than 2^32 - 1 label columns");
  const auto id = static_cast<uint32_t>(columns_.size());
  columns_.push_back(std::unique_ptr<SpillColumn>(new SpillColumn(*this, id, std::move(name))));
  SpillColumn& c = *columns_.back();
  if (auto it = found_.find(id); it != found_.end()) {
    c.chunks_ = std::move(it->second.chunks);
    c.count_ = it->second.records;
    found_.erase(it);
  }
  return c;
}

void ColumnStore::check_records(uint64_t records) const {
  const std::string where = "column spill file '" + path_ + "' does not match its checkpoint: ";
  if (!found_.empty())
    throw FatalError(where + "it holds records of " + std::to_string(found_.size()) +
                     " columns more than the checkpoint's " + std::to_string(columns_.size()));
  for (const auto& c : columns_)
    if (c->count_ != records)
      throw FatalError(where + "column '" + c->name_ + "' holds " + std::to_string(c->count_) +
                       " records, not " + std::to_string(records));
}

uint64_t ColumnStore::write_chunk(uint32_t column, uint64_t records,
                                  std::span<const uint8_t> bytes) {
  if (fd_ < 0) throw InternalError("a column appended to after ColumnStore::finish()");
  if (records > UINT32_MAX) throw InternalError("a spill chunk of more than 2^32 - 1 records");
  store<uint32_t>(out_, column);
  store<uint32_t>(out_, static_cast<uint32_t>(records));
  store<uint64_t>(out_, bytes.size());
  length_ += kChunkHeader;
  const uint64_t at = length_;
  if (bytes.size() >= kChunkBytes) {
    flush();
    write_fully(fd_, path_, bytes);
  } else {
    out_.insert(out_.end(), bytes.begin(), bytes.end());
    if (out_.size() >= kChunkBytes) flush();
  }
  length_ += bytes.size();
  return at;
}

void ColumnStore::flush() {
  write_fully(fd_, path_, out_);
  out_.clear();
}

void ColumnStore::spill_all(bool release) {
  for (auto& c : columns_) c->spill(release);
}

uint64_t ColumnStore::checkpoint() {
  spill_all(false);
  flush();
  if (::fdatasync(fd_) != 0) throw_write_error("cannot fsync", path_, errno);
  return length_;
}

void ColumnStore::finish() {
  if (fd_ < 0) return;
  flush();
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw_write_error("cannot close", path_, errno);
  read_fd_ = open_for_reading(path_);
}

void SpillColumn::appended(size_t capacity_before) {
  ++count_;
  ++buffered_records_;
  store_->held_ += buffer_.capacity() - capacity_before;
  if (buffer_.size() >= ColumnStore::kChunkBytes) spill(false);
  if (store_->held_ > ColumnStore::kBudgetBytes) store_->spill_all(true);
}

void SpillColumn::spill(bool release) {
  if (!buffer_.empty()) {
    chunks_.push_back({store_->write_chunk(id_, buffered_records_, buffer_), buffer_.size()});
    buffer_.clear();
    buffered_records_ = 0;
  }
  if (release) {
    store_->held_ -= buffer_.capacity();
    std::vector<uint8_t>().swap(buffer_);
  }
}

void SpillColumn::append_missing() {
  const size_t capacity = buffer_.capacity();
  store<uint8_t>(buffer_, kMissingTag);
  store<uint8_t>(buffer_, 0);
  store<uint64_t>(buffer_, 0);
  appended(capacity);
}

void SpillColumn::append(DType dtype, std::span<const int64_t> shape,
                         std::span<const uint8_t> bytes, FieldKind kind) {
  const size_t capacity = buffer_.capacity();
  store<uint8_t>(buffer_, static_cast<uint8_t>(static_cast<uint8_t>(dtype) |
                                               (static_cast<uint8_t>(kind) << kKindShift)));
  store<uint8_t>(buffer_, static_cast<uint8_t>(shape.size()));
  for (int64_t d : shape) store(buffer_, d);
  store<uint64_t>(buffer_, bytes.size());
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
  appended(capacity);
}

// Reads a column's records back: its chunks in the file, then what it still buffers.
class SpillColumn::Reader {
 public:
  explicit Reader(const SpillColumn& c) : c_(c), path_(c.store_->path_) {
    if (c.store_->read_fd_ < 0)
      throw InternalError("a spill column read before ColumnStore::finish()");
    uint64_t largest = 0;
    for (const Chunk& k : c.chunks_) largest = std::max(largest, k.bytes);
    buf_.resize(std::min<uint64_t>(largest, ColumnStore::kChunkBytes));
  }
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
      if (pos_ == len_ && !refill()) {
        if (eof_ok) return false;
        throw FatalError("column spill file '" + path_ + "' is truncated (column '" + c_.name_ +
                         "')");
      }
      const size_t take = std::min<uint64_t>(n, len_ - pos_);
      std::memcpy(p, data_ + pos_, take);
      pos_ += take;
      p += take;
      n -= take;
      eof_ok = false;
    }
    return true;
  }
  // The next piece of the column: more of its chunks, or its buffer; false after the last.
  bool refill() {
    for (; chunk_ < c_.chunks_.size(); ++chunk_, in_chunk_ = 0) {
      const Chunk& k = c_.chunks_[chunk_];
      if (in_chunk_ == k.bytes) continue;
      const uint64_t take = std::min<uint64_t>(buf_.size(), k.bytes - in_chunk_);
      pread_fully(c_.store_->read_fd_, path_, buf_.data(), take, k.offset + in_chunk_);
      in_chunk_ += take;
      data_ = buf_.data();
      pos_ = 0;
      len_ = take;
      return true;
    }
    if (buffer_read_ || c_.buffer_.empty()) return false;
    buffer_read_ = true;
    data_ = c_.buffer_.data();
    pos_ = 0;
    len_ = c_.buffer_.size();
    return true;
  }

  const SpillColumn& c_;
  const std::string& path_;
  std::vector<uint8_t> buf_;
  const uint8_t* data_ = nullptr;
  size_t pos_ = 0, len_ = 0;
  size_t chunk_ = 0;
  uint64_t in_chunk_ = 0;
  bool buffer_read_ = false;
};

namespace {

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
std::function<void(ByteSink&)> SpillColumn::values_filler(DType to, uint64_t missing_bytes,
                                                          bool as_json) const {
  return [this, to, missing_bytes, as_json](ByteSink& sink) {
    Reader r(*this);
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
  return {name_, to, shape, values_filler(to, elements * dtype_size(to), false)};
}

std::vector<TensorSpec> SpillColumn::ragged_tensors(DType to, std::vector<int64_t> inner,
                                                    uint64_t total_first_axis, uint64_t n,
                                                    bool as_json) const {
  std::vector<int64_t> vshape{static_cast<int64_t>(total_first_axis)};
  vshape.insert(vshape.end(), inner.begin(), inner.end());
  TensorSpec values{format::values_tensor(name_), as_json ? DType::U8 : to, vshape,
                    values_filler(to, 0, as_json)};
  TensorSpec offsets{format::offsets_tensor(name_),
                     DType::I64,
                     {static_cast<int64_t>(n + 1)},
                     [this, as_json](ByteSink& sink) {
                       Reader r(*this);
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
  return {
      format::valid_tensor(name_), DType::BOOL, {static_cast<int64_t>(n)}, [this](ByteSink& sink) {
        Reader r(*this);
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
  Reader r(*this);
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
