#pragma once
// Schema inference over a whole run. Fields are the union of what samples carry: a field
// absent from a sample (or null in its JSON, which the parser drops) has no value there and is
// nullable. Numeric dtypes are promoted (BOOL < integers < floats, see docs/format.md); a first
// axis that varies makes a field ragged when it comes from JSON (which has no shapes) or is
// declared --ragged. A JSON field whose values cannot share one column type (a number here, an
// object there) falls back to the JSON text of each value, counted for a warning; an empty
// array types nothing until a non-empty value comes.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "labels/field_value.h"

namespace tarmac {

/// A parsed label field with the member it came from.
struct SampleField {
  std::string name;
  std::string member;  ///< archive member name, for messages
  std::string source;  ///< member extension it came from ("json", "smpl.npz", ...)
  FieldValue value;
};

struct FieldSchema {
  std::string name;
  std::string source;
  FieldValue::Kind kind = FieldValue::Kind::Numeric;
  DType dtype = DType::F64;
  bool dtype_known = false;    ///< false while only empty values were seen
  std::vector<int64_t> shape;  ///< per-sample shape; shape[0] is meaningless when ragged
  bool ragged = false;
  uint64_t total_first_axis = 0;  ///< sum over samples of shape[0] (ragged fields)
  uint64_t present = 0;           ///< samples with a value
  uint64_t missing = 0;           ///< samples without (absent or null): nullable when > 0
  /// Values seen of each kind (numeric, string, json), for the mixed-type warning.
  uint64_t kind_counts[3] = {0, 0, 0};
  /// The column became JSON text after values of another kind were written: those are
  /// rendered as JSON when the column is assembled (and total_first_axis is recounted then).
  bool rerender = false;
  /// It became JSON text because its values' types conflicted (a warning names it).
  bool mixed = false;
  /// False while every value was null: the first value types the field (until then, and if
  /// none comes, it is a JSON-text column without values).
  bool typed = true;

  bool nullable() const { return missing > 0; }
};

class Schema {
 public:
  /// `geometry`: the fields the conversion declares a geometric kind of (--points, --camera,
  /// ...), recorded in their schema entries by specs().
  explicit Schema(std::set<std::string> declared_ragged,
                  std::vector<std::pair<std::string, FieldGeometry>> geometry = {})
      : declared_ragged_(std::move(declared_ragged)), geometry_(std::move(geometry)) {}

  /// Checks one sample's fields against the schema and widens it (new fields, missing ones,
  /// promotions, the JSON fallback). Throws SampleError naming the member, the field and both
  /// shapes for what cannot be reconciled (shapes of a non-JSON source); the schema is
  /// unchanged then. Costs the sample's fields plus the schema's (no search over the schema
  /// per field): a table may have a million columns.
  void observe(const std::vector<SampleField>& fields);

  const std::vector<FieldSchema>& fields() const { return fields_; }
  /// The position in fields() of the field named `name`, which observe() has seen.
  size_t index(const std::string& name) const { return index_.at(name); }
  uint64_t samples() const { return samples_; }
  /// The schema as the format describes it (ragged first axes as -1), with each declared
  /// field's geometry: a camera's layout is its shape's ("K" for [3, 3], "fxfycxcy" for [4]),
  /// a `pairs:` pose's joint count its values' (elements / 3).
  std::vector<FieldSpec> specs() const;

  /// Its whole state as JSON, for a conversion checkpoint (format/checkpoint.h's
  /// CheckpointWriter::schema), and back (convert --resume). restore() throws FatalError for
  /// JSON that checkpoint() did not write; it reads a field's kind by name or, as checkpoints
  /// of version 1 wrote it, by number.
  nlohmann::ordered_json checkpoint() const;
  void restore(const nlohmann::ordered_json& checkpoint);

 private:
  std::set<std::string> declared_ragged_;
  std::vector<std::pair<std::string, FieldGeometry>> geometry_;
  std::vector<FieldSchema> fields_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in fields_
  uint64_t samples_ = 0;
};

}  // namespace tarmac
