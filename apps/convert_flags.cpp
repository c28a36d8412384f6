#include "apps/convert_flags.h"

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>
#include <tuple>

#include "apps/flag_values.h"
#include "remote/upload.h"

namespace tarmac::cli {
namespace {

// The ranges of the numeric flags (docs/cli.md lists them): checked while parsing, and again by
// convert_options for flags filled in by code.
constexpr NumberRange kCheckpointEvery{0, 86400};
constexpr NumberRange kCropScale{0.01, 100};
constexpr IntRange kBucketStep{1, 4096};
constexpr NumberRange kBucketMaxRatio{1, 64};
constexpr NumberRange kPadValue{0, 255};
constexpr IntRange kQuality{1, 100};
constexpr IntRange kMaxPixels{1, int64_t{1} << 40};
constexpr IntRange kMaxOutputs{1, int64_t{1} << 32};
constexpr IntRange kDedupDistance{0, 32};

// --dedup exact | near | near:D (the rules between it and other options are the library's).
DedupOptions dedup_flag(const ConvertFlags& f) {
  DedupOptions d;
  d.against = f.dedup_against;
  if (f.dedup.empty()) return d;
  if (f.dedup == "exact") {
    d.mode = DedupOptions::Mode::Exact;
  } else if (f.dedup == "near" || f.dedup.starts_with("near:")) {
    d.mode = DedupOptions::Mode::Near;
    if (f.dedup.size() > 4)
      d.distance = static_cast<int>(
          integer_flag("--dedup near:D", std::string_view(f.dedup).substr(5), kDedupDistance));
  } else {
    throw CLI::ValidationError("--dedup", "'" + f.dedup +
                                              "': use exact (the same decoded pixels) or near[:D] "
                                              "(perceptual hashes within D bits, default 4)");
  }
  return d;
}
constexpr NumberRange kProgressEvery{0.1, 86400};

// Fills the geometry part of the options from the crop/size/resize flags.
void resolve_geometry(const ConvertFlags& f, ConvertOptions& o) {
  GeometryOptions& g = o.transform.geometry;
  g.square = f.square;
  g.bucket_step = f.bucket_step;
  g.bucket_max_ratio = f.bucket_max_ratio;
  if (f.crop == "none") {
    g.crop = CropMode::None;
  } else if (f.crop == "center" || f.crop == "centre") {
    g.crop = CropMode::Center;
  } else if (f.crop.rfind("box:", 0) == 0) {
    g.crop = CropMode::Box;
    const auto v = box_flag("--crop box:X,Y,W,H", std::string_view(f.crop).substr(4));
    g.box = region_from_box(v.data(), false);
  } else if (f.crop.rfind("field:", 0) == 0) {
    g.crop = CropMode::Field;
    std::string name = f.crop.substr(6);
    if (name.size() > 5 && name.ends_with(":xyxy")) {
      o.transform.crop_field_xyxy = true;
      name.resize(name.size() - 5);
    } else if (name.size() > 5 && name.ends_with(":xywh")) {
      name.resize(name.size() - 5);
    }
    if (name.empty()) throw CLI::ValidationError("--crop", "field:NAME needs a field name");
    o.transform.crop_field = name;
  } else {
    throw CLI::ValidationError(
        "--crop", "'" + f.crop + "': use none, center, box:X,Y,W,H or field:NAME[:xyxy]");
  }
  if (f.box_convention == "edges")
    g.box_convention = BoxConvention::Edges;
  else if (f.box_convention == "centers" || f.box_convention == "centres")
    g.box_convention = BoxConvention::Centers;
  else
    throw CLI::ValidationError("--box-convention",
                               "'" + f.box_convention + "': use edges or centers");
  if (f.resample == "area")
    g.resample = ResampleMode::Area;
  else if (f.resample == "area-exact")
    g.resample = ResampleMode::AreaExact;
  else
    throw CLI::ValidationError("--resample", "'" + f.resample + "': use area or area-exact");
  check_flag("--crop-scale", f.crop_scale, kCropScale);
  check_flag("--bucket-step", int64_t{f.bucket_step}, kBucketStep);
  check_flag("--bucket-max-ratio", f.bucket_max_ratio, kBucketMaxRatio);
  g.crop_scale = f.crop_scale;
  g.fit_aspect = f.fit_aspect;
  bool single = true;
  if (!f.size.empty()) {
    const SizeValue size = size_flag("--size", f.size);
    g.width = size.width;
    g.height = size.height;
    single = size.single;
  }
  std::string resize = f.resize;
  if (resize.empty())
    resize = f.size.empty() ? "none" : (g.crop != CropMode::None ? "exact" : "shorter");
  if (resize == "exact")
    g.resize = ResizeMode::Exact;
  else if (resize == "shorter")
    g.resize = ResizeMode::Shorter;
  else if (resize == "longer")
    g.resize = ResizeMode::Longer;
  else if (resize == "fit")
    g.resize = ResizeMode::Fit;
  else if (resize == "none")
    g.resize = ResizeMode::None;
  else if (resize == "bucket")
    g.resize = ResizeMode::Bucket;
  else
    throw CLI::ValidationError("--resize",
                               "'" + resize + "': use exact, shorter, longer, fit, bucket or none");
  if (g.resize != ResizeMode::None && f.size.empty())
    throw CLI::ValidationError("--resize", "needs --size");
  if ((g.resize == ResizeMode::Shorter || g.resize == ResizeMode::Longer) && !single)
    throw CLI::ValidationError("--size", "--resize shorter/longer takes one number, not WxH");
  if (g.resize == ResizeMode::Bucket) {
    if (g.crop == CropMode::Center) g.crop = CropMode::None;  // the bucket's aspect decides
    if (aspect_buckets(int64_t{g.width} * g.height, g.bucket_step, g.bucket_max_ratio).empty())
      throw CLI::ValidationError("--size", "--resize bucket: an area of " + f.size +
                                               " holds no bucket of --bucket-step " +
                                               std::to_string(g.bucket_step));
  }
}

OutputFormat parse_format(const std::string& format) {
  if (format == "jpg" || format == "jpeg") return OutputFormat::Jpeg;
  if (format == "png") return OutputFormat::Png;
  if (format == "webp") return OutputFormat::Webp;
  if (format == "raw") return OutputFormat::Raw;
  if (format == "keep") return OutputFormat::Keep;
  throw CLI::ValidationError("--format", "'" + format + "': use jpg, png, webp, raw or keep");
}

// "a" or "a:xywh" -> (a, false); "a:xyxy" -> (a, true).
std::pair<std::string, bool> parse_box_field(const std::string& b) {
  if (b.ends_with(":xyxy")) return {b.substr(0, b.size() - 5), true};
  if (b.ends_with(":xywh")) return {b.substr(0, b.size() - 5), false};
  return {b, false};
}

// Extensions and suffixes are given with or without their dot.
std::vector<std::string> without_dots(std::vector<std::string> v) {
  for (auto& e : v)
    if (!e.empty() && e[0] == '.') e.erase(0, 1);
  return v;
}

}  // namespace

ConvertOptions convert_options(const ConvertFlags& f) {
  ConvertOptions o;
  o.source.inputs = f.inputs;
  o.output = f.output;
  o.source.endpoint_url = f.endpoint_url;
  o.remote_output.checkpoint_dir = f.checkpoint_dir;
  o.remote_output.multipart_size = bytes_flag("--multipart-size", f.multipart_size);
  if (o.remote_output.multipart_size < remote::kMinPartSize)
    throw CLI::ValidationError(
        "--multipart-size",
        "'" + f.multipart_size + "' is under 5M, the smallest part S3 accepts (but the last)");
  o.remote_output.no_lock = f.no_lock;
  o.run.overwrite = f.overwrite;
  o.run.resume = f.resume;
  check_flag("--checkpoint-every", f.checkpoint_every, kCheckpointEvery);
  o.run.checkpoint_seconds = f.checkpoint_every;
  resolve_geometry(f, o);
  o.transform.points = f.points;
  check_flag("--pad-value", f.pad_value, kPadValue);
  o.transform.pad_value = f.pad_value;
  o.transform.format = parse_format(f.format);
  check_flag("--quality", int64_t{f.quality}, kQuality);
  o.transform.quality = f.quality;
  if (f.channels == "3")
    o.transform.channels = ChannelMode::Three;
  else if (f.channels == "1")
    o.transform.channels = ChannelMode::One;
  else if (f.channels == "keep")
    o.transform.channels = ChannelMode::Keep;
  else
    throw CLI::ValidationError("--channels", "'" + f.channels + "': use 3, 1 or keep");
  for (const auto& b : f.boxes) o.transform.boxes.push_back(parse_box_field(b));
  o.transform.points3d = f.points3d;
  o.transform.polygons = f.polygons;
  o.transform.masks = f.masks;
  try {
    for (const auto& a : f.axis_angle) o.transform.axis_angle.push_back(parse_axis_angle_field(a));
    for (const auto& c : f.camera) o.transform.cameras.push_back(parse_camera_field(c));
  } catch (const UsageError& e) {
    throw CLI::ValidationError(e.what());
  }
  o.members.no_images = f.no_images;
  o.labels.classes_from_dirs = f.classes_from_dirs;
  o.table.path = f.table;
  try {
    o.table.options.format = parse_table_format(f.table_format);
  } catch (const FatalError& e) {
    throw CLI::ValidationError("--table-format", e.what());
  }
  o.table.options.image_column = f.table_image;
  o.table.options.list_columns = f.table_columns;
  o.table.prefix = f.table_prefix;
  o.table.options.max_bytes = bytes_flag("--max-table-size", f.max_table_size);
  o.labels.instances = f.instances;
  o.labels.instance_fields = f.instance_fields;
  o.labels.ragged.insert(f.ragged.begin(), f.ragged.end());
  o.labels.keep_fields = f.keep_fields;
  o.labels.drop_fields = f.drop_fields;
  o.labels.require_fields = f.require_fields;
  check_flag("--max-pixels", static_cast<int64_t>(std::min<uint64_t>(f.max_pixels, INT64_MAX)),
             kMaxPixels);
  o.limits.max_pixels = f.max_pixels;
  o.limits.shard_size = bytes_flag("--shard-size", f.shard_size);
  o.limits.max_member_size = bytes_flag("--max-member-size", f.max_member_size);
  o.limits.max_label_size = bytes_flag("--max-label-size", f.max_label_size);
  check_flag("--max-outputs-per-sample", static_cast<int64_t>(f.max_outputs_per_sample),
             kMaxOutputs);
  o.limits.max_outputs_per_sample = static_cast<uint64_t>(f.max_outputs_per_sample);
  o.limits.group_window = bytes_flag("--group-window", f.group_window);
  // CLI11 refuses other values while parsing; these two refusals are for other callers.
  if (f.on_error != "fail" && f.on_error != "skip")
    throw CLI::ValidationError("--on-error", "'" + f.on_error + "': use fail or skip");
  o.run.skip_errors = f.on_error == "skip";
  o.run.allow_empty = f.allow_empty;
  if (f.on_duplicate == "first")
    o.members.on_duplicate = OnDuplicate::First;
  else if (f.on_duplicate == "last")
    o.members.on_duplicate = OnDuplicate::Last;
  else if (f.on_duplicate == "error")
    o.members.on_duplicate = OnDuplicate::Error;
  else
    throw CLI::ValidationError("--on-duplicate",
                               "'" + f.on_duplicate + "': use error, first or last");
  if (f.key_rule == "first-dot")
    o.members.key_rule = KeyRule::FirstDot;
  else if (f.key_rule == "last-dot")
    o.members.key_rule = KeyRule::LastDot;
  else
    throw CLI::ValidationError("--key-rule", "'" + f.key_rule + "': use first-dot or last-dot");
  o.dedup = dedup_flag(f);
  // Parsed whole here (the text); the library's check_part refuses I >= N as well.
  if (!f.shard.empty()) std::tie(o.part.index, o.part.count) = part_flag("--shard", f.shard);
  o.members.image_exts = without_dots(f.image);
  o.members.dense = without_dots(f.dense);
  check_flag("--threads", int64_t{f.threads}, kThreadRange);
  o.run.threads = f.threads != 0
                      ? f.threads
                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return o;
}

std::string options_json(const CLI::App& app, int threads) {
  nlohmann::ordered_json j;
  for (const CLI::Option* opt : app.get_options()) {
    const std::string name = opt->get_name();
    if (name.empty() || name == "--help" || name == "--json" || name == "--quiet" ||
        name == "--verbose" || name == "--threads" || name == "--progress" ||
        name == "--progress-every")
      continue;
    auto results = opt->reduced_results();
    if (results.empty()) results = {opt->get_default_str()};
    if (results.size() == 1 && results[0].empty()) continue;
    j[opt->get_name()] =
        results.size() == 1 ? nlohmann::ordered_json(results[0]) : nlohmann::ordered_json(results);
  }
  j["threads"] = threads;
  return j.dump();
}

void add_convert_flags(CLI::App& app, ConvertFlags& f) {
  app.footer(
      "Examples:\n"
      "  # HMR crops: person box from each sample's JSON, 1.2x, square, 224 px; keypoints follow\n"
      "  tarmac convert raw/part-*.tar.gz -o out/ --crop field:bbox_xywh --crop-scale 1.2 \\\n"
      "      --square --size 224 --points keypoints2d --boxes bbox_xywh --quality 95\n"
      "  # ... with 3D joints, SMPL pose and camera declared, so that a reader's flip moves them\n"
      "      --points3d keypoints3d --axis-angle smpl.global_orient smpl.body_pose:smpl-body \\\n"
      "      --camera K\n"
      "  # COCO person crops, each with its own mask (polygons or RLE), 256 px\n"
      "  tarmac convert train2017/ -o out/ --table instances_train2017.json --crop field:bbox \\\n"
      "      --crop-scale 1.25 --square --size 256 --boxes bbox --masks segmentation\n"
      "  # depth pairs: centre crop, depth maps follow by nearest neighbour, 16 bits kept\n"
      "  tarmac convert depth.tar -o out/ --crop center --size 480 --dense depth.png --format png\n"
      "  # captioned photos into aspect-ratio buckets of ~1024x1024 pixels (sides /64)\n"
      "  tarmac convert photos.tar -o out/ --resize bucket --size 1024\n"
      "  # from a pipe, or from a command's output (run by /bin/sh, again on --resume)\n"
      "  curl -s https://host/data.tar | tarmac convert - -o out/ --crop center --size 256\n"
      "  tarmac convert 'pipe:gsutil cat gs://bucket/shard-000.tar' -o out/ --size 256\n\n"
      "Samples are members sharing a key: dir/0001.jpg + dir/0001.json form sample dir/0001.\n"
      "Coordinates: integer coordinates are pixel centres (OpenCV's convention); boxes are\n"
      "[x, y, w, h] unless ':xyxy' is given. See docs/cli.md and docs/format.md.");
  app.add_option("inputs", f.inputs,
                 "Archives (tar, pax, gnu, zip; gz, zst, xz, bz2), directories, - for stdin, "
                 "s3://bucket/key, s3://bucket/prefix/, http(s):// URLs, brace ranges "
                 "(s3://b/shard-{000..009}.tar), 'pipe:COMMAND' (the output of COMMAND, run by "
                 "/bin/sh -c; a non-zero exit fails the input)")
      ->required();
  app.add_option("-o,--output", f.output,
                 "Output dataset directory (created; must be empty), or s3://bucket/prefix/ "
                 "(uploaded as it is written, the manifest last)")
      ->required();
  app.add_option(
      "--endpoint-url", f.endpoint_url,
      "Where s3:// inputs and tables are read from and an s3:// output goes (an S3-compatible "
      "server, e.g. http://127.0.0.1:9000); default: AWS_ENDPOINT_URL, else AWS");
  app.add_option("--checkpoint-dir", f.checkpoint_dir,
                 "-o s3://: the local folder the run stages and checkpoints in (default "
                 "./.tarmac-checkpoint/BUCKET/HASH); --resume needs the same one");
  app.add_option("--multipart-size", f.multipart_size,
                 "-o s3://: files above this size are sent as a multipart upload of parts this "
                 "size (at least 5M; default 64M)")
      ->check(bytes_value());
  app.add_flag("--no-lock", f.no_lock,
               "-o s3://: go on when the server cannot make the lock object atomically (no "
               "conditional PUT, as Swift's s3api): the lock is then checked and written, but "
               "not atomically");
  app.add_flag("--overwrite", f.overwrite, "Replace a dataset already in the output directory");
  app.add_flag("--resume", f.resume,
               "Go on from where an interrupted run (killed, preempted, machine lost) stopped: "
               "same inputs and options; the result is identical to an uninterrupted run");
  app.add_option("--checkpoint-every", f.checkpoint_every,
                 "Seconds between checkpoints for --resume (also one per closed shard)")
      ->check(number_in(kCheckpointEvery))
      ->default_val(30);

  auto* tr = "Transform";
  app.add_option("--crop", f.crop,
                 "none | center | box:X,Y,W,H | field:NAME[:xyxy]  (region of the source)")
      ->group(tr)
      ->default_str("none");
  app.add_option("--box-convention", f.box_convention,
                 "edges | centers: how box:/field: and --boxes coordinates are read. edges: x is "
                 "the left edge of pixel column x, [x, y, w, h] = image[y:y+h, x:x+w] (COCO, "
                 "mmhuman3d); centers: x is the centre of pixel column x")
      ->group(tr)
      ->default_str("edges");
  app.add_option("--crop-scale", f.crop_scale,
                 "Scale a box/field region about its centre (e.g. 1.2)")
      ->group(tr)
      ->check(number_in(kCropScale));
  app.add_flag("--square", f.square, "Grow a box/field region to a square (side = longer side)")
      ->group(tr);
  app.add_flag("--fit-aspect", f.fit_aspect,
               "Grow a box/field region about its centre to the aspect ratio of --size WxH (the "
               "top-down pose crop, e.g. --size 192x256 --crop-scale 1.25)")
      ->group(tr);
  app.add_option("--size", f.size, "Output size: N or WxH")->group(tr)->check(size_value());
  app.add_option("--resize", f.resize,
                 "exact | shorter | longer | fit | bucket | none  (default: exact with a crop, "
                 "shorter without). bucket: the aspect-ratio bucket of area --size^2 (or W*H) "
                 "closest to the image's, centre-cropped to it")
      ->group(tr);
  app.add_option("--resample", f.resample,
                 "area | area-exact: a shrink averages each output pixel's footprint. area: "
                 "JPEGs decoded at a reduced DCT scale first (faster); area-exact: at full "
                 "resolution (as cv2.resize INTER_AREA; slower on large JPEG shrinks)")
      ->group(tr)
      ->default_str("area");
  app.add_option("--bucket-step", f.bucket_step,
                 "--resize bucket: bucket sides are multiples of this")
      ->group(tr)
      ->transform(integer_in(kBucketStep))
      ->default_val(64);
  app.add_option("--bucket-max-ratio", f.bucket_max_ratio,
                 "--resize bucket: the most elongated bucket (longer / shorter side)")
      ->group(tr)
      ->check(number_in(kBucketMaxRatio))
      ->default_val(4.0);
  app.add_option("--points", f.points,
                 "Label fields of points [..., >=2] (x, y first) to transform")
      ->group(tr);
  app.add_option("--boxes", f.boxes,
                 "Label fields of boxes [..., 4] to transform: NAME or NAME:xyxy")
      ->group(tr);
  app.add_option("--points3d", f.points3d,
                 "Label fields of camera-frame 3D points [..., >=3] (x right, y down, z forward, "
                 "as mmhuman3d's keypoints3d): stored as they are (a crop or resize does not "
                 "move the camera), recorded so that a reader's flip and rotation move them")
      ->group(tr);
  app.add_option("--axis-angle", f.axis_angle,
                 "Label fields of rotations as axis-angle [..., 3] or flat [3*J]: NAME[:LAYOUT], "
                 "LAYOUT root (default; one global orientation), smpl (24 joints), smpl-body "
                 "(23, SMPL's body_pose), smplx-body (21, SMPL-X's body_pose), mano-left and "
                 "mano-right (15 each; give both hands), or pairs:A-B,C-D,... (0-based joints a "
                 "flip swaps). Stored as they are; e.g. --axis-angle smpl.global_orient "
                 "smpl.body_pose:smpl-body")
      ->group(tr);
  app.add_option("--camera", f.camera,
                 "Label fields of intrinsics, [3,3] K or [4] (fx, fy, cx, cy), moved exactly "
                 "with every crop and resize (K' = A K, A the sample's __affine__): "
                 "NAME[:centers|edges]; centers (default): OpenCV's principal point, the top-left "
                 "pixel's centre is (0, 0); edges: COLMAP's, it is (0.5, 0.5)")
      ->group(tr);
  app.add_option("--polygons", f.polygons,
                 "Label fields of COCO segmentation polygons (lists of x0,y0,x1,y1,...; any "
                 "number per sample): every vertex moved as --points are")
      ->group(tr);
  app.add_option("--masks", f.masks,
                 "Label fields of COCO segmentation (polygons, or RLE: {\"counts\", \"size\"}, "
                 "compressed or not) rasterised in the source image and stored as a 0/1 PNG "
                 "mask per output sample, warped with the image by nearest neighbour (blob "
                 "__NAME__, member KEY.NAME.png); the field itself is then left out (kept, "
                 "transformed, when --polygons names it too). With --instances: each instance's "
                 "own mask")
      ->group(tr);
  app.add_option(
         "--dense", f.dense,
         "Dense-map member suffixes (e.g. depth.png) warped by nearest neighbour; with --table, "
         "columns of member paths (e.g. depth)")
      ->group(tr);
  app.add_option("--pad-value", f.pad_value, "Value for pixels outside the source")
      ->group(tr)
      ->check(number_in(kPadValue))
      ->default_val(0);
  app.add_option("--format", f.format, "jpg | png | webp | raw | keep (source bytes untouched)")
      ->group(tr)
      ->default_str("jpg");
  app.add_option("--channels", f.channels,
                 "3 | 1 (every image grey) | keep (grey sources stay grey): channels stored")
      ->group(tr)
      ->default_str("3");
  app.add_option("--quality", f.quality, "JPEG/WebP quality")
      ->group(tr)
      ->transform(integer_in(kQuality))
      ->default_val(95);

  auto* in = "Input";
  app.add_option("--key-rule", f.key_rule,
                 "Where a member's key ends: first-dot (WebDataset: 0001.rgb.png -> 0001) or "
                 "last-dot (photo folders: IMG_2020.01.01.jpg -> IMG_2020.01.01)")
      ->group(in)
      ->check(CLI::IsMember({"first-dot", "last-dot"}))
      ->default_str("first-dot");
  app.add_option("--image", f.image,
                 "Image extensions, in order of preference; a member whose last extension is "
                 "one is an image. A full extension (rgb.png) says which member is the image "
                 "when a sample has several")
      ->group(in)
      ->default_str("jpg jpeg png webp bmp tif tiff");
  app.add_flag("--no-images", f.no_images, "Labels only: store no images")->group(in);
  app.add_flag("--classes-from-dirs", f.classes_from_dirs,
               "Label each sample with the folder holding its image (ROOT/CLASS/x.jpg): field "
               "cls, numbered as torchvision's ImageFolder does; names in the metadata")
      ->group(in);
  app.add_option("--ragged", f.ragged, "Fields whose first axis may vary between samples")
      ->group(in);
  app.add_option("--fields", f.keep_fields,
                 "Keep only these label fields (e.g. --fields caption,width); others are left out")
      ->delimiter(',')
      ->group(in);
  app.add_option("--drop-fields", f.drop_fields, "Leave out these label fields (e.g. exif,sha256)")
      ->delimiter(',')
      ->group(in);
  app.add_option("--require", f.require_fields,
                 "Fields every sample must have: one without it (absent or null) is a bad "
                 "sample. Others may be missing in some samples (nullable)")
      ->delimiter(',')
      ->group(in);
  auto* tab = "Tables and instances";
  app.add_option("--table", f.table,
                 "An annotation table: each ROW becomes one output sample, cut from the image it "
                 "names (COCO JSON, HumanData .npz, JSON Lines, CSV or a split list of paths): a "
                 "file, s3://bucket/key, an http(s):// URL or 'pipe:COMMAND'. Keys are IMAGE/ROW; "
                 "rows sharing an image decode it once")
      ->group(tab);
  app.add_option("--table-format", f.table_format, "auto | coco | npz | jsonl | csv | list")
      ->group(tab)
      ->default_str("auto");
  app.add_option("--table-image", f.table_image,
                 "The column holding each row's image path (default: image_path; COCO: "
                 "images[].file_name; a list: the column named image)")
      ->group(tab);
  app.add_option("--table-columns", f.table_columns,
                 "A split list's column names, in order (e.g. image,depth,depth_filled); "
                 "--dense names columns of paths then")
      ->delimiter(',')
      ->group(tab);
  app.add_option("--table-prefix", f.table_prefix,
                 "Put in front of every path the table names (COCO: train2017/)")
      ->group(tab);
  app.add_option("--max-table-size", f.max_table_size,
                 "Refuse a larger --table (a file, an object or a pipe: command's output, held "
                 "whole in memory while read)")
      ->group(tab)
      ->check(bytes_value())
      ->default_str("16G");
  app.add_option("--instances", f.instances,
                 "One output per entry along this label field's first axis (persons in a "
                 "frame); keys KEY/K, a sample with none is counted and listed")
      ->group(tab);
  app.add_option("--instance-fields", f.instance_fields,
                 "Fields sliced alike with --instances (the others are copied to every "
                 "instance)")
      ->delimiter(',')
      ->group(tab);
  app.add_option("--max-pixels", f.max_pixels, "Refuse larger images (from the header)")
      ->group(in)
      ->transform(integer_in(kMaxPixels))
      ->default_val(1ull << 28);
  app.add_option("--max-member-size", f.max_member_size, "Refuse larger members (gzip bombs)")
      ->group(in)
      ->check(bytes_value())
      ->default_str("1G");
  app.add_option("--max-label-size", f.max_label_size,
                 "Refuse larger label members and table cells (a JSON label costs ~40x its "
                 "size while parsed)")
      ->group(in)
      ->check(bytes_value())
      ->default_str("16M");
  app.add_option("--max-outputs-per-sample", f.max_outputs_per_sample,
                 "Refuse a source sample with more outputs (table rows naming one image, "
                 "--instances entries): they are held in memory together")
      ->group(tab)
      ->transform(integer_in(kMaxOutputs))
      ->default_val(10000);
  app.add_option("--group-window", f.group_window,
                 "Member bytes of samples waiting to be grouped (every sample passes through; "
                 "members of one sample may lie this far apart in an archive)")
      ->group(in)
      ->check(bytes_value())
      ->default_str("64M");

  auto* beh = "Behaviour";
  app.add_option("--shard-size", f.shard_size, "Largest image shard")
      ->group(beh)
      ->check(bytes_value())
      ->default_str("1G");
  app.add_option("-j,--threads", f.threads, "Worker threads (default: all cores)")
      ->group(beh)
      ->transform(integer_in(kThreadRange));
  app.add_option("--shard", f.shard,
                 "I/N: convert only part I (0-based) of N deterministic parts of the input, "
                 "for a cluster; join the parts with 'tarmac merge'")
      ->group(beh)
      ->check(part_value());
  app.add_option("--on-error", f.on_error,
                 "fail: stop at the first bad sample; skip: leave it out and record why")
      ->group(beh)
      ->check(CLI::IsMember({"fail", "skip"}))
      ->default_str("fail");
  app.add_option("--on-duplicate", f.on_duplicate,
                 "A key in two inputs, or a member twice in a sample: error | first | last "
                 "(keep that one; the others are left out and listed in the manifest)")
      ->group(beh)
      ->check(CLI::IsMember({"error", "first", "last"}))
      ->default_str("error");
  app.add_option("--dedup", f.dedup,
                 "exact | near[:D]: leave out images that duplicate an earlier one by content "
                 "(exact: the same decoded pixels; near: also perceptual hashes within D bits, "
                 "default 4); the first in input order is kept, each one left out is listed in "
                 "the manifest (code duplicate_content); kept images get a __phash__ column")
      ->group(beh);
  app.add_option("--dedup-against", f.dedup_against,
                 "DIR (repeatable): also leave out images that duplicate one of dataset DIR's "
                 "(converted with --dedup: its __phash__ column)")
      ->group(beh);
  app.add_flag("--allow-empty", f.allow_empty,
               "Accept a run that converts no sample (an empty dataset, exit 0); without it such "
               "a run fails (exit 1) saying why")
      ->group(beh);
  app.add_option("--progress", f.progress,
                 "auto | bar | plain | none: a line redrawn on a terminal (bar), a line every "
                 "--progress-every seconds for logs (plain); auto: bar on a terminal, else plain")
      ->group(beh)
      ->check(CLI::IsMember({"auto", "bar", "plain", "none"}))
      ->default_str("auto");
  app.add_option("--progress-every", f.progress_every, "Seconds between plain progress lines")
      ->group(beh)
      ->check(number_in(kProgressEvery))
      ->default_val(10);
}

}  // namespace tarmac::cli
