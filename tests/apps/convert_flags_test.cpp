#include "apps/convert_flags.h"

#include <catch2/catch.hpp>
#include <limits>
#include <thread>

#include "apps/flag_values.h"
#include "common/error.h"

using namespace tarmac;
using namespace tarmac::cli;

namespace {

// The flags of `tarmac convert in.tar -o out FLAGS`, as CLI11 parses them.
ConvertFlags parse(const std::string& flags) {
  CLI::App app;
  ConvertFlags f;
  add_convert_flags(app, f);
  app.parse("in.tar -o out " + flags, false);
  return f;
}

ConvertOptions options(const std::string& flags) {
  return convert_options(parse(flags));
}

// The message of the CLI::ValidationError (exit 2) the flags are refused with.
std::string refusal(const std::string& flags) {
  try {
    options(flags);
  } catch (const CLI::ValidationError& e) {
    return e.what();
  }
  return "(accepted)";
}

// The message of the UsageError (exit 2) the library refuses the flags' options with: the
// flags parse, and the rule between them is the library's (check_convert_options).
std::string library_refusal(const ConvertFlags& f) {
  const ConvertOptions o = convert_options(f);
  try {
    check_convert_options(o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string library_refusal(const std::string& flags) {
  return library_refusal(parse(flags));
}

}  // namespace

TEST_CASE("convert flags: the defaults") {
  const ConvertOptions o = options("");
  CHECK(o.source.inputs == std::vector<std::string>{"in.tar"});
  CHECK(o.output == "out");
  CHECK_FALSE(o.run.overwrite);
  CHECK_FALSE(o.run.resume);
  CHECK(o.run.checkpoint_seconds == 30);
  CHECK(o.transform.geometry.crop == CropMode::None);
  CHECK(o.transform.geometry.crop_scale == 1.0);
  CHECK_FALSE(o.transform.geometry.square);
  CHECK(o.transform.geometry.resize == ResizeMode::None);
  CHECK(o.transform.geometry.width == 0);
  CHECK(o.transform.geometry.height == 0);
  CHECK(o.transform.geometry.bucket_step == 64);
  CHECK(o.transform.geometry.bucket_max_ratio == 4.0);
  CHECK(o.transform.format == OutputFormat::Jpeg);
  CHECK(o.transform.quality == 95);
  CHECK(o.transform.channels == ChannelMode::Three);
  CHECK(o.transform.pad_value == 0);
  CHECK(o.members.image_exts ==
        std::vector<std::string>{"jpg", "jpeg", "png", "webp", "bmp", "tif", "tiff"});
  CHECK(o.members.key_rule == KeyRule::FirstDot);
  CHECK_FALSE(o.members.no_images);
  CHECK(o.limits.max_pixels == 268435456);
  CHECK(o.limits.max_member_size == 1073741824);
  CHECK(o.limits.group_window == 67108864);
  CHECK(o.limits.shard_size == 1073741824);
  CHECK_FALSE(o.run.skip_errors);
  CHECK(o.members.on_duplicate == OnDuplicate::Error);
  CHECK(o.part.index == 0);
  CHECK(o.part.count == 1);
  CHECK(o.run.threads == static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  // The struct's own defaults are the command line's.
  const ConvertOptions plain = convert_options(ConvertFlags{});
  CHECK(plain.members.image_exts == o.members.image_exts);
  CHECK(plain.members.key_rule == o.members.key_rule);
  CHECK(plain.limits.shard_size == o.limits.shard_size);
  CHECK(plain.limits.group_window == o.limits.group_window);
  CHECK(plain.limits.max_pixels == o.limits.max_pixels);
  CHECK(plain.transform.quality == o.transform.quality);
  CHECK(plain.run.checkpoint_seconds == o.run.checkpoint_seconds);
}

TEST_CASE("convert flags: --crop") {
  CHECK(options("--crop center").transform.geometry.crop == CropMode::Center);
  CHECK(options("--crop centre").transform.geometry.crop == CropMode::Center);
  CHECK(options("--crop none").transform.geometry.crop == CropMode::None);

  const ConvertOptions box = options("--crop box:10,20,30,40");
  CHECK(box.transform.geometry.crop == CropMode::Box);
  const double v[] = {10, 20, 30, 40};
  const Region want = region_from_box(v, false);
  CHECK(box.transform.geometry.box.x0 == want.x0);
  CHECK(box.transform.geometry.box.y0 == want.y0);
  CHECK(box.transform.geometry.box.x1 == want.x1);
  CHECK(box.transform.geometry.box.y1 == want.y1);

  const ConvertOptions xyxy = options("--crop field:bbox:xyxy");
  CHECK(xyxy.transform.geometry.crop == CropMode::Field);
  CHECK(xyxy.transform.crop_field == "bbox");
  CHECK(xyxy.transform.crop_field_xyxy);
  const ConvertOptions xywh = options("--crop field:bbox:xywh");
  CHECK(xywh.transform.crop_field == "bbox");
  CHECK_FALSE(xywh.transform.crop_field_xyxy);
  const ConvertOptions plain = options("--crop field:bbox_xywh --crop-scale 1.2 --square");
  CHECK(plain.transform.crop_field == "bbox_xywh");
  CHECK_FALSE(plain.transform.crop_field_xyxy);
  CHECK(plain.transform.geometry.crop_scale == 1.2);
  CHECK(plain.transform.geometry.square);

  CHECK(refusal("--crop diagonal") ==
        "--crop: 'diagonal': use none, center, box:X,Y,W,H or field:NAME[:xyxy]");
  CHECK(refusal("--crop field:") == "--crop: field:NAME needs a field name");
  const std::string box_range =
      "; accepted: X,Y,W,H with X and Y in [-1000000, 1000000], W and H in [1, 1000000]";
  CHECK(refusal("--crop box:1,2,3") ==
        "--crop box:X,Y,W,H: '1,2,3' is not 4 comma-separated numbers" + box_range);
  CHECK(refusal("--crop box:1,2,3,4,") == "--crop box:X,Y,W,H: '' is not a number" + box_range);
  CHECK(refusal("--crop box:1,2,x,4") == "--crop box:X,Y,W,H: 'x' is not a number" + box_range);
  CHECK(refusal("--crop box:1,2,3px,4") == "--crop box:X,Y,W,H: '3px' is not a number" + box_range);
  CHECK(refusal("--crop box:1,2,inf,4") ==
        "--crop box:X,Y,W,H: 'inf' is not a finite number" + box_range);
  CHECK(refusal("--crop box:1,2,1e-300,4") ==
        "--crop box:X,Y,W,H: '1e-300' is out of range" + box_range);
  CHECK(refusal("--crop box:1e9,2,3,4") == "--crop box:X,Y,W,H: '1e9' is out of range" + box_range);
  const std::string scale = "; accepted: a number in [0.01, 100]";
  CHECK(refusal("--crop-scale 0") == "--crop-scale: '0' is out of range" + scale);
  CHECK(refusal("--crop-scale -1.5") == "--crop-scale: '-1.5' is out of range" + scale);
  // Issue #25, item 6: every affine and point became NaN, every image black, exit 0.
  CHECK(refusal("--crop-scale inf") == "--crop-scale: 'inf' is not a finite number" + scale);
  CHECK(refusal("--crop-scale nan") == "--crop-scale: 'nan' is not a finite number" + scale);
  CHECK(refusal("--crop-scale 1e-300") == "--crop-scale: '1e-300' is out of range" + scale);
  CHECK(refusal("--crop-scale 1.2x") == "--crop-scale: '1.2x' is not a number" + scale);
  CHECK(refusal("--crop-scale 0x1p1") == "--crop-scale: '0x1p1' is not a number" + scale);
  CHECK(options("--crop-scale 100").transform.geometry.crop_scale == 100);
  CHECK(options("--crop-scale 0.01").transform.geometry.crop_scale == 0.01);
  // A ConvertFlags filled in by code is checked alike.
  ConvertFlags f;
  f.crop_scale = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(convert_options(f), "--crop-scale: 'inf' is not a finite number" + scale);
}

TEST_CASE("convert flags: --box-convention and --resample") {
  // Edges (COCO's boxes) unless told; a box is kept as given, read by compute_geometry.
  CHECK(options("--crop box:10,20,30,40").transform.geometry.box_convention ==
        BoxConvention::Edges);
  CHECK(
      options("--crop box:10,20,30,40 --box-convention edges").transform.geometry.box_convention ==
      BoxConvention::Edges);
  CHECK(options("--box-convention centers").transform.geometry.box_convention ==
        BoxConvention::Centers);
  CHECK(options("--box-convention centres").transform.geometry.box_convention ==
        BoxConvention::Centers);
  CHECK(refusal("--box-convention corners") == "--box-convention: 'corners': use edges or centers");
  CHECK(options("--size 64").transform.geometry.resample == ResampleMode::Area);
  CHECK(options("--size 64 --resample area-exact").transform.geometry.resample ==
        ResampleMode::AreaExact);
  CHECK(refusal("--resample lanczos") == "--resample: 'lanczos': use area or area-exact");
}
TEST_CASE("convert flags: --size and --resize") {
  const ConvertOptions fit = options("--size 640x480 --resize fit");
  CHECK(fit.transform.geometry.resize == ResizeMode::Fit);
  CHECK(fit.transform.geometry.width == 640);
  CHECK(fit.transform.geometry.height == 480);
  // Without --resize: shorter side without a crop, exactly the size with one.
  const ConvertOptions shorter = options("--size 256");
  CHECK(shorter.transform.geometry.resize == ResizeMode::Shorter);
  CHECK(shorter.transform.geometry.width == 256);
  CHECK(shorter.transform.geometry.height == 256);
  CHECK(options("--crop center --size 224").transform.geometry.resize == ResizeMode::Exact);
  CHECK(options("--size 300 --resize longer").transform.geometry.resize == ResizeMode::Longer);
  CHECK(options("--size 64x32 --resize exact").transform.geometry.resize == ResizeMode::Exact);
  CHECK(options("--size 64 --resize none").transform.geometry.resize == ResizeMode::None);

  const std::string sides =
      "' is not N or WxH (e.g. 256 or 192x256); accepted: integer sides in "
      "[1, 65535]";
  // Issue #25, item 6: std::stoi read a prefix ("1e3" was 1x1).
  for (const char* bad : {"abc", "0", "640x70000", "192,256", "192X256", "192.5", "1e3", "64abc",
                          "64x", "x64", "64x64x3", "-64", "+64", "0x40"}) {
    INFO(bad);
    CHECK(refusal(std::string("--size ") + bad) == "--size: '" + std::string(bad) + sides);
  }
  CHECK(options("--size 065535").transform.geometry.width == 65535);
  ConvertFlags bad_size;
  bad_size.size = "1e3";
  CHECK_THROWS_WITH(convert_options(bad_size), "--size: '1e3" + sides);
  CHECK(refusal("--resize fit") == "--resize: needs --size");
  CHECK(refusal("--size 64 --resize stretch") ==
        "--resize: 'stretch': use exact, shorter, longer, fit, bucket or none");
  CHECK(refusal("--size 640x480 --resize shorter") ==
        "--size: --resize shorter/longer takes one number, not WxH");
  CHECK(refusal("--size 640x480 --resize longer") ==
        "--size: --resize shorter/longer takes one number, not WxH");
}

TEST_CASE("convert flags: --resize bucket") {
  const ConvertOptions b = options("--resize bucket --size 1024 --crop center");
  CHECK(b.transform.geometry.resize == ResizeMode::Bucket);
  CHECK(b.transform.geometry.crop == CropMode::None);  // the bucket's aspect decides
  CHECK(b.transform.geometry.width == 1024);
  const ConvertOptions step = options(
      "--resize bucket --size 512 --bucket-step 32 "
      "--bucket-max-ratio 2");
  CHECK(step.transform.geometry.bucket_step == 32);
  CHECK(step.transform.geometry.bucket_max_ratio == 2.0);

  CHECK(refusal("--resize bucket --size 32") ==
        "--size: --resize bucket: an area of 32 holds no bucket of --bucket-step 64");
  const std::string steps = "; accepted: an integer in [1, 4096]";
  CHECK(refusal("--resize bucket --size 1024 --bucket-step 0") ==
        "--bucket-step: '0' is out of range" + steps);
  CHECK(refusal("--resize bucket --size 1024 --bucket-step 5000") ==
        "--bucket-step: '5000' is out of range" + steps);
  CHECK(refusal("--bucket-step 6.5") == "--bucket-step: '6.5' is not an integer" + steps);
  CHECK(refusal("--resize bucket --size 1024 --bucket-max-ratio 0.5") ==
        "--bucket-max-ratio: '0.5' is out of range; accepted: a number in [1, 64]");
  CHECK(refusal("--bucket-max-ratio inf") ==
        "--bucket-max-ratio: 'inf' is not a finite number; accepted: a number in [1, 64]");
}

TEST_CASE("convert flags: --format, --boxes, --points, --dense, --image, --ragged") {
  CHECK(options("--format jpg").transform.format == OutputFormat::Jpeg);
  CHECK(options("--format jpeg").transform.format == OutputFormat::Jpeg);
  CHECK(options("--format png").transform.format == OutputFormat::Png);
  CHECK(options("--format webp").transform.format == OutputFormat::Webp);
  CHECK(options("--format raw").transform.format == OutputFormat::Raw);
  CHECK(options("--format keep").transform.format == OutputFormat::Keep);
  CHECK(refusal("--format gif") == "--format: 'gif': use jpg, png, webp, raw or keep");
  CHECK(options("--channels 1").transform.channels == ChannelMode::One);
  CHECK(options("--channels keep --format png").transform.channels == ChannelMode::Keep);
  CHECK(options("--channels keep --format keep").transform.channels == ChannelMode::Keep);
  CHECK(options("--channels 3 --format webp").transform.channels == ChannelMode::Three);
  CHECK(refusal("--channels 2") == "--channels: '2': use 3, 1 or keep");
  // Rules between options are the library's (UsageError); the flags themselves parse.
  const std::string three =
      ": WebP and raw images are always 3-channel (WebP has no grey images); use --format jpg "
      "or png, or --channels 3";
  CHECK(library_refusal("--channels keep --format webp") ==
        "--channels keep cannot be stored with --format webp" + three);
  CHECK(library_refusal("--channels 1 --format raw") ==
        "--channels 1 cannot be stored with --format raw" + three);
  CHECK(library_refusal("--channels 1 --format keep") ==
        "--channels 1 cannot be stored with --format keep: the source bytes are stored as they "
        "are, so they cannot be converted to grey; use --format jpg or png");
  CHECK(library_refusal("--channels keep --format keep") == "(accepted)");
  CHECK(library_refusal("--channels 3 --format webp") == "(accepted)");

  const ConvertOptions o = options(
      "--boxes a --boxes b:xyxy --boxes c:xywh --points kp --dense .depth.png "
      "--image .png --image jpg --ragged r1 --ragged r2 --no-images --quality 80 --pad-value 7");
  using Box = std::pair<std::string, bool>;
  CHECK(o.transform.boxes == std::vector<Box>{{"a", false}, {"b", true}, {"c", false}});
  CHECK(o.transform.points == std::vector<std::string>{"kp"});
  CHECK(o.members.dense == std::vector<std::string>{"depth.png"});
  CHECK(o.members.image_exts == std::vector<std::string>{"png", "jpg"});
  CHECK(o.labels.ragged == std::set<std::string>{"r1", "r2"});
  CHECK(o.members.no_images);
  CHECK(o.transform.quality == 80);
  CHECK(o.transform.pad_value == 7);
}

TEST_CASE("convert flags: --key-rule, and --image with a full extension") {
  CHECK(options("--key-rule last-dot").members.key_rule == KeyRule::LastDot);
  CHECK(options("--key-rule first-dot").members.key_rule == KeyRule::FirstDot);
  CHECK(options("--image rgb.png").members.image_exts == std::vector<std::string>{"rgb.png"});
  CHECK(options("--image .rgb.png --image jpg").members.image_exts ==
        std::vector<std::string>{"rgb.png", "jpg"});
  CHECK_THROWS_AS(parse("--key-rule middle"), CLI::ValidationError);
  ConvertFlags f;
  f.key_rule = "middle";
  CHECK_THROWS_WITH(convert_options(f), "--key-rule: 'middle': use first-dot or last-dot");
}

TEST_CASE("convert flags: byte sizes") {
  const ConvertOptions o = options("--shard-size 512M --max-member-size 2G --group-window 64K");
  CHECK(o.limits.shard_size == 536870912);
  CHECK(o.limits.max_member_size == 2147483648);
  CHECK(o.limits.group_window == 65536);
  CHECK(options("").limits.max_label_size == 16777216);
  CHECK(options("--max-label-size 1K").limits.max_label_size == 1024);
  CHECK(bytes_flag("--shard-size", "4096") == 4096);
  CHECK(bytes_flag("--shard-size", "1") == 1);
  CHECK(bytes_flag("--shard-size", "3B") == 3);
  CHECK(bytes_flag("--shard-size", "2KiB") == 2048);
  CHECK(bytes_flag("--shard-size", "1.5G") == 1610612736);
  CHECK(bytes_flag("--shard-size", "64MiB") == 67108864);
  CHECK(bytes_flag("--shard-size", "1T") == 1099511627776);
  CHECK(bytes_flag("--shard-size", "1TiB") == 1099511627776);

  const std::string sizes =
      "' is not a size; accepted: a number and a unit K, M, G or T (powers of 1024; e.g. 512M, "
      "1.5G, 4096), from 1 byte to 1024T";
  CHECK(refusal("--shard-size 12Q") == "--shard-size: '12Q" + sizes);
  CHECK(refusal("--group-window 1MB") == "--group-window: '1MB" + sizes);
  CHECK(refusal("--max-member-size big") == "--max-member-size: 'big" + sizes);
  CHECK(refusal("--shard-size 0") == "--shard-size: '0" + sizes);
  for (const char* bad :
       {"-1G", "0.5", "infG", "inf", "nanM", "1e30", "1025T", "0x10", "1.5.G", " 1G", "1 G", "G"}) {
    INFO(bad);
    CHECK_THROWS_WITH(bytes_flag("--shard-size", bad),
                      "--shard-size: '" + std::string(bad) + sizes);
  }
  CHECK(bytes_flag("--shard-size", "1024T") == kMaxBytes);
  CHECK(bytes_flag("--shard-size", "1e3") == 1000);
  CHECK(bytes_flag("--shard-size", "1.5") == 1);
  ConvertFlags f;
  f.group_window = "64";
  f.shard_size = "1e300G";
  CHECK_THROWS_WITH(convert_options(f), "--shard-size: '1e300G" + sizes);
}

TEST_CASE("convert flags: --shard I/N") {
  const ConvertOptions o = options("--shard 3/16");
  CHECK(o.part.index == 3);
  CHECK(o.part.count == 16);
  CHECK(options("--shard 0/1").part.count == 1);
  const std::string use =
      "' is not I/N; accepted: I/N with integers 0 <= I < N <= 1000000 (parts are numbered from 0)";
  CHECK(refusal("--shard 16/16") == "--shard: '16/16" + use);
  CHECK(refusal("--shard 2/2") == "--shard: '2/2" + use);
  CHECK(refusal("--shard 1/0") == "--shard: '1/0" + use);
  CHECK(refusal("--shard 3") == "--shard: '3" + use);
  CHECK(refusal("--shard a/2") == "--shard: 'a/2" + use);
  // A library caller's part is held to the same rule (UsageError).
  ConvertFlags part;
  part.shard = "0/2";
  ConvertOptions parted = convert_options(part);
  parted.part.index = 2;
  CHECK_THROWS_MATCHES(check_convert_options(parted), UsageError,
                       Catch::Message("--shard 2/2: the part index must be below the part count "
                                      "(parts are numbered from 0)"));
  parted.part = {0, 0};
  CHECK_THROWS_MATCHES(check_convert_options(parted), UsageError,
                       Catch::Message("--shard I/0: the part count must be at least 1"));
  CHECK(refusal("--shard 1/2x") == "--shard: '1/2x" + use);
  CHECK(refusal("--shard 0/1000001") == "--shard: '0/1000001" + use);
  CHECK(refusal("--shard 1/2.0") == "--shard: '1/2.0" + use);
  CHECK(refusal("--shard -1/2") == "--shard: '-1/2" + use);
  CHECK(refusal("--shard +1/2") == "--shard: '+1/2" + use);
  CHECK(refusal("--shard 1//2") == "--shard: '1//2" + use);
  CHECK(refusal("--shard 0x1/2") == "--shard: '0x1/2" + use);
}

TEST_CASE("convert flags: --on-error, --on-duplicate, --threads, run flags") {
  CHECK(options("--on-error skip").run.skip_errors);
  CHECK_FALSE(options("--on-error fail").run.skip_errors);
  CHECK(options("--on-duplicate first").members.on_duplicate == OnDuplicate::First);
  CHECK(options("--on-duplicate last").members.on_duplicate == OnDuplicate::Last);
  CHECK(options("--on-duplicate error").members.on_duplicate == OnDuplicate::Error);
  CHECK(options("-j 3").run.threads == 3);
  CHECK(options("--threads 5").run.threads == 5);
  const ConvertOptions ran = options("--overwrite --resume --checkpoint-every 0 --max-pixels 1000");
  CHECK(ran.run.overwrite);
  CHECK(ran.run.resume);
  CHECK(ran.run.checkpoint_seconds == 0);
  CHECK(ran.limits.max_pixels == 1000);

  // Refused by CLI11 while parsing (also exit 2), and by convert_options for other callers.
  CHECK_THROWS_AS(parse("--on-error ignore"), CLI::ValidationError);
  CHECK_THROWS_AS(parse("--on-duplicate both"), CLI::ValidationError);
  ConvertFlags f;
  f.on_error = "ignore";
  CHECK_THROWS_WITH(convert_options(f), "--on-error: 'ignore': use fail or skip");
  f = ConvertFlags{};
  f.on_duplicate = "both";
  CHECK_THROWS_WITH(convert_options(f), "--on-duplicate: 'both': use error, first or last");

  // Standard input cannot be read twice: the library's rule.
  f = ConvertFlags{};
  f.inputs = {"-", "b.tar"};
  f.on_duplicate = "last";
  CHECK(library_refusal(f) ==
        "--on-duplicate last reads the inputs twice (member names first), so it cannot read "
        "standard input ('-'); use first or error");
  f.on_duplicate = "first";
  CHECK(convert_options(f).members.on_duplicate == OnDuplicate::First);
  CHECK(library_refusal(f) == "(accepted)");
}

// The manifest's "options" (tests/e2e/test_format.py reads "--format" and "--shard-size"):
// the expected documents are what tarmac wrote before the flags moved out of apps/convert.cpp.
TEST_CASE("convert flags: options_json, the command line's view of the options") {
  CLI::App app;
  ConvertFlags f;
  add_convert_flags(app, f);
  app.parse(
      "in.tar -o out --crop field:bbox:xyxy --crop-scale 1.2 --square --size 32 --points kp "
      "--boxes bbox --format png --shard-size 64K --on-error skip --on-duplicate last -j 2",
      false);
  CHECK(
      options_json(app, convert_options(f).run.threads) ==
      R"({"inputs":"in.tar","--output":"out","--checkpoint-every":"30",)"
      R"("--crop":"field:bbox:xyxy","--box-convention":"edges","--crop-scale":"1.2",)"
      R"("--square":"true","--size":"32","--resample":"area","--bucket-step":"64",)"
      R"("--bucket-max-ratio":"4","--points":"kp","--boxes":"bbox",)"
      R"("--pad-value":"0","--format":"png","--channels":"3","--quality":"95","--key-rule":"first-dot",)"
      R"("--image":"jpg jpeg png webp bmp tif tiff","--table-format":"auto","--max-table-size":"16G",)"
      R"("--max-pixels":"268435456",)"
      R"("--max-member-size":"1G","--max-label-size":"16M","--max-outputs-per-sample":"10000",)"
      R"("--group-window":"64M","--shard-size":"64K",)"
      R"("--on-error":"skip","--on-duplicate":"last","threads":2})");

  CLI::App app2;
  ConvertFlags f2;
  add_convert_flags(app2, f2);
  app2.parse(
      "in.tar -o o9 --on-error skip --on-duplicate first --ragged a --ragged b --image .jpg "
      "--image png --size 640x480 --resize fit --shard 1/2 -j 3 --no-images --overwrite "
      "--group-window 1M --key-rule last-dot",
      false);
  CHECK(
      options_json(app2, 3) ==
      R"({"inputs":"in.tar","--output":"o9","--overwrite":"true","--checkpoint-every":"30",)"
      R"("--crop":"none","--box-convention":"edges","--size":"640x480","--resize":"fit",)"
      R"("--resample":"area","--bucket-step":"64",)"
      R"("--bucket-max-ratio":"4","--pad-value":"0","--format":"jpg","--channels":"3","--quality":"95",)"
      R"("--key-rule":"last-dot","--image":[".jpg","png"],"--no-images":"true","--ragged":["a","b"],)"
      R"("--table-format":"auto","--max-table-size":"16G","--max-pixels":"268435456","--max-member-size":"1G",)"
      R"("--max-label-size":"16M","--max-outputs-per-sample":"10000","--group-window":"1M",)"
      R"("--shard-size":"1G","--shard":"1/2","--on-error":"skip","--on-duplicate":"first",)"
      R"("threads":3})");
}

TEST_CASE("convert flags: --allow-empty, and --progress, which is no option of the conversion") {
  CHECK_FALSE(options("").run.allow_empty);
  CHECK(options("--allow-empty").run.allow_empty);
  const ConvertFlags d = parse("");
  CHECK(d.progress == "auto");
  CHECK(d.progress_every == 10);
  const ConvertFlags f = parse("--progress plain --progress-every 2.5");
  CHECK(f.progress == "plain");
  CHECK(f.progress_every == 2.5);
  CHECK_THROWS_AS(parse("--progress fancy"), CLI::ValidationError);
  CHECK_THROWS_AS(parse("--progress-every 0"), CLI::ValidationError);
  // Not recorded in the manifest's options: they change nothing in the output.
  CLI::App app;
  ConvertFlags g;
  add_convert_flags(app, g);
  app.parse("in.tar -o out --progress none --progress-every 3 --allow-empty", false);
  const std::string j = options_json(app, 1);
  CHECK(j.find("--progress") == std::string::npos);
  CHECK(j.find(R"("--allow-empty":"true")") != std::string::npos);
}

// Issue #25, item 6: every numeric flag is read whole, finite and within its documented range.
TEST_CASE("convert flags: numbers are parsed strictly and within their range") {
  struct Bad {
    const char* flags;
    const char* message;
  };
  const Bad bad[] = {
      {"--quality 0", "--quality: '0' is out of range; accepted: an integer in [1, 100]"},
      {"--quality 101", "--quality: '101' is out of range; accepted: an integer in [1, 100]"},
      {"--quality 95.5", "--quality: '95.5' is not an integer; accepted: an integer in [1, 100]"},
      {"--quality 0x50", "--quality: '0x50' is not an integer; accepted: an integer in [1, 100]"},
      {"--quality 9e1", "--quality: '9e1' is not an integer; accepted: an integer in [1, 100]"},
      {"-j 1025", "--threads: '1025' is out of range; accepted: an integer in [0, 1024]"},
      {"-j -2", "--threads: '-2' is out of range; accepted: an integer in [0, 1024]"},
      {"-j 4x", "--threads: '4x' is not an integer; accepted: an integer in [0, 1024]"},
      {"--pad-value 256", "--pad-value: '256' is out of range; accepted: a number in [0, 255]"},
      {"--pad-value nan",
       "--pad-value: 'nan' is not a finite number; accepted: a number in [0, 255]"},
      {"--checkpoint-every inf",
       "--checkpoint-every: 'inf' is not a finite number; accepted: a number in [0, 86400]"},
      {"--checkpoint-every -1",
       "--checkpoint-every: '-1' is out of range; accepted: a number in [0, 86400]"},
      {"--max-pixels -1",
       "--max-pixels: '-1' is out of range; accepted: an integer in [1, 1099511627776]"},
      {"--max-pixels 1e6",
       "--max-pixels: '1e6' is not an integer; accepted: an integer in [1, 1099511627776]"},
      {"--max-outputs-per-sample 0",
       "--max-outputs-per-sample: '0' is out of range; accepted: an integer in [1, 4294967296]"},
      {"--progress-every nan",
       "--progress-every: 'nan' is not a finite number; accepted: a number in [0.1, 86400]"},
      {"--progress-every 0",
       "--progress-every: '0' is out of range; accepted: a number in [0.1, 86400]"},
  };
  for (const Bad& b : bad) {
    INFO(b.flags);
    CHECK(refusal(b.flags) == b.message);
  }
  // Decimal, whatever CLI11 would make of a leading 0 (octal) on its own.
  CHECK(options("--quality 010").transform.quality == 10);
  CHECK(options("-j 08").run.threads == 8);
  CHECK(options("-j 0").run.threads == options("").run.threads);  // all cores
  CHECK(options("--max-pixels 1099511627776").limits.max_pixels == 1099511627776ull);
  CHECK(options("").limits.max_outputs_per_sample == 10000);
  CHECK(options("--max-outputs-per-sample 3").limits.max_outputs_per_sample == 3);
  CHECK(options("--pad-value 127.5").transform.pad_value == 127.5);
  CHECK(options("--checkpoint-every 1e3").run.checkpoint_seconds == 1000);
  // Filled in by code: the same ranges.
  ConvertFlags f;
  f.quality = 0;
  CHECK_THROWS_WITH(convert_options(f),
                    "--quality: '0' is out of range; accepted: an integer in [1, 100]");
  f = ConvertFlags{};
  f.threads = -1;
  CHECK_THROWS_WITH(convert_options(f),
                    "--threads: '-1' is out of range; accepted: an integer in [0, 1024]");
  f = ConvertFlags{};
  f.bucket_max_ratio = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(convert_options(f),
                    "--bucket-max-ratio: 'nan' is not a finite number; accepted: a number in [1, "
                    "64]");
}

TEST_CASE("flag values: integer_flag, number_flag, size_flag, part_flag") {
  CHECK(integer_flag("--n", "16", {1, 100}) == 16);
  CHECK_THROWS_WITH(integer_flag("--n", "1e3", {1, 100}),
                    "--n: '1e3' is not an integer; accepted: an integer in [1, 100]");
  CHECK(number_flag("--f", "-0.5", {-1, 1}) == -0.5);
  CHECK_THROWS_WITH(number_flag("--f", "1e-300", {0.01, 1}),
                    "--f: '1e-300' is out of range; accepted: a number in [0.01, 1]");
  const SizeValue s = size_flag("--size", "192x256");
  CHECK((s.width == 192 && s.height == 256 && !s.single));
  const SizeValue n = size_flag("--size", "224");
  CHECK((n.width == 224 && n.height == 224 && n.single));
  CHECK(part_flag("--shard", "999999/1000000") == std::pair<uint32_t, uint32_t>{999999, 1000000});
}

TEST_CASE("convert flags: rules between options are the library's, each a UsageError (exit 2)") {
  CHECK(library_refusal("--format keep --crop center") ==
        "--format keep stores the source bytes untouched; it cannot be combined with --crop or "
        "--size");
  CHECK(library_refusal("--format keep --size 64") ==
        library_refusal("--format keep --crop center"));
  CHECK(library_refusal("--classes-from-dirs --no-images") ==
        "--classes-from-dirs takes each sample's class from the folder of its image; it cannot "
        "be combined with --no-images");
  CHECK(library_refusal("--table t.csv --no-images") ==
        "--table: rows are made from the images they name; it cannot be combined with "
        "--no-images");
  CHECK(library_refusal("--table t.csv --instances persons") ==
        "--instances splits per-sample label files; with --table each row is already one output");
  ConvertFlags f = parse("--classes-from-dirs");
  CHECK(library_refusal(f) == "(accepted)");
  f.inputs = {"-"};
  CHECK(library_refusal(f) ==
        "--classes-from-dirs reads the inputs' names first, so it cannot read standard input "
        "('-')");
  // Given the class names, a library caller needs no pre-pass: standard input is fine.
  ConvertOptions named = convert_options(f);
  named.labels.classes = {"cat", "dog"};
  CHECK_NOTHROW(check_convert_options(named));
  CHECK(library_refusal("--table t.csv --crop center --size 64 --channels 1") == "(accepted)");
  // Three rules the CLI once checked alone: a library caller is held to them too.
  CHECK(library_refusal("--instance-fields kp") ==
        "--instance-fields slices the fields of --instances FIELD; give one");
  CHECK(library_refusal("--instances bbox --instance-fields kp") == "(accepted)");
  CHECK(library_refusal("--crop field:bbox --fit-aspect") ==
        "--fit-aspect grows the region to the aspect ratio of --size, so it needs --size WxH");
  CHECK(library_refusal("--crop field:bbox --fit-aspect --size 48x64") == "(accepted)");
  for (const char* flags :
       {"--table-image path", "--table-columns a,b", "--table-prefix img/", "--table-format csv"})
    CHECK(library_refusal(flags) ==
          "--table-image, --table-columns, --table-prefix and --table-format describe a --table "
          "FILE; give one");
  CHECK(library_refusal("--table t.csv --table-image path") == "(accepted)");
}

TEST_CASE("convert flags: the output size is bounded before the run (#35 item 12)") {
  // 65535^2 x 3 B = 12.0 GiB a thread, over --max-pixels' 2^28 x 3 B = 768 MiB.
  CHECK(library_refusal("--size 65535 --crop center --threads 16") ==
        "--size 65535 with --crop center needs 12.0 GiB per thread for the output image "
        "(65535x65535x3), 192.0 GiB with 16 threads, over the bound of 768.0 MiB (--max-pixels "
        "268435456 x 3 channels: an output image is bounded as a decoded one is); choose a "
        "smaller --size, or raise --max-pixels");
  CHECK(library_refusal("--size 65535x1 --crop center --threads 1") ==
        "--size 65535x1 with --crop center: JPEG images are at most 65500 pixels a side, and "
        "every output is 65535x1; use --format png or a smaller --size");
  CHECK(library_refusal("--size 65535x1 --crop center --format webp") ==
        "--size 65535x1 with --crop center: WebP images are at most 16383 pixels a side, and "
        "every output is 65535x1; use --format png or a smaller --size");
  CHECK(library_refusal("--size 65535x1 --crop center --format png") == "(accepted)");
  CHECK(library_refusal("--size 65500x1 --crop center") == "(accepted)");
  CHECK(library_refusal("--size 16383x2 --resize exact --format webp") == "(accepted)");
  // Exactly at --max-pixels is allowed; one more pixel side is not. Each resize mode's bound.
  CHECK(library_refusal("--size 16384 --crop center") == "(accepted)");
  CHECK(library_refusal("--size 64 --crop center --max-pixels 4096") == "(accepted)");
  CHECK(library_refusal("--size 65 --crop center --max-pixels 4096 --threads 1")
            .starts_with("--size 65 with --crop center needs 12.4 KiB per thread"));
  CHECK(library_refusal("--size 65 --resize longer --max-pixels 4096")
            .starts_with("--size 65 with --resize longer needs"));
  CHECK(library_refusal("--size 65 --max-pixels 4096")
            .starts_with("--size 65 with --resize shorter needs"));
  CHECK(library_refusal("--size 100x41 --resize fit --max-pixels 4096")
            .starts_with("--size 100x41 with --resize fit needs"));
  CHECK(library_refusal("--size 65 --crop center --max-pixels 4096 --channels 1 --threads 1")
            .starts_with("--size 65 with --crop center needs 4.1 KiB per thread for the output "
                         "image (65x65x1), over the bound of 4.0 KiB"));
  CHECK(library_refusal("--resize bucket --size 8192 --format webp") ==
        "--size 8192 with --resize bucket (--bucket-step 64, --bucket-max-ratio 4; its largest "
        "bucket 8192x8192): WebP images are at most 16383 pixels a side, and an output may be "
        "4096x16384; use --format jpg or png, or a smaller --size");
  CHECK(library_refusal("--resize bucket --size 8192") == "(accepted)");
  // What the flags do not decide is checked per sample (check_output_size).
  CHECK(library_refusal("--crop box:0,0,100000,100000 --max-pixels 4096") == "(accepted)");
  TransformOptions t;
  CHECK_NOTHROW(check_output_size(64, 64, t, 4096));
  CHECK_THROWS_MATCHES(check_output_size(65, 64, t, 4096), SampleError,
                       Catch::Matchers::Message("the output image would be 65x64 = 4160 pixels, "
                                                "over --max-pixels 4096"));
  t.format = OutputFormat::Webp;
  CHECK_THROWS_MATCHES(check_output_size(16384, 1, t, 1u << 28), SampleError,
                       Catch::Matchers::Message("the output image would be 16384x1: WebP images "
                                                "are at most 16383 pixels a side (--format)"));
  t.format = OutputFormat::Keep;
  CHECK_NOTHROW(check_output_size(100000, 100000, t, 4096));
}

TEST_CASE("size_text: a size in its largest whole unit, read back by bytes_flag as it was") {
  CHECK(size_text(64ull << 20) == "64M");
  CHECK(size_text(1ull << 30) == "1G");
  CHECK(size_text(16ull << 30) == "16G");
  CHECK(size_text(3ull << 40) == "3T");
  CHECK(size_text(1536) == "1536");  // 1.5K: no whole unit
  CHECK(size_text(2048) == "2K");
  CHECK(size_text(1000) == "1000");
  for (uint64_t v : {1ull, 1000ull, 2048ull, 5ull << 20, (1ull << 30) + 1024, 16ull << 30})
    CHECK(bytes_flag("--shard-size", size_text(v)) == v);
}

TEST_CASE("convert's flag defaults are the library's: the flags alone give ConvertOptions{}") {
  ConvertFlags f;
  f.inputs = {"in.tar"};
  f.output = "out";
  const ConvertOptions o = convert_options(f);
  const ConvertOptions d;
  CHECK(o.limits.max_pixels == d.limits.max_pixels);
  CHECK(o.limits.max_member_size == d.limits.max_member_size);
  CHECK(o.limits.max_label_size == d.limits.max_label_size);
  CHECK(o.limits.max_outputs_per_sample == d.limits.max_outputs_per_sample);
  CHECK(o.limits.group_window == d.limits.group_window);
  CHECK(o.limits.shard_size == d.limits.shard_size);
  CHECK(o.table.options.max_bytes == d.table.options.max_bytes);
  CHECK(o.remote_output.multipart_size == d.remote_output.multipart_size);
  CHECK(o.run.checkpoint_seconds == d.run.checkpoint_seconds);
  CHECK(o.run.skip_errors == d.run.skip_errors);
  CHECK(o.members.image_exts == d.members.image_exts);
  CHECK(o.members.key_rule == d.members.key_rule);
  CHECK(o.members.on_duplicate == d.members.on_duplicate);
  CHECK(o.transform.format == d.transform.format);
  CHECK(o.transform.quality == d.transform.quality);
  CHECK(o.transform.pad_value == d.transform.pad_value);
  CHECK(o.transform.channels == d.transform.channels);
  CHECK(o.transform.geometry.crop == d.transform.geometry.crop);
  CHECK(o.transform.geometry.box_convention == d.transform.geometry.box_convention);
  CHECK(o.transform.geometry.resample == d.transform.geometry.resample);
  CHECK(o.transform.geometry.crop_scale == d.transform.geometry.crop_scale);
  CHECK(o.transform.geometry.bucket_step == d.transform.geometry.bucket_step);
  CHECK(o.transform.geometry.bucket_max_ratio == d.transform.geometry.bucket_max_ratio);
}
