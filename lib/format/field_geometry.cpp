#include "format/field_geometry.h"

#include "common/error.h"

namespace tarmac {
namespace {

constexpr GeometryKind kKinds[] = {GeometryKind::Points,   GeometryKind::Boxes,
                                   GeometryKind::Points3d, GeometryKind::AxisAngle,
                                   GeometryKind::Camera,   GeometryKind::Polygons};

// SMPL's 24 joints, root first: the left/right pairs mmhuman3d's _flip_smpl_pose swaps.
constexpr std::pair<int, int> kSmplPairs[] = {{1, 2},   {4, 5},   {7, 8},   {10, 11}, {13, 14},
                                              {16, 17}, {18, 19}, {20, 21}, {22, 23}};

// SMPL's pairs among joints first..last, renumbered from 0 at `first`.
std::vector<std::pair<int, int>> smpl_pairs(int first, int last) {
  std::vector<std::pair<int, int>> out;
  for (const auto& [a, b] : kSmplPairs)
    if (a >= first && b <= last) out.emplace_back(a - first, b - first);
  return out;
}

}  // namespace

std::string_view geometry_kind_name(GeometryKind k) {
  switch (k) {
    case GeometryKind::Points:
      return "points";
    case GeometryKind::Boxes:
      return "boxes";
    case GeometryKind::Points3d:
      return "points3d";
    case GeometryKind::AxisAngle:
      return "axis_angle";
    case GeometryKind::Camera:
      return "camera";
    case GeometryKind::Polygons:
      return "polygons";
  }
  return "?";
}

std::optional<AxisAngleLayout> axis_angle_layout(std::string_view name) {
  if (name == "root") return AxisAngleLayout{1, {}};
  if (name == "smpl") return AxisAngleLayout{24, smpl_pairs(0, 23)};
  // SMPL's body_pose: the 23 joints after the root.
  if (name == "smpl-body") return AxisAngleLayout{23, smpl_pairs(1, 23)};
  // SMPL-X's body_pose: SMPL's first 21 body joints (its hands are fields of their own).
  if (name == "smplx-body") return AxisAngleLayout{21, smpl_pairs(1, 21)};
  // A hand's 15 joints have no left/right pairs: a flip exchanges the two hands' fields.
  if (name == "mano-left" || name == "mano-right") return AxisAngleLayout{15, {}};
  return std::nullopt;
}

nlohmann::ordered_json geometry_json(const FieldGeometry& g) {
  nlohmann::ordered_json j = {{"kind", std::string(geometry_kind_name(g.kind))}};
  const char* convention = g.edges ? "edges" : "centers";
  switch (g.kind) {
    case GeometryKind::Boxes:
      j["box_format"] = g.xyxy ? "xyxy" : "xywh";
      j["convention"] = convention;
      break;
    case GeometryKind::Camera:
      j["convention"] = convention;
      j["layout"] = g.layout;
      break;
    case GeometryKind::AxisAngle: {
      j["layout"] = g.layout;
      j["joints"] = g.joints;
      nlohmann::ordered_json pairs = nlohmann::ordered_json::array();
      for (const auto& [a, b] : g.pairs) pairs.push_back({a, b});
      j["pairs"] = std::move(pairs);
      if (!g.partner.empty()) j["partner"] = g.partner;
      break;
    }
    default:
      break;
  }
  return j;
}

std::optional<FieldGeometry> geometry_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw ParseError("is not a JSON object");
  const auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string()) throw ParseError("has no 'kind' string");
  FieldGeometry g;
  bool known = false;
  for (GeometryKind k : kKinds)
    if (geometry_kind_name(k) == kind->get<std::string>()) {
      g.kind = k;
      known = true;
    }
  if (!known) return std::nullopt;
  auto string_of = [&](const char* key, std::initializer_list<std::string_view> allowed) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string())
      throw ParseError(std::string("has no '") + key + "' string");
    const std::string s = it->get<std::string>();
    for (std::string_view a : allowed)
      if (a == s) return s;
    throw ParseError(std::string("has an unknown '") + key + "' " + it->dump());
  };
  switch (g.kind) {
    case GeometryKind::Boxes:
      g.xyxy = string_of("box_format", {"xywh", "xyxy"}) == "xyxy";
      g.edges = string_of("convention", {"centers", "edges"}) == "edges";
      break;
    case GeometryKind::Camera:
      g.edges = string_of("convention", {"centers", "edges"}) == "edges";
      g.layout = string_of("layout", {"K", "fxfycxcy"});
      break;
    case GeometryKind::AxisAngle: {
      g.layout = string_of("layout", {"root", "smpl", "smpl-body", "smplx-body", "mano-left",
                                      "mano-right", "pairs"});
      const auto joints = j.find("joints");
      // A bound on the joints keeps `seen` below small whatever the file says.
      constexpr int64_t kMaxJoints = 1 << 16;
      if (joints == j.end() || !joints->is_number_integer() || joints->get<int64_t>() < 1 ||
          joints->get<int64_t>() > kMaxJoints)
        throw ParseError("has no 'joints' from 1 to " + std::to_string(kMaxJoints));
      g.joints = joints->get<int64_t>();
      if (const auto fixed = axis_angle_layout(g.layout); fixed && fixed->joints != g.joints)
        throw ParseError("says " + std::to_string(g.joints) + " joints where layout " + g.layout +
                         " has " + std::to_string(fixed->joints));
      const auto pairs = j.find("pairs");
      if (pairs == j.end() || !pairs->is_array()) throw ParseError("has no 'pairs' array");
      std::vector<bool> seen(static_cast<size_t>(g.joints), false);
      for (const auto& p : *pairs) {
        if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() ||
            !p[1].is_number_integer())
          throw ParseError("has a pair that is not two integers: " + p.dump());
        const int64_t a = p[0].get<int64_t>(), b = p[1].get<int64_t>();
        if (a < 0 || b < 0 || a >= g.joints || b >= g.joints || a == b)
          throw ParseError("has a pair " + p.dump() + " outside its " + std::to_string(g.joints) +
                           " joints");
        if (seen[static_cast<size_t>(a)] || seen[static_cast<size_t>(b)])
          throw ParseError("names a joint in two pairs: " + p.dump());
        seen[static_cast<size_t>(a)] = seen[static_cast<size_t>(b)] = true;
        g.pairs.emplace_back(static_cast<int>(a), static_cast<int>(b));
      }
      if (const auto partner = j.find("partner"); partner != j.end()) {
        if (!partner->is_string()) throw ParseError("has a 'partner' that is not a string");
        g.partner = partner->get<std::string>();
      }
      // A flip exchanges the two hands: a hand without the other's field cannot follow it.
      if (g.layout.starts_with("mano") && g.partner.empty())
        throw ParseError("has a mano layout without the other hand's field ('partner')");
      break;
    }
    default:
      break;
  }
  return g;
}

}  // namespace tarmac
