#include "common/error.h"

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

}  // namespace tarmac
