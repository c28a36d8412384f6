#include "transform/coco_mask.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

#include "common/error.h"

namespace tarmac {
namespace {

// Vertices further out than this are refused: cv::fillPoly takes int coordinates, and nothing
// that far from an image is a real outline.
constexpr double kMaxCoordinate = double(1 << 24);

std::vector<double> polygon_of(const nlohmann::json& p, size_t index) {
  const std::string where = "polygon " + std::to_string(index);
  if (!p.is_array()) throw ParseError(where + " is not an array of numbers");
  if (p.size() % 2 != 0)
    throw ParseError(where + " has " + std::to_string(p.size()) +
                     " coordinates, an odd number (a polygon is x0, y0, x1, y1, ...)");
  std::vector<double> out;
  out.reserve(p.size());
  for (const auto& v : p) {
    if (!v.is_number()) throw ParseError(where + " holds " + v.dump() + ", not a number");
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::abs(d) > kMaxCoordinate)
      throw ParseError(where + " has a coordinate " + v.dump() + " beyond 2^24 pixels");
    out.push_back(d);
  }
  return out;
}

int64_t dimension(const nlohmann::json& v, const char* what) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t{1} << 31))
    throw ParseError(std::string("its 'size' ") + what + " " + v.dump() +
                     " is not a whole number of pixels");
  return v.get<int64_t>();
}

}  // namespace

void check_rle_counts(const std::vector<uint64_t>& counts, int64_t height, int64_t width) {
  const uint64_t total = static_cast<uint64_t>(height) * static_cast<uint64_t>(width);
  uint64_t sum = 0;
  for (uint64_t c : counts) {
    if (c > total - sum)
      throw ParseError("its RLE counts sum to more than its size " + std::to_string(height) +
                       " x " + std::to_string(width) + " = " + std::to_string(total) + " pixels");
    sum += c;
  }
  if (sum != total)
    throw ParseError("its RLE counts sum to " + std::to_string(sum) + ", not its size " +
                     std::to_string(height) + " x " + std::to_string(width) + " = " +
                     std::to_string(total) + " pixels");
}

std::vector<uint64_t> rle_from_string(std::string_view s, int64_t height, int64_t width) {
  std::vector<int64_t> cnts;
  size_t p = 0;
  while (p < s.size()) {
    int64_t x = 0;
    int k = 0;
    bool more = true;
    while (more) {
      if (p >= s.size()) throw ParseError("its compressed RLE string ends inside a count");
      const int c = static_cast<unsigned char>(s[p]) - 48;
      if (c < 0 || c > 63)
        throw ParseError("its compressed RLE string holds a character outside '0'..'o' at " +
                         std::to_string(p));
      // 12 groups of 5 bits fill 60 bits: a longer count is no count maskApi writes.
      if (k >= 12) throw ParseError("its compressed RLE string holds a count of over 12 digits");
      x |= static_cast<int64_t>(c & 0x1f) << (5 * k);
      more = (c & 0x20) != 0;
      ++p;
      ++k;
      if (!more && (c & 0x10)) x |= static_cast<int64_t>(~uint64_t{0} << (5 * k));  // sign
    }
    if (cnts.size() > 2) x += cnts[cnts.size() - 2];
    if (x < 0 || x > height * width)
      throw ParseError("its compressed RLE string decodes to a count " + std::to_string(x) +
                       " outside 0.." + std::to_string(height * width));
    cnts.push_back(x);
  }
  std::vector<uint64_t> out(cnts.begin(), cnts.end());
  check_rle_counts(out, height, width);
  return out;
}

CocoSegmentation parse_coco_segmentation(std::string_view json_text, uint64_t max_pixels) {
  const auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded()) throw ParseError("it is not JSON");
  CocoSegmentation s;
  if (j.is_array()) {
    // [x0, y0, ...] is one polygon; [[...], [...]] several (COCO's).
    if (!j.empty() && j.front().is_number()) {
      s.polygons.push_back(polygon_of(j, 0));
    } else {
      for (size_t i = 0; i < j.size(); ++i) s.polygons.push_back(polygon_of(j[i], i));
    }
    return s;
  }
  if (!j.is_object() || !j.contains("counts") || !j.contains("size"))
    throw ParseError(
        "it is neither polygons (an array of x0, y0, x1, y1, ... arrays) nor an RLE "
        "({\"counts\": ..., \"size\": [h, w]})");
  const auto& size = j["size"];
  if (!size.is_array() || size.size() != 2)
    throw ParseError("its RLE 'size' is not [height, width]");
  s.rle = true;
  s.height = dimension(size[0], "height");
  s.width = dimension(size[1], "width");
  if (static_cast<uint64_t>(s.height) * static_cast<uint64_t>(s.width) > max_pixels)
    throw ParseError("its RLE 'size' " + size.dump() + " is over --max-pixels " +
                     std::to_string(max_pixels));
  const auto& counts = j["counts"];
  if (counts.is_string()) {
    s.counts = rle_from_string(counts.get<std::string>(), s.height, s.width);
    return s;
  }
  if (!counts.is_array()) throw ParseError("its RLE 'counts' is neither an array nor a string");
  for (const auto& c : counts) {
    if (!c.is_number_unsigned() && !(c.is_number_integer() && c.get<int64_t>() >= 0))
      throw ParseError("its RLE 'counts' holds " + c.dump() + ", not a count (a whole number)");
    s.counts.push_back(c.get<uint64_t>());
  }
  check_rle_counts(s.counts, s.height, s.width);
  return s;
}

cv::Mat rasterise_segmentation(const CocoSegmentation& s, int width, int height) {
  cv::Mat mask(height, width, CV_8U, cv::Scalar(0));
  if (s.rle) {
    if (s.height != height || s.width != width)
      throw ParseError("its RLE 'size' is [" + std::to_string(s.height) + ", " +
                       std::to_string(s.width) + "] but its image is " + std::to_string(height) +
                       " x " + std::to_string(width) + " (height x width): it is another image's");
    check_rle_counts(s.counts, s.height, s.width);
    uint64_t at = 0;
    for (size_t i = 0; i < s.counts.size(); ++i) {
      const uint64_t end = at + s.counts[i];
      if (i % 2 == 1)  // runs of 1s; column-major: position p is (x, y) = (p / h, p % h)
        for (uint64_t p = at; p < end; ++p)
          mask.at<uint8_t>(static_cast<int>(p % static_cast<uint64_t>(height)),
                           static_cast<int>(p / static_cast<uint64_t>(height))) = 1;
      at = end;
    }
    return mask;
  }
  for (const auto& poly : s.polygons) {
    if (poly.empty()) continue;
    std::vector<cv::Point> pts;
    for (size_t i = 0; i + 1 < poly.size(); i += 2)
      pts.emplace_back(static_cast<int>(std::floor(poly[i] + 0.5)),
                       static_cast<int>(std::floor(poly[i + 1] + 0.5)));
    const cv::Point* p = pts.data();
    const int n = static_cast<int>(pts.size());
    cv::fillPoly(mask, &p, &n, 1, cv::Scalar(1), cv::LINE_8);
  }
  return mask;
}

}  // namespace tarmac
