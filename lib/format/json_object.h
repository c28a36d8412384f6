#pragma once
// Building JSON objects of many keys. nlohmann's ordered_json (the order we write keys in is
// part of the format) looks for the key on every insertion, so an object of a million keys (a
// table's columns, their tensors) costs 10^12 comparisons; keys known to be new are appended.
#include <nlohmann/json.hpp>
#include <string>
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

}  // namespace tarmac::format
