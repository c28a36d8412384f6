#pragma once
// JSON label members: a top-level object becomes one field per (flattened) member.
#include <cstdint>
#include <span>
#include <string_view>

#include "labels/field_value.h"

namespace tarmac {

/// Returns the fields of a JSON document: members of a top-level object, nested objects flattened
/// with '.', each named prefix + path; any other top-level value is one field named top_level_name.
/// Numbers, bools and rectangular numeric arrays become Numeric; strings String; the rest Json;
/// null is a field with no value (FieldValue::null: missing in this sample).
/// Throws ParseError for invalid JSON or UTF-8, NaN/Infinity, nesting past 64 levels, or two
/// values that flatten to the same field name.
Fields parse_json_labels(std::span<const uint8_t> bytes, std::string_view prefix,
                         std::string_view top_level_name);

}  // namespace tarmac
