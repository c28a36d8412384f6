#include "read/geometry.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "format/json_object.h"
#include "format/manifest.h"
#include "format/names.h"

namespace tarmac {
namespace {

using json = nlohmann::ordered_json;

// The joints per pose of each named axis-angle layout (the conversion resolves its pairs).
const std::map<std::string, int64_t>& layout_joints() {
  static const std::map<std::string, int64_t> j = {
      {"root", 1},       {"smpl", 24},       {"smpl-body", 23}, {"smplx-body", 21},
      {"mano-left", 15}, {"mano-right", 15}, {"pairs", 0}};
  return j;
}

AugmentGeometry parse_one(const std::string& field, const json& g) {
  auto bad = [&](const std::string& why) {
    return ParseError("schema field '" + field + "' has a geometry " + g.dump() + " that " + why);
  };
  auto text = [&](const char* key, const std::string& fallback) {
    if (!g.contains(key)) return fallback;
    if (!g[key].is_string()) throw bad(std::string("has a '") + key + "' that is not text");
    return g[key].get<std::string>();
  };
  if (!g.is_object() || !g.contains("kind") || !g["kind"].is_string())
    throw bad("is not an object with a text 'kind'");
  const std::string kind = g["kind"].get<std::string>();
  AugmentGeometry f;
  if (kind == "points") {
    f.kind = AugmentGeometry::Kind::Points;
  } else if (kind == "boxes") {
    f.kind = AugmentGeometry::Kind::Boxes;
    const std::string format = text("box_format", "xywh"), conv = text("convention", "centers");
    if (format != "xywh" && format != "xyxy") throw bad("has a box_format not xywh or xyxy");
    if (conv != "centers" && conv != "edges") throw bad("has a convention not centers or edges");
    f.xyxy = format == "xyxy";
    f.edges = conv == "edges";
  } else if (kind == "points3d") {
    f.kind = AugmentGeometry::Kind::Points3d;
  } else if (kind == "camera") {
    f.kind = AugmentGeometry::Kind::Camera;
    const std::string conv = text("convention", "centers"), layout = text("layout", "K");
    if (conv != "centers" && conv != "edges") throw bad("has a convention not centers or edges");
    if (layout != "K" && layout != "fxfycxcy") throw bad("has a layout not K or fxfycxcy");
    f.edges = conv == "edges";
    f.matrix = layout == "K";
  } else if (kind == "polygons") {
    f.kind = AugmentGeometry::Kind::Polygons;
  } else if (kind == "mask") {
    f.kind = AugmentGeometry::Kind::Mask;
  } else if (kind == "axis_angle") {
    f.kind = AugmentGeometry::Kind::AxisAngle;
    f.layout = text("layout", "");
    const auto known = layout_joints().find(f.layout);
    if (known == layout_joints().end())
      throw bad(
          "has an unknown layout (root, smpl, smpl-body, smplx-body, mano-left, "
          "mano-right or pairs)");
    f.joints = known->second;
    if (g.contains("joints")) {
      if (!g["joints"].is_number_integer() || g["joints"].get<int64_t>() <= 0 ||
          g["joints"].get<int64_t>() > (1 << 20))
        throw bad("has 'joints' that is not a positive integer");
      const int64_t j = g["joints"].get<int64_t>();
      if (f.joints && j != f.joints)
        throw bad("says " + std::to_string(j) + " joints where layout " + f.layout + " has " +
                  std::to_string(f.joints));
      f.joints = j;
    }
    if (f.joints == 0) throw bad("has layout pairs without 'joints'");
    // A flip permutes the joints by these pairs: a skeleton's layout without them would be
    // mirrored unpermuted, silently wrong. root and the MANO hands have none.
    const bool needs_pairs = f.layout != "root" && !f.layout.starts_with("mano");
    if (needs_pairs && !g.contains("pairs"))
      throw bad("has layout " + f.layout + " without its 'pairs' (the joints a flip swaps)");
    if (g.contains("pairs")) {
      if (!g["pairs"].is_array()) throw bad("has 'pairs' that is not a list of [a, b]");
      std::set<int64_t> seen;
      for (const auto& p : g["pairs"]) {
        if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() ||
            !p[1].is_number_integer())
          throw bad("has a pair " + p.dump() + " that is not [a, b] of joint indices");
        const int64_t a = p[0].get<int64_t>(), b = p[1].get<int64_t>();
        if (a < 0 || b < 0 || a >= f.joints || b >= f.joints)
          throw bad("has a pair " + p.dump() + " out of range for " + std::to_string(f.joints) +
                    " joints (0-based)");
        if (a == b || !seen.insert(a).second || !seen.insert(b).second)
          throw bad("has a pair " + p.dump() + " that names a joint twice");
        f.pairs.emplace_back(int(a), int(b));
      }
    }
    f.partner = text("partner", "");
    if (f.layout.starts_with("mano") && f.partner.empty())
      throw bad("has a mano layout without the other hand's field ('partner')");
  } else {
    throw bad("has an unknown kind (points, boxes, points3d, axis_angle, camera, polygons, mask)");
  }
  return f;
}

}  // namespace

std::map<std::string, AugmentGeometry> declared_geometry(const Dataset& ds) {
  std::map<std::string, AugmentGeometry> out;
  const auto& meta = ds.metadata();
  if (const auto it = meta.find(format::kMetaSchema); it != meta.end()) {
    // The reader parsed and checked this text at open; here only the geometry keys are read.
    const json schema = json::parse(it->second, nullptr, false);
    if (schema.is_object())
      for (const auto& [name, entry] : schema.items())
        if (entry.is_object() && entry.contains("geometry"))
          out.emplace(name, parse_one(name, entry["geometry"]));
  }
  std::ifstream in(std::filesystem::path(ds.path()) / format::kManifestFile);
  if (!in) return out;
  const format::DeclaredGeometry old = format::declared_geometry(format::parse_ordered(in, false));
  for (const std::string& p : old.points) out.try_emplace(p, AugmentGeometry{});
  for (const std::string& spec : old.boxes) {
    std::string name = spec;
    bool xyxy = false;
    for (const char* suffix : {":xywh", ":xyxy"})
      if (spec.size() > 5 && spec.ends_with(suffix)) {
        name = spec.substr(0, spec.size() - 5);
        xyxy = suffix[3] == 'x';
      }
    AugmentGeometry b;
    b.kind = AugmentGeometry::Kind::Boxes;
    b.xyxy = xyxy;
    b.edges = old.box_edges;
    out.try_emplace(name, b);
  }
  return out;
}

}  // namespace tarmac
