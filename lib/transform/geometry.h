#pragma once
// The geometry of a conversion: which region of the source image becomes the output, and
// the affine map between them. Coordinates follow OpenCV's warpAffine convention: integer
// coordinates are pixel centres, so an image of width W spans [-0.5, W - 0.5].
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tarmac {

/// Row-major 2x3 matrix M: output = M * [x, y, 1].
using Affine = std::array<double, 6>;

struct Region {  // [x0, x1] x [y0, y1]
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  double width() const { return x1 - x0; }
  double height() const { return y1 - y0; }
};

enum class CropMode { None, Center, Box, Field };
enum class ResizeMode { Exact, Shorter, Longer, Fit, None, Bucket };
/// How the coordinates of a box (--crop box:/field:, --boxes) are read. Edges: x is the left
/// edge of pixel column x, so [x, y, w, h] covers image[y:y+h, x:x+w] (COCO's boxes).
/// Centers: x is the centre of pixel column x (OpenCV's warpAffine convention, as Region).
enum class BoxConvention { Edges, Centers };
/// How a shrinking output is resampled. AreaExact: every source is decoded at full resolution
/// and each output pixel is the average of its footprint (cv2.resize(INTER_AREA)). Area: the
/// same, but a JPEG shrunk to 0.3 or less is decoded at a DCT scale (1/2, 1/4, 1/8) and shrunk
/// the rest of the way by a cubic filter (transform/jpeg_region.h, transform/resample.h).
enum class ResampleMode { Area, AreaExact };

struct GeometryOptions {
  CropMode crop = CropMode::None;
  Region box;  ///< CropMode::Box: the fixed region, in `box_convention`'s coordinates
  BoxConvention box_convention = BoxConvention::Edges;  ///< of `box` and the field's box
  ResampleMode resample = ResampleMode::Area;
  double crop_scale = 1.0;  ///< scales the box/field region about its centre
  bool square = false;      ///< grow the region to a square (side = longer side)
  /// Grow the region about its centre to the aspect ratio of --size (width / height), as
  /// top-down pose models crop (e.g. 192x256); `square` is the case of a square --size.
  bool fit_aspect = false;
  int width = 0, height = 0;  ///< --size; 0 = not given
  ResizeMode resize = ResizeMode::None;
  int bucket_step = 64;           ///< ResizeMode::Bucket: sides are multiples of this
  double bucket_max_ratio = 4.0;  ///< ResizeMode::Bucket: longer side / shorter side at most
};

/// The aspect-ratio buckets for an area of `area` pixels: for every width w = k * step, the
/// tallest height h = j * step with w * h <= area; the pairs with w >= h and w / h <=
/// max_ratio, and each of them transposed. Sorted by width. Empty when none qualifies.
std::vector<std::pair<int, int>> aspect_buckets(int64_t area, int step, double max_ratio);

/// The bucket whose aspect ratio is closest to w / h in log scale; ties go to the larger
/// area, then the smaller width. `buckets` must not be empty.
std::pair<int, int> choose_bucket(const std::vector<std::pair<int, int>>& buckets, double w,
                                  double h);

struct Geometry {
  Affine m{};
  int out_width = 0, out_height = 0;
  /// True when the output is the source pixel for pixel (no crop, no resize).
  bool identity = false;
};

/// Region of interest for a box [x, y, w, h] (or [x0, y0, x1, y1] when `xyxy`).
Region region_from_box(const double* v, bool xyxy);

/// Computes region, output size and affine for one source image of size w x h. With
/// ResizeMode::Bucket the region (the whole image for crop none or center) is cut to the
/// largest centred part with the aspect ratio of its bucket, which becomes the output size.
/// `field_box` is the region taken from the sample's label (CropMode::Field); it and `o.box`
/// are read in `o.box_convention`'s coordinates.
/// Throws SampleError when the region or the output would be empty.
Geometry compute_geometry(const GeometryOptions& o, int src_width, int src_height,
                          const std::optional<Region>& field_box);

/// `r` in pixel-centre coordinates (Region's), from a box given in `c`'s coordinates.
inline Region centre_coordinates(Region r, BoxConvention c) {
  if (c == BoxConvention::Edges) return {r.x0 - 0.5, r.y0 - 0.5, r.x1 - 0.5, r.y1 - 0.5};
  return r;
}

/// Applies M to a point.
inline void apply_affine(const Affine& m, double x, double y, double& ox, double& oy) {
  ox = m[0] * x + m[1] * y + m[2];
  oy = m[3] * x + m[4] * y + m[5];
}

}  // namespace tarmac
