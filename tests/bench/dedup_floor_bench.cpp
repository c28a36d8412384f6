// What a hash of the whole image can cost on a crop workload (#29, docs/performance.md
// "Deduplication"): per JPEG of an archive, the CPU time of the conversion's region decode
// (jpeg_region.h, with the geometry the given `tarmac convert` flags compute from each sample's
// labels) and of the alternatives a whole-image hash could take its pixels from. Run by hand:
//   dedup_floor_bench W1.tar [ROUNDS] -- --crop field:bbox_xywh --crop-scale 1.2 --square --size
//   224
// Prints milliseconds per image of thread CPU time, medians of ROUNDS rounds (default 7), each
// round timing every operation over every image in turn (interleaved: the machine is shared).
// The floor is the entropy decoding of the rows below the region decode's last one: any hash
// of the whole image must entropy-decode them, and the conversion does not.
#include <archive.h>
#include <archive_entry.h>
// clang-format off
#include <cstdio>
#include <jpeglib.h>
// clang-format on

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <exception>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/convert_flags.h"
#include "labels/npz.h"
#include "transform/content_hash.h"
#include "transform/geometry.h"
#include "transform/image_codec.h"
#include "transform/jpeg_region.h"

namespace {

using namespace tarmac;

struct Frame {
  std::vector<uint8_t> jpeg;
  int w = 0, h = 0;
  Geometry g;
  int region_denom = 1;
  int region_bottom = 0;  // full-resolution rows the region decode reads: [0, bottom)
};

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The members of a tar, by name.
std::map<std::string, std::vector<uint8_t>> read_archive(const std::string& path) {
  archive* a = archive_read_new();
  archive_read_support_format_all(a);
  archive_read_support_filter_all(a);
  if (archive_read_open_filename(a, path.c_str(), 1 << 20) != ARCHIVE_OK)
    throw std::runtime_error(path + ": " + archive_error_string(a));
  std::map<std::string, std::vector<uint8_t>> members;
  archive_entry* e = nullptr;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    std::vector<uint8_t> data(static_cast<size_t>(archive_entry_size(e)));
    if (archive_read_data(a, data.data(), data.size()) != static_cast<la_ssize_t>(data.size()))
      throw std::runtime_error(path + ": short member " + archive_entry_pathname(e));
    members[archive_entry_pathname(e)] = std::move(data);
  }
  archive_read_free(a);
  return members;
}

[[noreturn]] void jpeg_fail(j_common_ptr) {
  throw std::runtime_error("libjpeg failed");
}

// libjpeg with errors thrown (the bench's images are valid; C++ exceptions through libjpeg's
// C frames are fine with GCC's unwind tables, and the bench never recovers from one).
struct Jpeg {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr jerr{};
  explicit Jpeg(const std::vector<uint8_t>& data) {
    cinfo.err = jpeg_std_error(&jerr);
    jerr.error_exit = jpeg_fail;
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data.data(), static_cast<unsigned long>(data.size()));
    jpeg_read_header(&cinfo, TRUE);
  }
  ~Jpeg() { jpeg_destroy_decompress(&cinfo); }
};

// Entropy decoding of the whole image, coefficients kept (no IDCT, no colour conversion).
void read_coefficients(const Frame& f) {
  Jpeg j(f.jpeg);
  jpeg_read_coefficients(&j.cinfo);
  jpeg_finish_decompress(&j.cinfo);
}

// Entropy decoding of rows [0, rows) at full scale, discarded: jpeg_skip_scanlines decodes the
// Huffman data of whole iMCU rows without IDCT (libjpeg-turbo).
void skip_rows(const Frame& f, int rows) {
  Jpeg j(f.jpeg);
  j.cinfo.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&j.cinfo);
  if (rows > 0) jpeg_skip_scanlines(&j.cinfo, static_cast<JDIMENSION>(rows));
  jpeg_abort_decompress(&j.cinfo);
}

const char* kUsage =
    "usage: dedup_floor_bench ARCHIVE [ROUNDS] -- CONVERT_FLAGS (the geometry of `tarmac "
    "convert`, e.g. --crop field:bbox_xywh --crop-scale 1.2 --square --size 224)\n";

}  // namespace

int main(int argc, char** argv) {
  int sep = 1;
  while (sep < argc && std::strcmp(argv[sep], "--") != 0) ++sep;
  if (sep < 2 || sep > 3) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  try {
    const std::string path = argv[1];
    const int rounds = sep == 3 ? std::stoi(argv[2]) : 7;
    CLI::App app("dedup_floor_bench");
    cli::ConvertFlags flags;
    cli::add_convert_flags(app, flags);
    std::vector<const char*> args = {argv[0], argv[1], "-o", "/nonexistent"};
    for (int i = sep + 1; i < argc; ++i) args.push_back(argv[i]);
    app.parse(static_cast<int>(args.size()), args.data());
    const ConvertOptions o = cli::convert_options(flags);
    const GeometryOptions& go = o.transform.geometry;

    const auto members = read_archive(path);
    std::vector<Frame> frames;
    for (const auto& [name, data] : members) {
      if (!name.ends_with(".jpg")) continue;
      Frame f;
      f.jpeg = data;
      const ImageHeader hdr = probe_image(f.jpeg);
      f.w = hdr.width;
      f.h = hdr.height;
      std::optional<Region> box;
      if (go.crop == CropMode::Field) {
        const std::string stem = name.substr(0, name.size() - 4);
        const auto label = members.find(stem + ".npz");
        if (label == members.end()) throw std::runtime_error(name + ": no .npz beside it");
        for (const auto& [field, v] : parse_npz(label->second, "", 1 << 30, "")) {
          if (field != o.transform.crop_field) continue;
          std::vector<double> b;
          const auto* p = reinterpret_cast<const float*>(v.data.data());
          if (v.dtype != DType::F32) throw std::runtime_error("the bench reads F32 boxes only");
          for (int k = 0; k < 4; ++k) b.push_back(p[k]);
          box = region_from_box(b.data(), o.transform.crop_field_xyxy);
        }
      }
      f.g = compute_geometry(go, f.w, f.h, box);
      // Where the region decode stops: its pixels are scaled rows [y0, y0 + rows) (their
      // centres at denom * y + (denom - 1) / 2 in full-resolution rows).
      const RegionDecode rd = decode_jpeg_region(f.jpeg, f.w, f.h, f.g, go.resample);
      f.region_denom = static_cast<int>(std::lround(rd.m[4] / f.g.m[4]));
      const double y0 =
          ((rd.m[5] - f.g.m[5]) / f.g.m[4] - (f.region_denom - 1) / 2.0) / f.region_denom;
      f.region_bottom =
          std::min(f.h, static_cast<int>(std::lround(y0) + rd.pixels.rows) * f.region_denom);
      frames.push_back(std::move(f));
    }
    if (frames.empty()) throw std::runtime_error(path + ": no .jpg members");

    std::vector<uint8_t> scratch, scratch2;
    auto whole = [&](const Frame& f) {
      return decode_jpeg_scaled(f.jpeg, f.w, f.h, f.region_denom, cv::Rect(0, 0, f.w, f.h),
                                JpegPixels::Bgr, &scratch2)
          .pixels;
    };
    struct Op {
      const char* name;
      std::function<void(const Frame&)> run;
    };
    const std::vector<Op> ops = {
        {"region decode (the conversion's)",
         [&](const Frame& f) { decode_jpeg_region(f.jpeg, f.w, f.h, f.g, go.resample, &scratch); }},
        {"entropy decoding, whole image (jpeg_read_coefficients)",
         [&](const Frame& f) { read_coefficients(f); }},
        {"entropy decoding, rows above the region's bottom (skip_scanlines)",
         [&](const Frame& f) { skip_rows(f, f.region_bottom); }},
        {"entropy decoding, all rows but the last iMCU row (skip_scanlines)",
         [&](const Frame& f) { skip_rows(f, f.h - 16); }},
        {"decode 1/8 scale, whole, BGR",
         [&](const Frame& f) {
           decode_jpeg_scaled(f.jpeg, f.w, f.h, 8, cv::Rect(0, 0, f.w, f.h), JpegPixels::Bgr,
                              &scratch2);
         }},
        {"decode at the region's scale, whole, BGR", [&](const Frame& f) { whole(f); }},
        {"decode at the region's scale, whole, BGR + its pHash",
         [&](const Frame& f) { perceptual_hash(whole(f)); }},
        {"decode at the region's scale, whole, BGR + its XXH3-128 digest",
         [&](const Frame& f) { pixel_digest(whole(f)); }},
        {"decode 1/8 scale, whole, BGR + its pHash",
         [&](const Frame& f) {
           perceptual_hash(decode_jpeg_scaled(f.jpeg, f.w, f.h, 8, cv::Rect(0, 0, f.w, f.h),
                                              JpegPixels::Bgr, &scratch2)
                               .pixels);
         }},
    };
    std::vector<std::vector<double>> ms(ops.size());
    for (int r = 0; r < rounds; ++r)
      for (size_t i = 0; i < ops.size(); ++i) {
        const double t0 = cpu_seconds();
        for (const Frame& f : frames) ops[i].run(f);
        ms[i].push_back(1e3 * (cpu_seconds() - t0) / static_cast<double>(frames.size()));
      }
    double bottom = 0;
    std::map<int, int> denoms;
    for (const Frame& f : frames) {
      bottom += static_cast<double>(f.region_bottom) / f.h;
      ++denoms[f.region_denom];
    }
    std::printf("%zu JPEGs of %s, %d rounds; region decode reads %.0f %% of the rows on average;",
                frames.size(), path.c_str(), rounds,
                100 * bottom / static_cast<double>(frames.size()));
    for (const auto& [d, n] : denoms) std::printf(" scale 1/%d: %d", d, n);
    std::printf("\n\n| ms per image (thread CPU, median) | |\n|---|---:|\n");
    std::vector<double> med(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      std::sort(ms[i].begin(), ms[i].end());
      med[i] = ms[i][ms[i].size() / 2];
      std::printf("| %s | %.3f |\n", ops[i].name, med[i]);
    }
    // The entropy decoding below the region, scaled from all-but-the-last iMCU row to all rows.
    const double all = med[3] * frames.front().h / (frames.front().h - 16.0);
    std::printf(
        "\nfloor (entropy decoding below the region: all rows - rows above its bottom): %.3f ms\n"
        "shared whole decode at the region's scale (its decode + pHash - the region's): %.3f ms\n"
        "separate 1/8 decode + its pHash: %.3f ms\n",
        all - med[2], med[6] - med[0], med[8]);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s\n%s", e.what(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
