#pragma once
// Decoding and encoding of images. Decoding refuses truncated or corrupt data (OpenCV's
// imdecode silently returns a half-grey picture for a JPEG cut in half; libjpeg-turbo
// reports it) and refuses images over the pixel limit from their header, before allocating.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace tarmac {

enum class ImageFormat { Unknown, Jpeg, Png, Webp, Bmp, Tiff };

struct ImageHeader {
  ImageFormat format = ImageFormat::Unknown;
  int width = 0, height = 0;  ///< as stored (before EXIF orientation); 0 when unknown
  int orientation = 1;        ///< EXIF orientation 1..8 (JPEG only)
  bool cmyk = false;          ///< CMYK/YCCK JPEG (libjpeg cannot convert these to BGR itself)
  bool alpha = false;         ///< WebP with an alpha channel
  /// A grey source: a 1-component JPEG, a PNG of colour type grey or grey + alpha.
  bool grey = false;
  /// Size as displayed: width and height swap for EXIF orientations 5..8.
  int display_width() const { return orientation >= 5 ? height : width; }
  int display_height() const { return orientation >= 5 ? width : height; }
};

/// Throws ParseError when the header's size is over max_pixels (no-op when unknown).
void check_image_pixels(const ImageHeader& h, uint64_t max_pixels);

/// Reads format and size from the first bytes, without decoding. Throws ParseError for
/// data that is no image format tarmac decodes.
ImageHeader probe_image(std::span<const uint8_t> data);

/// Decodes to 8-bit, 3-channel BGR, EXIF orientation applied; grey is replicated, alpha
/// dropped. Throws ParseError for truncated/corrupt data or over max_pixels.
cv::Mat decode_image(std::span<const uint8_t> data, uint64_t max_pixels);

/// Decodes a dense map as stored: channels and bit depth kept (16-bit PNG stays 16-bit).
cv::Mat decode_dense(std::span<const uint8_t> data, uint64_t max_pixels);

/// How many PNGs decode_image and decode_dense have left to OpenCV in this process (those
/// png_region.h does not decode: interlaced, with eXIf, with an odd ancillary chunk).
uint64_t png_opencv_decodes();

enum class OutputFormat { Jpeg, Png, Webp, Raw, Keep };

/// Encodes BGR pixels, or 1-channel grey ones for Jpeg and Png (or a dense map, for Png), to
/// bytes.
std::vector<uint8_t> encode_image(const cv::Mat& bgr, OutputFormat format, int quality);

/// File extension for the format ("jpg", "png", "webp", "rgb").
std::string format_extension(OutputFormat f);
std::string image_format_extension(ImageFormat f);

}  // namespace tarmac
