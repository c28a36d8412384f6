#pragma once
// Which member of a raw sample is its image, which are its dense maps, which its labels, and
// which are left out and why: a sample's members sorted by their extensions (--image, --dense,
// --no-images), before anything is decoded or parsed.
#include <string>
#include <utility>
#include <vector>

#include "convert/sample_context.h"
#include "convert/sample_recipe.h"
#include "source/member.h"

namespace tarmac {

/// A sample's members by role. Pointers into the members given to sort_members.
struct SampleMembers {
  const Member* image = nullptr;     ///< null: none found (or several, none preferred)
  std::vector<const Member*> dense;  ///< one per MemberRoles::dense, null where missing
  std::vector<std::pair<const Member*, std::string>> labels;  ///< member, its extension
  /// Members whose last extension is an image's, none named by --image as a whole ("rgb.png"
  /// for "png"): the image when there is one of them and no other, else left out.
  std::vector<std::pair<const Member*, std::string>> by_last_ext;
  std::vector<IgnoredMember> ignored;  ///< left out, each with its code and reason
};

/// Sorts `members` (in their order) by role. Never throws: what is missing is checked by
/// check_image_found and check_dense_found, after the labels are read.
SampleMembers sort_members(const std::vector<const Member*>& members, const MemberRoles& roles);

/// Refuses (AmbiguousImage, NoImage) a sample without its image: several members that could be
/// it (saying which flag settles it), or none (listing the members it has).
void check_image_found(const SampleMembers& s, const RawSample& raw, const MemberRoles& roles);

/// Refuses (NoDenseMap) a sample missing one of the --dense maps.
void check_dense_found(const SampleMembers& s, const MemberRoles& roles);

/// The sample's members with their bytes as meant: zip members inflated into `inflated`
/// (which must outlive the pointers), the others as they are; `ctx` names the member being
/// inflated, for guarded().
std::vector<const Member*> unpacked_members(const RawSample& raw, std::vector<Member>& inflated,
                                            SampleContext& ctx);

}  // namespace tarmac
