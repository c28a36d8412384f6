#pragma once
// The geometric kind of a label column (docs/format.md 1.4, "Geometric kinds"): the `geometry`
// key of its schema entry, declared at conversion (--points, --boxes, --points3d,
// --axis-angle, --camera, --polygons) so that a reader's augmentation knows how each field
// moves with the image. An addition within tarmac/1: readers that do not know it ignore it.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tarmac {

enum class GeometryKind : uint8_t { Points, Boxes, Points3d, AxisAngle, Camera, Polygons };

/// "points", "boxes", "points3d", "axis_angle", "camera", "polygons".
std::string_view geometry_kind_name(GeometryKind k);

/// One field's geometric kind and what its reader needs to move it.
struct FieldGeometry {
  GeometryKind kind = GeometryKind::Points;
  /// Boxes: [x0, y0, x1, y1] rather than [x, y, w, h] first.
  bool xyxy = false;
  /// Boxes and cameras: pixel-edge coordinates (the top-left pixel's centre is (0.5, 0.5))
  /// rather than pixel centres.
  bool edges = false;
  /// AxisAngle: "root", "smpl", "smpl-body", "smplx-body", "mano-left", "mano-right" or
  /// "pairs"; Camera: "K" ([3, 3]) or "fxfycxcy" ([4]).
  std::string layout{};
  int64_t joints = 0;                        ///< AxisAngle: joints per value
  std::vector<std::pair<int, int>> pairs{};  ///< AxisAngle: 0-based joints a flip swaps
  std::string partner{};                     ///< AxisAngle mano-*: the other hand's field

  bool operator==(const FieldGeometry&) const = default;
};

/// The `geometry` object of a schema entry.
nlohmann::ordered_json geometry_json(const FieldGeometry& g);

/// Parses a `geometry` object. nullopt for a kind this version does not know (ignored, as
/// older readers ignore the key); throws ParseError (the reason, for the caller to prefix with
/// the field) for a known kind whose keys are missing or malformed.
std::optional<FieldGeometry> geometry_from_json(const nlohmann::json& j);

/// An axis-angle layout's joint count and left/right pairs (0-based), docs/format.md:
/// "root" 1, "smpl" 24, "smpl-body" 23, "smplx-body" 21, "mano-left"/"mano-right" 15.
/// nullopt for a name that is not one of them ("pairs" has no fixed table).
struct AxisAngleLayout {
  int64_t joints = 0;
  std::vector<std::pair<int, int>> pairs;
};
std::optional<AxisAngleLayout> axis_angle_layout(std::string_view name);

}  // namespace tarmac
