#pragma once
// A sample's image and dense maps, rendered into its outputs: probed once and decoded at most
// once, however many outputs (table rows, instances) are cut from them. With a single output,
// a JPEG in stored orientation, or a PNG, is decoded after the geometry is known, and only as
// far as the crop needs (jpeg_region.h, png_region.h; PNG dense maps too); otherwise the image
// is decoded whole first. Each output's label geometry follows its affine (label_geometry.h),
// its --masks are rasterised and warped, SDXL's sizes added under --resize bucket.
#include <optional>
#include <string>
#include <vector>

#include "convert/sample_context.h"
#include "convert/sample_recipe.h"
#include "transform/content_hash.h"
#include "transform/geometry.h"
#include "transform/image_codec.h"

namespace tarmac {

class ImageSource {
 public:
  /// `dense_suffixes`: each dense map's suffix in the shards ("depth.png"); `single`: one
  /// output is made (the region decodes are then worth it). Throws as the members' bytes
  /// require (guarded() turns that into the sample's error).
  ImageSource(const Member& image, std::vector<const Member*> dense,
              std::vector<std::string> dense_suffixes, const SampleRecipe& recipe, bool single,
              SampleContext& ctx);

  /// One output from `fields` (its labels): geometry, image, dense maps, transformed label
  /// geometry and masks, into `out`.
  void render(std::vector<SampleField>& fields, ProcessedSample& out, SampleContext& ctx);

 private:
  /// The crop, flip and scale of one output (its box from --crop field:NAME).
  Geometry geometry_of(std::vector<SampleField>& fields, SampleContext& ctx) const;
  /// The output image (encoded, or the source's bytes under --format keep).
  void render_image(const Geometry& g, ProcessedSample& out);
  /// The source's pixels warped by `g`, before the channels are chosen.
  cv::Mat warped_pixels(const Geometry& g);
  /// The region-decoded JPEG warped by `g` (the --dedup hashes taken on the way).
  cv::Mat warped_jpeg_region(const Geometry& g);
  /// Each --dense map, warped as the image.
  void render_dense(const Geometry& g, ProcessedSample& out, SampleContext& ctx);
  /// Each --masks field: rasterised in the source, warped, stored after the dense maps.
  void render_masks(std::vector<SampleField>& fields, const Geometry& g,
                    ProcessedSample& out) const;
  /// The hashes --dedup compares `pixels` by (format.md 1.5): near needs the pHash only.
  ContentHash hash_of(const cv::Mat& pixels) const;
  /// SDXL's micro-conditioning (format.md 1.4): original size, crop top-left, target size.
  void add_micro_conditioning(std::vector<SampleField>& fields, const Geometry& g) const;

  const Member& image_;
  std::vector<const Member*> dense_;
  std::vector<std::string> suffixes_;
  const SampleRecipe& recipe_;
  ImageHeader hdr_;
  bool single_ = false;
  bool region_path_ = false;
  cv::Mat src_;
  std::optional<ContentHash> content_;  // --dedup; the region path's is taken in render()
  int src_w_ = 0, src_h_ = 0;
  std::vector<cv::Mat> dense_mats_;  // decoded on first use
};

/// Makes each geometric label of `fields` follow `g` (--points, --boxes, --camera,
/// --polygons move; --points3d and --axis-angle are checked), and lists in
/// `out.undeclared_geometry` the fields whose names look geometric but that no flag declares.
void transform_label_geometry(std::vector<SampleField>& fields, const Geometry& g,
                              const TransformOptions& t, ProcessedSample& out);

/// The flag that would declare a field of this name as geometry ("--boxes" for "bbox"), from
/// its last dotted part, lower-cased; "" when the name is no common name of a geometric label.
std::string geometric_flag_for(const std::string& name);

}  // namespace tarmac
