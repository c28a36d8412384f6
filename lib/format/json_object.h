#pragma once
// Building and reading JSON objects of many keys. nlohmann's ordered_json (the order we write
// keys in is part of the format) looks for the key on every insertion, in its own parse too, so
// an object of a million keys (a table's columns, their tensors) costs 10^12 comparisons; here
// keys known to be new are appended, and parse_ordered indexes each object's keys as it goes.
#include <cstdint>
#include <istream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace tarmac::format {

/// Appends `key: value` to the JSON object `object` without looking for `key`, which the
/// caller knows it does not hold yet (a duplicate key would be written twice).
inline void append_new_key(nlohmann::ordered_json& object, std::string key,
                           nlohmann::ordered_json value) {
  // ordered_map is a vector of pairs; its own emplace searches that vector first.
  auto& map = object.get_ref<nlohmann::ordered_json::object_t&>();
  static_cast<nlohmann::ordered_json::object_t::Container&>(map).emplace_back(std::move(key),
                                                                              std::move(value));
}

/// nlohmann::ordered_json::parse in linear time, with its results: keys in document order, a
/// key given twice keeps its first place and its last value; invalid text throws
/// nlohmann::json::parse_error or, with allow_exceptions false, gives a discarded value.
nlohmann::ordered_json parse_ordered(std::string_view text, bool allow_exceptions = true);
/// The same over a whole stream (a file).
nlohmann::ordered_json parse_ordered(std::istream& in, bool allow_exceptions = true);

/// `j` as the integer type T when it is an integer JSON number in T's range; nullopt otherwise.
/// nlohmann's own get<T>() casts a float (4.2e47) or an integer out of range as it is, which is
/// undefined or wraps: every integer of a document from anywhere is read through this.
template <class T>
std::optional<T> integer_of(const nlohmann::ordered_json& j) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  if (j.is_number_unsigned()) {
    const auto v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(v);
  }
  if (!j.is_number_integer()) return std::nullopt;  // a float, or no number
  const auto v = j.get<int64_t>();                  // negative
  if constexpr (std::is_unsigned_v<T>) {
    return std::nullopt;
  } else {
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min())) return std::nullopt;
    return static_cast<T>(v);
  }
}

}  // namespace tarmac::format
