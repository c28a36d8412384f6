#include "format/npy_blob.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "common/error.h"

namespace tarmac::format {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kPreamble = 10;  // magic, version 1.0, u16 header length
constexpr size_t kAlign = 64;

// numpy's dtype.str for the dtypes tarmac stores: '|' marks byte-order-free 1-byte types.
const char* descr_of(DType t) {
  switch (t) {
    case DType::BOOL:
      return "|b1";
    case DType::U8:
      return "|u1";
    case DType::I8:
      return "|i1";
    case DType::U16:
      return "<u2";
    case DType::I16:
      return "<i2";
    case DType::U32:
      return "<u4";
    case DType::I32:
      return "<i4";
    case DType::U64:
      return "<u8";
    case DType::I64:
      return "<i8";
    case DType::F16:
      return "<f2";
    case DType::F32:
      return "<f4";
    case DType::F64:
      return "<f8";
    case DType::BF16:
      break;
  }
  return nullptr;
}

// The dict text numpy writes: {'descr': '<f4', 'fortran_order': False, 'shape': (4, 5), }
std::string dict_text(const char* descr, std::span<const int64_t> shape) {
  std::string s = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (";
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + (shape.size() == 1 ? ",), }" : "), }");
}

[[noreturn]] void bad(const std::string& why) {
  throw ParseError("stored .npy dense map: " + why);
}

// Reads a decimal dimension at `pos` (no sign, no leading zero unless "0"), at most 2^31 - 1.
int64_t read_dim(std::string_view h, size_t& pos) {
  const size_t start = pos;
  int64_t v = 0;
  while (pos < h.size() && h[pos] >= '0' && h[pos] <= '9') {
    v = v * 10 + (h[pos] - '0');
    if (v > INT32_MAX) bad("a dimension over 2^31 - 1");
    ++pos;
  }
  if (pos == start) bad("the header's shape is not a tuple of integers");
  if (pos - start > 1 && h[start] == '0') bad("a dimension with a leading zero");
  return v;
}

bool eat(std::string_view h, size_t& pos, std::string_view what) {
  if (h.substr(pos, what.size()) != what) return false;
  pos += what.size();
  return true;
}

}  // namespace

std::vector<uint8_t> encode_npy_blob(DType dtype, std::span<const int64_t> shape,
                                     std::span<const uint8_t> data) {
  const char* descr = descr_of(dtype);
  if (!descr)
    throw InternalError("encode_npy_blob: numpy has no " + std::string(dtype_name(dtype)) +
                        " dtype");
  uint64_t count = 1;
  for (int64_t d : shape) count *= static_cast<uint64_t>(d);
  if (count * dtype_size(dtype) != data.size())
    throw InternalError("encode_npy_blob: data size does not match the shape");
  std::string header = dict_text(descr, shape);
  // Padded with spaces and ended by '\n' so that the data starts on a multiple of 64 bytes.
  const size_t total = (kPreamble + header.size() + 1 + kAlign - 1) / kAlign * kAlign;
  header.append(total - kPreamble - header.size() - 1, ' ');
  header.push_back('\n');
  std::vector<uint8_t> out(total + data.size());
  std::memcpy(out.data(), kMagic, 6);
  out[6] = 1;  // version 1.0
  out[7] = 0;
  out[8] = static_cast<uint8_t>(header.size() & 0xFF);
  out[9] = static_cast<uint8_t>(header.size() >> 8);
  std::memcpy(out.data() + kPreamble, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + total, data.data(), data.size());
  return out;
}

NpyBlob parse_npy_blob(std::span<const uint8_t> bytes) {
  if (bytes.size() < kPreamble || std::memcmp(bytes.data(), kMagic, 6) != 0)
    bad("the blob does not start with \\x93NUMPY");
  if (bytes[6] != 1 || bytes[7] != 0)
    bad("format version " + std::to_string(bytes[6]) + "." + std::to_string(bytes[7]) +
        ", not 1.0");
  const size_t header_len = bytes[8] | (size_t{bytes[9]} << 8);
  if (header_len > bytes.size() - kPreamble) bad("the header runs past the blob");
  if ((kPreamble + header_len) % kAlign != 0) bad("the data does not start on 64 bytes");
  const std::string_view h(reinterpret_cast<const char*>(bytes.data() + kPreamble), header_len);

  size_t pos = 0;
  if (!eat(h, pos, "{'descr': '")) bad("the header is not numpy's dict of 'descr', ...");
  const size_t descr_end = h.find('\'', pos);
  if (descr_end == std::string_view::npos) bad("the header's descr is unterminated");
  const std::string_view descr = h.substr(pos, descr_end - pos);
  pos = descr_end + 1;
  NpyBlob b;
  bool known = false;
  for (DType t : {DType::BOOL, DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32,
                  DType::U64, DType::I64, DType::F16, DType::F32, DType::F64})
    if (descr == descr_of(t)) {
      b.dtype = t;
      known = true;
    }
  if (!known) bad("dtype '" + std::string(descr) + "' is not one tarmac stores");
  if (!eat(h, pos, ", 'fortran_order': False, 'shape': ("))
    bad("the header is not C order, or not numpy's dict of 'descr', 'fortran_order', 'shape'");
  for (;;) {
    b.shape.push_back(read_dim(h, pos));
    if (eat(h, pos, ")") || eat(h, pos, ",)")) break;
    if (!eat(h, pos, ", ")) bad("the header's shape is not a tuple of integers");
    if (b.shape.size() >= kMaxNpyBlobDims) bad("more than 3 dimensions");
  }
  if (b.shape.size() < 2) bad("fewer than 2 dimensions (it must be H x W or H x W x C)");
  if (!eat(h, pos, ", }")) bad("the header does not end its dict as numpy does");
  while (pos + 1 < h.size() && h[pos] == ' ') ++pos;
  if (pos + 1 != h.size() || h[pos] != '\n') bad("the header is not padded with spaces and '\\n'");

  uint64_t need = dtype_size(b.dtype);
  bool overflow = false;
  for (int64_t d : b.shape)
    overflow |= __builtin_mul_overflow(need, static_cast<uint64_t>(d), &need);
  const size_t have = bytes.size() - kPreamble - header_len;
  if (overflow || need != have)
    bad("its shape and dtype need " + (overflow ? "more" : std::to_string(need)) +
        " bytes of data, the blob holds " + std::to_string(have));
  b.data = bytes.subspan(kPreamble + header_len);
  return b;
}

}  // namespace tarmac::format
