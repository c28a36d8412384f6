#pragma once
// Schema inference over a whole run. The first accepted sample fixes the set of fields;
// later samples must carry the same fields with compatible values. Numeric dtypes are
// promoted (BOOL < integers < floats, see docs/format.md); a first axis that varies makes a
// field ragged when it comes from JSON (which has no shapes) or is declared --ragged.
#include <cstdint>
#include <set>
#include <string>
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
};

class Schema {
 public:
  explicit Schema(std::set<std::string> declared_ragged)
      : declared_ragged_(std::move(declared_ragged)) {}

  /// Checks one sample's fields against the schema and widens it. Throws SampleError naming
  /// the member, the field and both shapes/types; the schema is unchanged then.
  void observe(const std::vector<SampleField>& fields);

  const std::vector<FieldSchema>& fields() const { return fields_; }
  uint64_t samples() const { return samples_; }
  /// The schema as the format describes it (ragged first axes as -1).
  std::vector<FieldSpec> specs() const;

  /// Its whole state as JSON text, for a conversion checkpoint, and back (convert --resume).
  /// restore() throws FatalError for text that checkpoint() did not write.
  std::string checkpoint() const;
  void restore(const std::string& checkpoint_text);

 private:
  std::set<std::string> declared_ragged_;
  std::vector<FieldSchema> fields_;
  uint64_t samples_ = 0;
};

}  // namespace tarmac
