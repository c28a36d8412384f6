#include "labels/text_labels.h"

#include <bit>
#include <charconv>
#include <cstring>
#include <string_view>

#include "common/error.h"
#include "common/utf8.h"

namespace tarmac {

static_assert(std::endian::native == std::endian::little,
              "values are stored by memcpy on a little-endian host");

namespace {

std::span<const uint8_t> strip_bom(std::span<const uint8_t> bytes) {
  if (bytes.size() >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF)
    return bytes.subspan(3);
  return bytes;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

FieldValue parse_txt(std::span<const uint8_t> bytes) {
  if (!is_valid_utf8(bytes))
    throw ParseError("the text label is not valid UTF-8; save it as UTF-8");
  const auto text = strip_bom(bytes);
  FieldValue v;
  v.kind = FieldValue::Kind::String;
  v.dtype = DType::U8;
  v.shape = {static_cast<int64_t>(text.size())};
  v.data.assign(text.begin(), text.end());
  return v;
}

FieldValue parse_cls(std::span<const uint8_t> bytes) {
  const auto body = strip_bom(bytes);
  std::string_view s(reinterpret_cast<const char*>(body.data()), body.size());
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  if (s.empty()) throw ParseError("the class label is empty; it must hold one decimal integer");
  // from_chars takes '-' but not '+'; a '+' followed by another sign must still fail.
  if (s.front() == '+') {
    s.remove_prefix(1);
    if (s.empty() || s.front() == '-' || s.front() == '+')
      throw ParseError("the class label is not a decimal integer");
  }
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, 10);
  if (ec == std::errc::result_out_of_range)
    throw ParseError("the class label is out of the 64-bit integer range");
  if (ec != std::errc() || end != s.data() + s.size())
    throw ParseError("the class label is not a decimal integer");
  FieldValue v;
  v.kind = FieldValue::Kind::Numeric;
  v.dtype = DType::I64;
  v.shape = {};
  v.data.resize(sizeof value);
  std::memcpy(v.data.data(), &value, sizeof value);  // little-endian host, as the build assumes
  return v;
}

}  // namespace tarmac
