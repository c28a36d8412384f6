#pragma once
// The geometric kinds a dataset declares for its label fields (docs/format.md, the schema's
// "geometry" key; docs/reader.md, "Augmentation"): what an augmentation does to each field.
// Datasets written before the key declare points and boxes in their manifest's
// output_options (format/manifest.h declared_geometry); those are read as such.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "format/field_geometry.h"
#include "read/dataset.h"

namespace tarmac {

/// One field's geometry as the augmentation reads it: the schema's key as format/field_geometry.h
/// parsed it (its one parser), or a manifest's record.
struct AugmentGeometry {
  using Kind = GeometryKind;
  Kind kind = Kind::Points;
  bool xyxy = false;   ///< boxes: x0, y0, x1, y1 (else x, y, w, h)
  bool edges = false;  ///< boxes, camera: pixel-edge coordinates (else pixel centres)
  bool matrix = true;  ///< camera: [3, 3] K (else [4] fx, fy, cx, cy)
  std::string layout;  ///< axis_angle: root, smpl, smpl-body, ... or pairs
  int64_t joints = 1;  ///< axis_angle: joints per pose (1 for root)
  std::vector<std::pair<int, int>> pairs;  ///< axis_angle: joints a flip swaps
  std::string partner;                     ///< axis_angle (mano): the other hand's field
  /// axis_angle: joint 0 of each pose is a global orientation (root, smpl), rotated in-plane.
  bool rotates_root() const { return layout == "root" || layout == "smpl"; }
};

/// What a dataset declares: every field's geometry by name (the schema's "geometry" objects,
/// then for the fields without one the manifest's --points and --boxes, with its
/// --box-convention), and that convention itself (for boxes a batch names but nothing declares).
struct DeclaredFields {
  std::map<std::string, AugmentGeometry> fields;
  bool manifest_box_edges = false;
  /// Fields whose geometry is of a kind this version does not know (a later one's): name ->
  /// the geometry object's JSON text. They cannot be augmented.
  std::map<std::string, std::string> unknown;
};

/// Reads what `ds` declares. A malformed geometry object was refused when the dataset opened
/// (format/field_spec.h), so this does not throw but for an unreadable manifest.
DeclaredFields declared_geometry(const Dataset& ds);

}  // namespace tarmac
