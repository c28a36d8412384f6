#pragma once
// What a transform worker needs to turn one raw sample into its outputs, and nothing else: the
// members' roles, the labels kept, the transform, the hashes --dedup compares and the per-sample
// bounds. plan_run makes it once (stage_specs.h), once the class folders are found; every
// worker reads it, none changes it.
#include <cstdint>
#include <string>
#include <vector>

#include "convert/convert_options.h"

namespace tarmac {

/// Which member of a sample is what: the image (by extension, in order of preference), the
/// dense maps (by suffix), the rest labels or ignored.
struct MemberRoles {
  KeyRule key_rule = KeyRule::FirstDot;
  std::vector<std::string> image_exts = MemberOptions{}.image_exts;
  bool no_images = false;
  std::vector<std::string> dense;  ///< dense-map suffixes, in the order they are stored
};

/// Which labels each output gets and keeps.
struct LabelRecipe {
  /// --classes-from-dirs: field `cls` is the index of the image's folder in `classes` (the
  /// run's, found before any worker starts).
  bool classes_from_dirs = false;
  std::vector<std::string> classes;
  /// --instances: one output per entry of this field; `instance_fields` sliced alike.
  std::string instances;
  std::vector<std::string> instance_fields;
  std::vector<std::string> keep_fields, drop_fields, require_fields;
};

/// What one sample may cost.
struct SampleLimits {
  uint64_t max_pixels = ConvertLimits{}.max_pixels;
  uint64_t max_label_size = ConvertLimits{}.max_label_size;
  uint64_t max_outputs_per_sample = ConvertLimits{}.max_outputs_per_sample;
};

struct SampleRecipe {
  MemberRoles members;
  LabelRecipe labels;
  TransformOptions transform;
  /// --dedup: which hashes of the source's decoded pixels each sample carries (None: none).
  DedupOptions::Mode dedup = DedupOptions::Mode::None;
  SampleLimits limits;
  /// --on-error skip: every row of a table group that cannot be converted is reported (under
  /// fail, the first is enough: it stops the run).
  bool skip_errors = false;

  bool hashes() const { return dedup != DedupOptions::Mode::None; }
};

}  // namespace tarmac
