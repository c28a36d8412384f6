#pragma once
// Random geometric augmentation in the batch decode (docs/reader.md, "Augmentation"): the
// parameters, and one sample's geometry as a pure function of (seed, epoch, index), so that
// it is the same whatever the threads, the batch or the resume point.
#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "common/dtype.h"

namespace tarmac {

/// What to draw per sample. Output pixels are M * stored pixels with M = A * F * C: C maps
/// the crop region (the whole image without `crop`) onto the output, F flips, A rotates and
/// scales about the output's centre and translates.
struct Augment {
  int width = 0, height = 0;  ///< the output size, > 0
  double flip = 0;            ///< probability of a horizontal flip, [0, 1]
  /// Point indices (0-based, along a points field's joint axis) swapped after a flip.
  std::vector<std::pair<int, int>> flip_pairs;
  double rotate = 0;                    ///< degrees, uniform in [-rotate, rotate]
  double scale_min = 1, scale_max = 1;  ///< uniform; 0 < min <= max
  double translate = 0;  ///< fraction of the output size, uniform in [-t, t] on each axis
  /// Random resized crop (torchvision's RandomResizedCrop.get_params): area fraction in
  /// [crop_min, crop_max], aspect ratio log-uniform in [ratio_min, ratio_max].
  bool crop = false;
  double crop_min = 0.08, crop_max = 1;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  double fill = 0;  ///< the image's border value (dense maps: zero)
};

/// The ranges check_augment holds every parameter to (docs/reader.md, "Augmentation"): beyond
/// them a draw is no augmentation any model trains on, and its floats lose their precision.
inline constexpr double kMaxRotate = 180;   ///< degrees
inline constexpr double kMaxScale = 64;     ///< scale_max
inline constexpr double kMaxTranslate = 8;  ///< fractions of the output size
inline constexpr double kMinRatio = 1.0 / 64, kMaxRatio = 64;

/// Throws ArgumentError naming the first bad parameter: every one finite and in its range (flip
/// [0, 1], rotate [0, kMaxRotate], scale (0, kMaxScale], translate [0, kMaxTranslate], crop
/// (0, 1], ratio [kMinRatio, kMaxRatio], fill [0, 255]); flip_pairs with no index twice.
void check_augment(const Augment& a);

/// Uniform draw number `k` of sample `index` in [0, 1): splitmix64's finaliser over a hash of
/// (seed, epoch, index, k), 53 bits.
double augment_uniform(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t k);

/// One sample's parameters and the map they give.
struct AugmentDraw {
  bool flip = false;
  double angle = 0;  ///< degrees, counter-clockwise as displayed (cv2.getRotationMatrix2D)
  double scale = 1;
  double tx = 0, ty = 0;  ///< output pixels
  int crop_x = 0, crop_y = 0, crop_w = 0,
      crop_h = 0;             ///< stored pixels (the whole image without crop)
  std::array<double, 6> m{};  ///< row-major 2x3: stored pixel coordinates -> output
};

/// Sample `index`'s draw for a stored image of src_w x src_h.
AugmentDraw draw_augment(const Augment& a, int src_w, int src_h, uint64_t seed, uint64_t epoch,
                         uint64_t index);

/// What the warp of map `m` onto an out_w x out_h output reads from a stored image of
/// src_w x src_h: the largest DCT reduction 1/denom (denom a power of two <= max_denom) after
/// which the warp still shrinks or keeps the size (denom times m's largest singular value <= 1),
/// and the pixels of the image at that scale that the bilinear taps of the output's pixels
/// touch, one more on each side, clipped to the scaled image (ceil(src / denom) pixels a side).
/// The rect is empty when the output lies wholly outside the image.
struct AugmentSource {
  int denom = 1;
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  ///< [x0, x1) x [y0, y1), scaled pixels
  bool empty() const { return x1 <= x0 || y1 <= y0; }
};
AugmentSource augment_source(const std::array<double, 6>& m, int out_w, int out_h, int src_w,
                             int src_h, int max_denom);

/// Transforms one sample's value of a points field in place: x, y (the first two values of
/// the last axis) mapped by d.m, other columns left; after a flip, the rows of each pair swapped
/// along the joint axis (the second to last; a field of one point has none). `shape` is the
/// per-sample shape; dtype F32 or F64 (ArgumentError otherwise).
void augment_points(const AugmentDraw& d, const Augment& a, DType dtype,
                    std::span<const int64_t> shape, std::span<uint8_t> value);

/// Transforms one sample's value of a boxes field in place: each row's first four values (x, y,
/// w, h, or x0, y0, x1, y1 with `xyxy`) become the axis-aligned box of its four mapped corners;
/// other values left. Dtype F32 or F64. With `edges` the corners are pixel-edge coordinates
/// (`--box-convention edges`): a corner c maps to M (c - 0.5) + 0.5, so the box stays in edges.
void augment_boxes(const AugmentDraw& d, DType dtype, std::span<const int64_t> shape, bool xyxy,
                   bool edges, std::span<uint8_t> value);

/// The 3D map that camera-frame geometry (x right, y down, z forward) undergoes under draw d,
/// row-major 3x3: G = Rz * S, S = diag(-1, 1, 1) after a flip (else I), Rz the rotation about
/// the camera's z axis whose xy block is the image rotation's, [[cos, sin], [-sin, cos]] of
/// d.angle: so that projecting G * P with the augmented camera gives the augmented 2D point
/// (mmhuman3d's _rotate_joints_3d(-angle) convention; docs/reader.md, "Augmentation").
std::array<double, 9> augment_frame(const AugmentDraw& d);

/// Transforms one sample's value of a points3d field in place: the first three values of the
/// last axis mapped by augment_frame(d), other columns left; after a flip the rows of each
/// pair swapped along the joint axis, as for points. Dtype F32 or F64.
void augment_points3d(const AugmentDraw& d, const Augment& a, DType dtype,
                      std::span<const int64_t> shape, std::span<uint8_t> value);

/// One sample's axis-angle value, [..., J, 3] or flat [3 J] (`joints` J per group; 1 for a
/// `root` layout, every 3-vector then a root). After a flip: the joints of each pair swapped
/// and every rotation mirrored, (x, y, z) -> (x, -y, -z) (S R S). Then, with `rotate_root`,
/// joint 0 of each group (every vector for `root`) premultiplied by the in-plane rotation Rz
/// (mmhuman3d's _rotate_smpl_pose). Dtype F32 or F64. A partner field's exchange (mano hands)
/// is the caller's: it passes the partner's value here.
void augment_axis_angle(const AugmentDraw& d, DType dtype, int64_t joints,
                        std::span<const std::pair<int, int>> pairs, bool rotate_root,
                        std::span<uint8_t> value);

/// One sample's camera intrinsics, [..., 3, 3] K (`matrix`) or [..., 4] (fx, fy, cx, cy):
/// K' = A K G^T, A the 3x3 of d.m (in pixel-edge coordinates with `edges`: T(0.5) A T(-0.5)),
/// G = augment_frame(d); so K' G P projects to A (K P). Without flip and rotation, K' = A K.
/// The [4] layout keeps K''s diagonal and last column (exact when its off-diagonal is zero:
/// no rotation, or square pixels under an isotropic map). Dtype F32 or F64.
void augment_camera(const AugmentDraw& d, DType dtype, bool matrix, bool edges,
                    std::span<uint8_t> value);

}  // namespace tarmac
