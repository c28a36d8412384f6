#pragma once
// Test fixture: a small real dataset, converted by the library from a generated tar archive.
#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "write/tar_writer.h"

namespace tarmac::testing {

/// Writes `dir`/in.tar with `n` samples PREFIX/NNN (a PNG and a JSON of {"cls": i + cls_offset,
/// "score": i or i + 0.5 when `float_scores`, "pts": i % 3 + 1 points}) and converts it into
/// `dir`/OUT. Returns the dataset directory.
inline std::string make_dataset(const std::filesystem::path& dir, const std::string& out, int n,
                                const std::string& prefix = "s", bool float_scores = false,
                                uint64_t shard_size = 4096, bool images = true) {
  std::filesystem::create_directories(dir);
  const std::string tar = (dir / (out + ".tar")).string();
  {
    TarWriter w(tar);
    for (int i = 0; i < n; ++i) {
      char key[64];
      std::snprintf(key, sizeof key, "%s/%03d", prefix.c_str(), i);
      cv::Mat img(12 + i % 5, 16, CV_8UC3, cv::Scalar(i * 7 % 255, 40, 200 - i));
      std::vector<uint8_t> png;
      cv::imencode(".png", img, png);
      w.add(std::string(key) + ".png", png);
      std::string pts = "[";
      for (int p = 0; p <= i % 3; ++p) pts += std::string(p ? "," : "") + "[1.5, 2]";
      const std::string js = "{\"cls\": " + std::to_string(i) + ", \"score\": " +
                             (float_scores ? std::to_string(i) + ".5" : std::to_string(i)) +
                             ", \"pts\": " + pts + "], \"name\": \"n" + std::to_string(i) + "\"}";
      w.add(std::string(key) + ".json", {reinterpret_cast<const uint8_t*>(js.data()), js.size()});
    }
    w.finish();
  }
  ConvertOptions o;
  o.inputs = {tar};
  o.output = (dir / out).string();
  o.format = OutputFormat::Png;
  o.no_images = !images;
  o.shard_size = shard_size;
  o.threads = 2;
  convert(o, nullptr);
  return o.output;
}

}  // namespace tarmac::testing
