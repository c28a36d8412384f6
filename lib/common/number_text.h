#pragma once
// Numbers written as text by a user (command-line flags, "#INDEX"): the whole text is the number,
// or it is refused. std::stoi("192,256") is 192 and std::stod("inf") is infinity; these are not.
#include <cstdint>
#include <string>
#include <string_view>

namespace tarmac {

/// A number read from text, or why the text is not one.
template <typename T>
struct NumberText {
  T value{};
  std::string error;  ///< empty when `value` holds the number; else "'TEXT' is not ..."
  bool ok() const { return error.empty(); }
};

/// The whole of `text` as a decimal integer: an optional '-' then digits, nothing else (no '+',
/// spaces, base prefix, fraction or exponent), within int64.
NumberText<int64_t> parse_integer(std::string_view text);

/// The whole of `text` as a decimal integer without a sign, within uint64.
NumberText<uint64_t> parse_unsigned(std::string_view text);

/// The whole of `text` as a finite decimal number ("2", "-1.5", "1e-3"): not "inf", "nan", a
/// hexadecimal float, or a number beyond a double's range.
NumberText<double> parse_finite(std::string_view text);

/// `v` as the shortest decimal text that reads back as `v` ("1.2", "1e-300"), whole numbers
/// below 1e15 as integers ("1000000"); "nan", "inf".
std::string number_text(double v);

}  // namespace tarmac
