#pragma once
// The typed schema of a dataset's label columns (the `schema` metadata entry, docs/format.md
// 1.4), and the rules that reconcile the same field seen twice (dtype promotion, ragged first
// axes), shared by schema inference (labels/), the reader and merge.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "format/field_geometry.h"

namespace tarmac {

/// What a column holds: a tensor, UTF-8 text, or the JSON text of a value no column type fits.
enum class FieldKind : uint8_t { Numeric, String, Json };

/// "numeric", "string", "json".
std::string_view kind_name(FieldKind k);
std::optional<FieldKind> kind_from_name(std::string_view name);

/// One label column as the schema describes it.
struct FieldSpec {
  std::string name;
  FieldKind kind = FieldKind::Numeric;
  DType dtype = DType::F64;
  std::vector<int64_t> shape;  ///< per-sample shape; shape[0] is -1 when ragged
  bool ragged = false;
  std::string source;  ///< member extension it came from ("json", "smpl.npz"); informative
  /// Some samples have no value (JSON null, or the field absent): the column has a NAME.valid
  /// mask, and those samples hold zeros (fixed) or nothing (ragged) in the values.
  bool nullable = false;
  /// Its geometric kind, when the conversion declared one (`geometry`; absent in files written
  /// before it, and for fields that are not geometric).
  std::optional<FieldGeometry> geometry = std::nullopt;

  /// Bytes of one sample's value; 0 when ragged.
  uint64_t sample_bytes() const;
  /// The shape after the first axis (the row of a ragged field).
  std::vector<int64_t> inner_shape() const;
  bool operator==(const FieldSpec&) const = default;
};

/// The schema as the JSON object of the `schema` metadata entry (fields in order; their names
/// are distinct), and as its text.
nlohmann::ordered_json schema_json(std::span<const FieldSpec> fields);
std::string schema_to_json(std::span<const FieldSpec> fields);
/// Parses and checks a `schema` entry: every field's kind, dtype, shape and ragged flag are
/// consistent (text is ragged U8; a ragged shape starts with -1; no other negative dimension;
/// at most kMaxDims - 1 dimensions; `nullable`, optional, is a bool). Throws ParseError naming
/// the field.
std::vector<FieldSpec> schema_from_json(std::string_view text);

/// The common dtype of two numeric dtypes: BOOL < integers < floats (docs/format.md 1.4).
DType promote(DType a, DType b);

/// Whether a field whose first axis varies between samples becomes ragged by itself: JSON has
/// no shapes, so a field from a .json member does; others need --ragged.
bool ragged_by_source(std::string_view source);

/// "[2, 0, 5]".
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace tarmac
