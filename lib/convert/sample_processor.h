#pragma once
// Turns one raw sample (its members' bytes) into what the writer stores: parsed and
// transformed label fields, the encoded output image and dense maps, and the affine. Runs on
// worker threads; holds no shared state. Its jobs, each in its own unit: which member is what
// (member_roles.h), the labels (sample_labels.h), --instances (instances.h), the image and
// its geometry (image_source.h); this unit puts them together, for a sample and for the rows
// of a table that share an image.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convert/sample_recipe.h"
#include "labels/schema.h"
#include "source/member.h"
#include "transform/content_hash.h"

namespace tarmac {

struct Blob {
  std::string member_suffix;  ///< extension in the shard: "jpg", "depth.png"
  std::vector<uint8_t> bytes;
  int width = 0, height = 0;
  uint32_t crc32 = 0;
};

/// A member of the sample that was not used, and why.
struct IgnoredMember {
  std::string member;
  ErrorCode code = ErrorCode::UnusedMember;
  std::string reason;
};

struct ProcessedSample {
  std::string key;
  uint32_t input = 0;
  std::string error;  ///< non-empty: the sample is bad (the reason, naming the member)
  ErrorCode error_code = ErrorCode::None;
  std::vector<SampleField> fields;
  Blob image;
  std::vector<Blob> dense;  ///< in the order of MemberRoles::dense, then the --masks
  Affine affine{1, 0, 0, 0, 1, 0};
  /// --dedup: the hashes of the source image's decoded pixels, before any crop or resize.
  std::optional<ContentHash> content;
  std::vector<IgnoredMember> ignored;
  /// Label fields (name, source extension) from .npy members of the image's height and width,
  /// kept as labels while the image was cropped or resized: likely dense maps without --dense.
  std::vector<std::pair<std::string, std::string>> image_sized_labels;
  /// Label fields (name, the flag that would declare them) whose names are common names of
  /// geometric labels, kept untransformed while the image was cropped or resized.
  std::vector<std::pair<std::string, std::string>> undeclared_geometry;
  /// Further outputs made from the same source (table rows sharing an image, instances), in
  /// order, after this one.
  std::vector<ProcessedSample> more;
};

class TablePlan;

/// Processes one sample. Never throws for bad data: the reason goes to `error`.
ProcessedSample process_sample(const RawSample& raw, const SampleRecipe& recipe);

/// Processes the rows of table group raw.table_group (raw.members: its members in the plan's
/// slot order, the image first): one decode of the image, one output per row, in row order.
/// Never throws for bad data: each row's reason goes to its own `error`.
ProcessedSample process_table_group(const RawSample& raw, const TablePlan& plan,
                                    const SampleRecipe& recipe);

}  // namespace tarmac
