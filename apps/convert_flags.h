#pragma once
// The flags of `tarmac convert`: registered on a CLI11 command, held as typed, and turned into
// the library's ConvertOptions (docs/cli.md lists them).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "convert/convert_options.h"

namespace tarmac::cli {

/// Every flag of `tarmac convert` as the user gave it (defaults as --help shows them).
struct ConvertFlags {
  std::vector<std::string> inputs;
  std::string output;
  std::string endpoint_url;    ///< --endpoint-url; "" = AWS_ENDPOINT_URL or AWS's own
  std::string checkpoint_dir;  ///< -o s3://: --checkpoint-dir; "" = the default
  std::string multipart_size = "64M";
  bool no_lock = false;
  bool overwrite = false, resume = false;
  double checkpoint_every = 30;
  // Transform.
  std::string crop = "none";
  std::string box_convention = "edges";
  double crop_scale = 1.0;
  bool square = false, fit_aspect = false;
  std::string size, resize;  ///< "" = not given
  std::string resample = "area";
  int bucket_step = 64;
  double bucket_max_ratio = 4.0;
  std::vector<std::string> points, boxes, dense;
  std::vector<std::string> points3d, axis_angle, camera, polygons, masks;  ///< as given
  double pad_value = 0;
  std::string format = "jpg";
  int quality = 95;
  std::string channels = "3";
  // Input.
  std::string key_rule = "first-dot";
  std::vector<std::string> image = {"jpg", "jpeg", "png", "webp", "bmp", "tif", "tiff"};
  bool no_images = false;
  bool classes_from_dirs = false;
  std::vector<std::string> ragged;
  std::vector<std::string> keep_fields, drop_fields, require_fields;
  // Tables and instances.
  std::string table, table_format = "auto", table_image, table_prefix;
  std::string max_table_size = "16G";
  std::vector<std::string> table_columns;
  std::string instances;
  std::vector<std::string> instance_fields;
  uint64_t max_pixels = 1ull << 28;
  std::string max_member_size = "1G", max_label_size = "16M", group_window = "64M";
  int64_t max_outputs_per_sample = 10000;
  // Behaviour.
  std::string shard_size = "1G";
  int threads = 0;    ///< 0 = all cores
  std::string shard;  ///< --shard I/N; "" = the whole input
  std::string on_error = "fail", on_duplicate = "error";
  bool allow_empty = false;
  std::string dedup;  ///< --dedup exact|near[:D]; "" = none
  std::vector<std::string> dedup_against;
  // Display (not options of the conversion).
  std::string progress = "auto";
  double progress_every = 10;
};

/// Registers the flags of `tarmac convert` on `app`, to be parsed into `f` (which must outlive
/// the parse).
void add_convert_flags(CLI::App& app, ConvertFlags& f);

/// The options the flags ask for (threads 0 becomes the number of cores); throws
/// CLI::ValidationError naming the flag and why when one is malformed or they contradict.
ConvertOptions convert_options(const ConvertFlags& f);

/// The options as the command line of a parsed `app` sets them (given or default, by flag
/// name), with `threads` as resolved: the manifest's "options".
std::string options_json(const CLI::App& app, int threads);

}  // namespace tarmac::cli
