#include "apps/flag_values.h"

#include <algorithm>
#include <cmath>

#include "common/number_text.h"

namespace tarmac::cli {
namespace {

std::string in_quotes(std::string_view text) {
  return "'" + std::string(text) + "'";
}

std::string interval(const std::string& lo, const std::string& hi) {
  return "[" + lo + ", " + hi + "]";
}

std::string interval(IntRange r) {
  return interval(std::to_string(r.lo), std::to_string(r.hi));
}
std::string interval(NumberRange r) {
  return interval(number_text(r.lo), number_text(r.hi));
}

// Each *_error returns "" and sets `out`, or says why `text` is refused (without the flag's
// name: CLI11's ValidationError puts it in front).

std::string integer_error(std::string_view text, IntRange r, int64_t& out) {
  const auto n = parse_integer(text);
  if (!n.ok()) return n.error + "; accepted: " + r.text();
  if (!r.contains(n.value)) return in_quotes(text) + " is out of range; accepted: " + r.text();
  out = n.value;
  return "";
}

std::string number_error(std::string_view text, NumberRange r, double& out) {
  const auto n = parse_finite(text);
  if (!n.ok()) return n.error + "; accepted: " + r.text();
  if (!r.contains(n.value)) return in_quotes(text) + " is out of range; accepted: " + r.text();
  out = n.value;
  return "";
}

std::string size_error(std::string_view text, SizeValue& out) {
  const auto side = [](std::string_view s, int& v) {
    const auto n = parse_integer(s);
    if (!n.ok() || !kSideRange.contains(n.value)) return false;
    v = static_cast<int>(n.value);
    return true;
  };
  SizeValue s;
  const size_t x = text.find('x');
  s.single = x == std::string_view::npos;
  const bool ok = s.single ? side(text, s.width) && side(text, s.height)
                           : side(text.substr(0, x), s.width) && side(text.substr(x + 1), s.height);
  if (!ok)
    return in_quotes(text) + " is not N or WxH (e.g. 256 or 192x256); accepted: integer sides in " +
           interval(kSideRange);
  out = s;
  return "";
}

std::string part_error(std::string_view text, std::pair<uint32_t, uint32_t>& out) {
  const size_t slash = text.find('/');
  if (slash != std::string_view::npos) {
    const auto i = parse_unsigned(text.substr(0, slash));
    const auto n = parse_unsigned(text.substr(slash + 1));
    if (i.ok() && n.ok() && n.value >= 1 && n.value <= kMaxParts && i.value < n.value) {
      out = {static_cast<uint32_t>(i.value), static_cast<uint32_t>(n.value)};
      return "";
    }
  }
  return in_quotes(text) +
         " is not I/N; accepted: I/N with integers 0 <= I < N <= " + std::to_string(kMaxParts) +
         " (parts are numbered from 0)";
}

struct Unit {
  const char* name;
  uint64_t bytes;
};
constexpr Unit kUnits[] = {{"", 1},
                           {"B", 1},
                           {"K", uint64_t{1} << 10},
                           {"KiB", uint64_t{1} << 10},
                           {"M", uint64_t{1} << 20},
                           {"MiB", uint64_t{1} << 20},
                           {"G", uint64_t{1} << 30},
                           {"GiB", uint64_t{1} << 30},
                           {"T", uint64_t{1} << 40},
                           {"TiB", uint64_t{1} << 40}};

std::string bytes_error(std::string_view text, uint64_t& out) {
  const std::string refused =
      in_quotes(text) +
      " is not a size; accepted: a number and a unit K, M, G or T (powers of 1024; e.g. 512M, "
      "1.5G, 4096), from 1 byte to 1024T";
  const size_t unit_at = text.find_last_of("0123456789.") + 1;  // npos + 1 = 0: no number
  const std::string_view unit = text.substr(unit_at);
  const auto n = parse_finite(text.substr(0, unit_at));
  if (!n.ok()) return refused;
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    const double bytes = std::floor(n.value * static_cast<double>(u.bytes));
    if (!(bytes >= 1 && bytes <= static_cast<double>(kMaxBytes))) return refused;
    out = static_cast<uint64_t>(bytes);
    return "";
  }
  return refused;
}

[[noreturn]] void refuse(const std::string& flag, const std::string& why) {
  throw CLI::ValidationError(flag, why);
}

}  // namespace

std::string IntRange::text() const {
  return "an integer in " + interval(*this);
}
std::string NumberRange::text() const {
  return "a number in " + interval(*this);
}

int64_t integer_flag(const std::string& flag, std::string_view text, IntRange r) {
  int64_t v = 0;
  if (const std::string e = integer_error(text, r, v); !e.empty()) refuse(flag, e);
  return v;
}

double number_flag(const std::string& flag, std::string_view text, NumberRange r) {
  double v = 0;
  if (const std::string e = number_error(text, r, v); !e.empty()) refuse(flag, e);
  return v;
}

void check_flag(const std::string& flag, int64_t value, IntRange r) {
  if (!r.contains(value))
    refuse(flag, in_quotes(std::to_string(value)) + " is out of range; accepted: " + r.text());
}

void check_flag(const std::string& flag, double value, NumberRange r) {
  if (!std::isfinite(value))
    refuse(flag, in_quotes(number_text(value)) + " is not a finite number; accepted: " + r.text());
  if (!r.contains(value))
    refuse(flag, in_quotes(number_text(value)) + " is out of range; accepted: " + r.text());
}

CLI::Validator integer_in(IntRange r) {
  return CLI::Validator(
      [r](std::string& s) {
        int64_t v = 0;
        std::string e = integer_error(s, r, v);
        if (e.empty()) s = std::to_string(v);
        return e;
      },
      interval(r));
}

CLI::Validator number_in(NumberRange r) {
  return CLI::Validator(
      [r](std::string& s) {
        double v = 0;
        return number_error(s, r, v);
      },
      interval(r));
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& s) {
        const auto n = parse_unsigned(s);
        if (!n.ok()) return n.error + "; accepted: an integer in [0, 2^64 - 1]";
        s = std::to_string(n.value);
        return std::string();
      },
      "[0, 2^64 - 1]");
}

SizeValue size_flag(const std::string& flag, std::string_view text) {
  SizeValue v;
  if (const std::string e = size_error(text, v); !e.empty()) refuse(flag, e);
  return v;
}

std::pair<uint32_t, uint32_t> part_flag(const std::string& flag, std::string_view text) {
  std::pair<uint32_t, uint32_t> v;
  if (const std::string e = part_error(text, v); !e.empty()) refuse(flag, e);
  return v;
}

std::vector<double> box_flag(const std::string& flag, std::string_view text) {
  constexpr NumberRange kCorner{-1e6, 1e6}, kSide{1, 1e6};
  const std::string accepted = "; accepted: X,Y,W,H with X and Y in " + interval(kCorner) +
                               ", W and H in " + interval(kSide);
  std::vector<double> v;
  for (size_t at = 0; at <= text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view part = text.substr(at, comma - at);
    const auto n = parse_finite(part);
    if (!n.ok()) refuse(flag, n.error + accepted);
    if (!(v.size() < 2 ? kCorner : kSide).contains(n.value))
      refuse(flag, in_quotes(part) + " is out of range" + accepted);
    v.push_back(n.value);
    at = comma + 1;
  }
  if (v.size() != 4) refuse(flag, in_quotes(text) + " is not 4 comma-separated numbers" + accepted);
  return v;
}

uint64_t bytes_flag(const std::string& flag, std::string_view text) {
  uint64_t v = 0;
  if (const std::string e = bytes_error(text, v); !e.empty()) refuse(flag, e);
  return v;
}

CLI::Validator size_value() {
  return CLI::Validator(
      [](std::string& s) {
        SizeValue v;
        return size_error(s, v);
      },
      "N or WxH, sides in " + interval(kSideRange));
}

CLI::Validator part_value() {
  return CLI::Validator(
      [](std::string& s) {
        std::pair<uint32_t, uint32_t> v;
        return part_error(s, v);
      },
      "I/N, 0 <= I < N <= " + std::to_string(kMaxParts));
}

CLI::Validator bytes_value() {
  return CLI::Validator(
      [](std::string& s) {
        uint64_t v = 0;
        return bytes_error(s, v);
      },
      "BYTES (K, M, G, T), 1 to 1024T");
}

std::string size_text(uint64_t bytes) {
  static constexpr char kUnits[] = {'T', 'G', 'M', 'K'};
  for (int k = 0; k < 4; ++k) {
    const uint64_t unit = uint64_t{1} << (10 * (4 - k));
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + kUnits[k];
  }
  return std::to_string(bytes);
}

}  // namespace tarmac::cli
