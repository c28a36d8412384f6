#include "common/number_text.h"

#include <charconv>
#include <cmath>

namespace tarmac {
namespace {

std::string in_quotes(std::string_view text) {
  return "'" + std::string(text) + "'";
}

template <typename T>
NumberText<T> parse_int(std::string_view text, const char* what) {
  NumberText<T> r;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, r.value, 10);
  if (ec == std::errc::result_out_of_range && at == end)
    r.error = in_quotes(text) + " is out of the range of " + what;
  else if (text.empty() || ec != std::errc() || at != end)
    r.error = in_quotes(text) + " is not " + what;
  return r;
}

}  // namespace

NumberText<int64_t> parse_integer(std::string_view text) {
  return parse_int<int64_t>(text, "an integer");
}

NumberText<uint64_t> parse_unsigned(std::string_view text) {
  return parse_int<uint64_t>(text, "an integer >= 0");
}

NumberText<double> parse_finite(std::string_view text) {
  NumberText<double> r;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, r.value, std::chars_format::general);
  if (ec == std::errc::result_out_of_range && at == end)
    r.error = in_quotes(text) + " is beyond the range of a number";
  else if (text.empty() || ec != std::errc() || at != end)
    r.error = in_quotes(text) + " is not a number";
  else if (!std::isfinite(r.value))
    r.error = in_quotes(text) + " is not a finite number";
  return r;
}

std::string number_text(double v) {
  char buf[32];
  // Whole numbers as integers: "1000000", where the shortest form would be "1e+06".
  const auto [at, ec] = std::abs(v) < 1e15 && v == std::trunc(v)
                            ? std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v))
                            : std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, at) : std::string("?");
}

}  // namespace tarmac
