#pragma once
// The numeric values of command-line flags, parsed strictly (lib/common/number_text: the whole
// text, finite) and checked against each flag's documented range. A refusal is a
// CLI::ValidationError (exit 2) whose message names the flag, the value and what is accepted:
// "--crop-scale: 'inf' is not a finite number; accepted: a number in [0.01, 100]".
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tarmac::cli {

/// The accepted range of an integer flag: [lo, hi].
struct IntRange {
  int64_t lo, hi;
  bool contains(int64_t v) const { return v >= lo && v <= hi; }
  std::string text() const;  ///< "an integer in [1, 100]"
};

/// The accepted range of a number flag: [lo, hi].
struct NumberRange {
  double lo, hi;
  bool contains(double v) const { return v >= lo && v <= hi; }  // false for NaN
  std::string text() const;                                     ///< "a number in [0.01, 100]"
};

/// The whole `text` as an integer within `r`; throws CLI::ValidationError naming `flag`.
int64_t integer_flag(const std::string& flag, std::string_view text, IntRange r);

/// The whole `text` as a finite number within `r`; throws CLI::ValidationError naming `flag`.
double number_flag(const std::string& flag, std::string_view text, NumberRange r);

/// Throws CLI::ValidationError naming `flag` when a value that was not parsed from text (a
/// ConvertFlags filled in by code) lies outside `r`.
void check_flag(const std::string& flag, int64_t value, IntRange r);
void check_flag(const std::string& flag, double value, NumberRange r);

/// CLI11 validators: the refusals above while the command line is parsed. The integer ones are
/// registered with ->transform(), not ->check() (whose validators may not change the value):
/// they rewrite an accepted value in plain decimal, so that CLI11's own conversion (which reads
/// "010" as octal 8 and "0x10" as 16) reads the number that was checked.
CLI::Validator integer_in(IntRange r);
CLI::Validator number_in(NumberRange r);
/// Any integer from 0 to 2^64 - 1 (a --seed); for ->transform().
CLI::Validator unsigned_integer();

/// Thread counts (-j, --threads); 0, or not given, is all cores (scripts/convert-slurm.sbatch
/// passes -j 0 where Slurm gives no count).
inline constexpr IntRange kThreadRange{0, 1024};

/// The sides of an image size: integers in [1, 65535].
inline constexpr IntRange kSideRange{1, 65535};

/// --size: N, or WxH with a lowercase x.
struct SizeValue {
  int width = 0, height = 0;
  bool single = true;  ///< given as N
};
SizeValue size_flag(const std::string& flag, std::string_view text);

/// The most parts of --shard I/N.
inline constexpr uint32_t kMaxParts = 1000000;

/// --shard I/N: {I, N} with 0 <= I < N <= kMaxParts.
std::pair<uint32_t, uint32_t> part_flag(const std::string& flag, std::string_view text);

/// --crop box:X,Y,W,H: four finite numbers, X and Y in [-1e6, 1e6], W and H in [1, 1e6].
std::vector<double> box_flag(const std::string& flag, std::string_view text);

/// The largest byte size a flag takes: 1024T (2^50 bytes).
inline constexpr uint64_t kMaxBytes = uint64_t{1} << 50;

/// "1.5G" / "512M" / "4096" -> bytes: a finite number and a unit K, M, G or T (powers of 1024;
/// KiB..TiB and B too), rounded down, from 1 byte to kMaxBytes; throws CLI::ValidationError
/// naming `flag`.
uint64_t bytes_flag(const std::string& flag, std::string_view text);

/// `bytes` as bytes_flag reads it back, in the largest unit that divides it ("64M", "1G",
/// "16G", "1000"): how --help shows the library's default of a size.
std::string size_text(uint64_t bytes);

/// Validators for ->check() refusing what size_flag, part_flag and bytes_flag refuse.
CLI::Validator size_value();
CLI::Validator part_value();
CLI::Validator bytes_value();

}  // namespace tarmac::cli
