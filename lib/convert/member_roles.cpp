#include "convert/member_roles.h"

#include <algorithm>

#include "common/error.h"
#include "convert/sample_labels.h"
#include "source/packed_member.h"

namespace tarmac {
namespace {

// "'a', 'b' and 'c'" (at most `most` names, then "and N more").
std::string quoted_list(const std::vector<std::string>& names, size_t most = 8) {
  std::string text;
  const size_t shown = std::min(names.size(), most);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) text += i + 1 == shown && shown == names.size() ? " and " : ", ";
    text += "'" + names[i] + "'";
  }
  if (shown < names.size()) text += " and " + std::to_string(names.size() - shown) + " more";
  return text;
}

// True for the part of a name between key and last extension that numbers a picture of its
// own ("000123", "01.01") rather than a member's role in the sample ("rgb", "depth").
bool looks_numbered(const std::string& middle) {
  return !middle.empty() && middle.find_first_of("0123456789") != std::string::npos &&
         middle.find_first_not_of("0123456789.-_") == std::string::npos;
}

// Several members whose last extension is an image's, none named by --image as a whole: which
// is the image? Numbered middle parts mean the key rule cut the names short.
SampleError several_images(const std::vector<std::pair<const Member*, std::string>>& found,
                           const std::string& key, KeyRule rule) {
  std::vector<std::string> names, exts;
  bool numbered = rule == KeyRule::FirstDot;
  for (const auto& [m, ext] : found) {
    names.push_back(m->name);
    exts.push_back(ext);
    numbered = numbered && looks_numbered(extension_stem(ext));
  }
  std::sort(names.begin(), names.end());
  std::sort(exts.begin(), exts.end());
  std::string image_flags;
  for (size_t i = 0; i < exts.size() && i < 8; ++i)
    image_flags += (i ? " or --image " : "--image ") + exts[i];
  const std::string n = std::to_string(found.size());
  if (numbered)
    return SampleError(
        "sample has " + n + " image members whose names differ before the extension, " +
            quoted_list(names) +
            ": the key ends at the first dot of a name (--key-rule first-dot, WebDataset's "
            "rule), so they are all sample '" +
            key +
            "'; if each is a picture of its own, pass --key-rule last-dot to end keys at the "
            "last dot",
        ErrorCode::AmbiguousImage);
  return SampleError(
      "sample has " + n + " image members, " + quoted_list(names) +
          ", and nothing says which is the image: pass " + image_flags +
          " (and --dense for a map to keep with it)" +
          (rule == KeyRule::FirstDot ? "; if they are pictures of their own whose names hold dots, "
                                       "--key-rule last-dot"
                                     : ""),
      ErrorCode::AmbiguousImage);
}

// What the sample has instead of an image.
SampleError no_image(const RawSample& raw, const std::vector<std::string>& image_exts) {
  std::vector<std::string> names;
  for (const auto& m : raw.members) names.push_back(m.name);
  std::string looked;
  for (size_t i = 0; i < image_exts.size(); ++i)
    looked += (i == 0 ? "." : i + 1 == image_exts.size() ? " or ." : ", .") + image_exts[i];
  return SampleError("sample has no image member (a name ending in " + looked +
                         "; --image names others); its members: " +
                         (names.empty() ? std::string("none") : quoted_list(names)),
                     ErrorCode::NoImage);
}

// An image member by its whole extension: the one of the most preferred extension is the
// image, every other is left out.
void take_image(const Member& m, size_t rank, size_t& image_rank, SampleMembers& s) {
  if (rank < image_rank) {
    if (s.image)
      s.ignored.push_back({s.image->name, ErrorCode::SecondImage,
                           "a second image member of the sample; '" + m.name + "' is used"});
    s.image = &m;
    image_rank = rank;
  } else {
    s.ignored.push_back({m.name, ErrorCode::SecondImage,
                         "a second image member of the sample; '" + s.image->name + "' is used"});
  }
}

}  // namespace

SampleMembers sort_members(const std::vector<const Member*>& members, const MemberRoles& roles) {
  SampleMembers s;
  s.dense.assign(roles.dense.size(), nullptr);
  size_t image_rank = roles.image_exts.size();
  for (const Member* member : members) {
    const Member& m = *member;
    std::string key, ext;
    split_member_name(m.name, key, ext, roles.key_rule);
    auto d = std::find(roles.dense.begin(), roles.dense.end(), ext);
    if (d != roles.dense.end()) {
      s.dense[static_cast<size_t>(d - roles.dense.begin())] = &m;
      continue;
    }
    auto im = std::find(roles.image_exts.begin(), roles.image_exts.end(), ext);
    if (im != roles.image_exts.end() && !roles.no_images) {
      take_image(m, static_cast<size_t>(im - roles.image_exts.begin()), image_rank, s);
      continue;
    }
    if (!roles.no_images && is_image_extension(ext, roles.image_exts)) {
      s.by_last_ext.emplace_back(&m, ext);
      continue;
    }
    if (is_label_extension(last_extension(ext))) {
      s.labels.emplace_back(&m, ext);
      continue;
    }
    s.ignored.push_back({m.name, ErrorCode::UnusedMember,
                         "extension '." + ext + "' is neither an image, a dense map nor a label"});
  }
  if (s.image) {
    for (const auto& [m, ext] : s.by_last_ext)
      s.ignored.push_back({m->name, ErrorCode::SecondImage,
                           "an image member that is not the sample's image ('" + s.image->name +
                               "' is); pass --dense " + ext + " to keep it as a dense map"});
  } else if (s.by_last_ext.size() == 1) {
    s.image = s.by_last_ext.front().first;
  }
  return s;
}

void check_image_found(const SampleMembers& s, const RawSample& raw, const MemberRoles& roles) {
  if (s.image) return;
  if (s.by_last_ext.size() > 1) throw several_images(s.by_last_ext, raw.key, roles.key_rule);
  throw no_image(raw, roles.image_exts);
}

void check_dense_found(const SampleMembers& s, const MemberRoles& roles) {
  for (size_t i = 0; i < s.dense.size(); ++i)
    if (!s.dense[i])
      throw SampleError("sample has no dense map member '." + roles.dense[i] + "'",
                        ErrorCode::NoDenseMap);
}

std::vector<const Member*> unpacked_members(const RawSample& raw, std::vector<Member>& inflated,
                                            SampleContext& ctx) {
  std::vector<const Member*> members;
  members.reserve(raw.members.size());
  inflated.resize(raw.members.size());
  for (const auto& m : raw.members) {
    if (!is_packed(m)) {
      members.push_back(&m);
      continue;
    }
    ctx.member = &m.name;
    members.push_back(&unpack_member(m, inflated[members.size()]));
  }
  ctx.member = nullptr;
  return members;
}

}  // namespace tarmac
