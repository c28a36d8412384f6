#pragma once
// A sample's labels: its label members parsed into fields (.json, .npy, .npz, .txt, .cls), the
// class of its folder (--classes-from-dirs), the fields it must have (--require) and the ones
// it keeps (--fields, --drop-fields). Each refusal is a SampleError naming the member or field.
#include <cstdint>
#include <string>
#include <vector>

#include "convert/sample_recipe.h"
#include "labels/schema.h"
#include "source/member.h"

namespace tarmac {

/// The last dotted part of a member's extension: "depth.png" -> "png", "txt" -> "txt".
std::string last_extension(const std::string& ext);

/// The extension without its last part: "caption.txt" -> "caption"; "txt" -> "txt".
std::string extension_stem(const std::string& ext);

/// True for the last extensions of the label files tarmac reads: json, npy, npz, txt, cls.
bool is_label_extension(const std::string& last);

/// The code of a label member that does not parse, by its extension ("json", "smpl.npz").
ErrorCode label_error_code(const std::string& ext);

/// Parses label member `m` of extension `ext` into fields appended to `out`: a JSON object's
/// keys (nested ones dotted), an .npz's arrays (inflated within `max_label_size`), one .npy,
/// .txt or .cls value named by the extension's stem. A field name twice is an error.
void parse_label_member(const Member& m, const std::string& ext, uint64_t max_label_size,
                        std::vector<SampleField>& out);

/// Whether `m` is read as a label (neither an image nor a dense map, a label extension).
bool is_label_member(const Member& m, const MemberRoles& roles);

/// Refuses (MemberTooLarge) a label member over `max_label_size` before it is inflated or
/// parsed: a JSON document costs ~25-40x its text while parsed.
void check_label_sizes(const RawSample& raw, const MemberRoles& roles, uint64_t max_label_size);

/// Refuses (BadField) fields --require names that are missing or null.
void check_required(const std::vector<SampleField>& fields, const LabelRecipe& labels);

/// --classes-from-dirs: adds field `cls`, the index in `classes` of the folder holding `image`.
void add_class(const Member& image, const std::vector<std::string>& classes,
               std::vector<SampleField>& fields);

/// --fields / --drop-fields, once the geometry has used what it needs. The provenance and
/// geometry fields tarmac adds (`__row__`, SDXL's sizes) are always kept.
void select_fields(std::vector<SampleField>& fields, const LabelRecipe& labels);

}  // namespace tarmac
