#include "common/error.h"

#include <stdexcept>

namespace tarmac {

std::string_view error_code_name(ErrorCode c) {
  static constexpr std::string_view kNames[] = {
      "none",
      "no_image",
      "ambiguous_image",
      "no_dense_map",
      "bad_image",
      "bad_dense_map",
      "bad_json",
      "bad_npy",
      "bad_npz",
      "bad_text",
      "bad_field",
      "schema_mismatch",
      "duplicate_key",
      "duplicate_member",
      "late_member",
      "out_of_memory",
      "corrupt_member",
      "unsupported_member",
      "bad_sample",
      "missing_member",
      "bad_member_name",
      "unsafe_member_name",
      "member_too_large",
      "input_error",
      "hidden_file",
      "no_extension",
      "link",
      "not_regular_file",
      "unused_member",
      "second_image",
      "unused_image",
      "no_instances",
      "duplicate_content",
      "tarmac_dataset",
  };
  static_assert(std::size(kNames) == kNumErrorCodes, "one name per ErrorCode");
  const auto k = static_cast<size_t>(c);
  return k < kNumErrorCodes ? kNames[k] : "bad_sample";
}

std::string_view grade_name(Grade g) {
  switch (g) {
    case Grade::Sample:
      return "sample";
    case Grade::Fatal:
      return "fatal";
    case Grade::Usage:
      return "usage";
    case Grade::Internal:
      return "internal";
    case Grade::Interrupted:
      return "interrupted";
  }
  return "fatal";
}

Grade grade_of(const std::exception& e) {
  if (const auto* t = dynamic_cast<const Error*>(&e)) return t->grade();
  if (dynamic_cast<const std::logic_error*>(&e)) return Grade::Internal;
  return Grade::Fatal;
}

}  // namespace tarmac
