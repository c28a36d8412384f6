#pragma once
// Label geometry: label fields made to follow the image's affine (the crop, flip, scale of a
// sample), each by its kind's rule, and checked where the image's geometry leaves them as they
// are. Points (--points) and polygons (--polygons) move as points; boxes (--boxes) by their
// corners, in either convention; camera intrinsics (--camera) become A K; 3D points
// (--points3d) and axis-angle poses (--axis-angle) are checked, not moved (a crop or resize
// does not move the camera). --masks' segmentation text is gathered here for the renderer.
// Each refusal is a SampleError (ErrorCode::BadField) naming the field and its member.
#include <string>
#include <vector>

#include "convert/convert_options.h"
#include "labels/schema.h"
#include "transform/geometry.h"

namespace tarmac {

/// The field called `name`, or null.
SampleField* find_field(std::vector<SampleField>& fields, const std::string& name);

/// A numeric value's elements as doubles, and back (F32 stays F32; anything else becomes F64).
std::vector<double> as_doubles(const FieldValue& v);
void store_doubles(FieldValue& v, const std::vector<double>& d);

/// The numeric field `name` that the option of `role` ("points", "boxes", ...) declares;
/// SampleError when it is missing, null or not numeric.
SampleField& numeric_field(std::vector<SampleField>& fields, const std::string& name,
                           const char* role);

/// "ROLE field 'K' (member 'a.json')", for messages about a declared field.
std::string field_where(const char* role, const SampleField& f);

/// Moves every point (x, y first of the last axis; the other values kept) by `m`.
void transform_points(SampleField& f, const Affine& m);

/// Moves every box (x, y, w, h, or with `xyxy` x0, y0, x1, y1; further values kept) by its
/// corners; in `convention` Edges the corners are moved as the pixel centres half a pixel
/// inside them, then back out.
void transform_boxes(SampleField& f, bool xyxy, const Affine& m, BoxConvention convention);

/// --points3d: at least x, y, z in the last axis (left as they are).
void check_points3d(const SampleField& f);

/// --axis-angle: [..., 3] or a flat [3 * joints], of the layout's joints (left as it is).
void check_axis_angle(const SampleField& f, const AxisAngleField& a);

/// --camera: K [3, 3] or (fx, fy, cx, cy) [4] becomes A K, A the 3x3 of `m` (with `edges`,
/// as seen in pixel centres and back).
void transform_camera(SampleField& f, const Affine& m, bool edges);

/// --polygons: numeric rows of x0, y0, x1, y1, ... or COCO's JSON polygon lists, each vertex
/// moved by `m`; an RLE is refused (it is a --masks field).
void transform_polygons(SampleField& f, const Affine& m);

/// --masks NAME: the segmentation's JSON text from field NAME (JSON text or numeric polygons),
/// or from NAME.counts and NAME.size (an RLE object a JSON member flattened).
std::string segmentation_text(const std::vector<SampleField>& fields, const std::string& name);

}  // namespace tarmac
