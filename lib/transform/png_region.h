#pragma once
// Decoding only the part of a PNG that a crop needs: the IDAT stream is inflated by ISA-L and
// unfiltered up to the region's last row (every row above it too, as PNG's filters require;
// rows below are not read), and only the region's columns are converted to the layout that
// cv::imdecode gives through libpng, pixel for pixel. For a person box in a video frame most
// of a full decode is saved; for a whole image it is still ISA-L against zlib.
#include <cstdint>
#include <optional>
#include <span>

#include <opencv2/core.hpp>

namespace tarmac {

/// The layouts of image_codec.h: decode_image's (cv::IMREAD_COLOR: 8-bit BGR, grey
/// replicated, alpha dropped, 16 bits cut to their high byte) and decode_dense's
/// (cv::IMREAD_UNCHANGED: channels and depth as stored, palettes and transparency as BGR(A)).
enum class PngLayout { Bgr8, Unchanged };

/// Decodes the pixels of `rect` (clipped to the image) into a matrix of the whole image's
/// size, so that a warp computed for the whole image reads it unchanged; pixels outside the
/// clipped rect are left unset. An empty rect still inflates every row (the data is checked).
/// Returns nullopt for a PNG it leaves to the full decoder (Adam7-interlaced, with an eXIf
/// chunk, an odd or damaged ancillary chunk; image_codec.h counts them). Throws
/// ParseError for corrupt or truncated data up to the last row read, or over max_pixels.
/// The zlib stream's Adler-32 is not checked: every IDAT's CRC-32 covers the same bytes, and
/// libpng (the full decode) takes a wrong Adler-32 as a warning.
std::optional<cv::Mat> decode_png_region(std::span<const uint8_t> data, PngLayout layout,
                                         cv::Rect rect, uint64_t max_pixels);

/// Whether this PNG is one decode_png_region decodes itself, judged from IHDR and the chunk
/// names alone (no CRC is checked): false for an interlaced PNG, one with an eXIf chunk (whose
/// orientation cv::imdecode applies, changing the size a crop's geometry was computed for) and
/// one whose chunks do not reach IEND (the full decoder then says what is wrong).
bool png_region_decodable(std::span<const uint8_t> data);

}  // namespace tarmac
