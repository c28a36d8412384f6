#include "transform/image_codec.h"

#include <turbojpeg.h>
#include <webp/decode.h>

#include <atomic>
#include <cstring>
#include <opencv2/imgproc.hpp>

#include "common/error.h"
#include "transform/opencv_codecs.h"
#include "transform/png_region.h"

namespace tarmac {
namespace {

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint32_t le32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
uint16_t rd16(const uint8_t* p, bool le) {
  return le ? static_cast<uint16_t>(p[0] | (p[1] << 8)) : static_cast<uint16_t>((p[0] << 8) | p[1]);
}
uint32_t rd32(const uint8_t* p, bool le) {
  return le ? le32(p) : be32(p);
}

// EXIF orientation from a JPEG's APP1 segment; 1 when absent or unreadable.
int jpeg_exif_orientation(std::span<const uint8_t> d) {
  size_t i = 2;
  while (i + 4 <= d.size() && d[i] == 0xFF) {
    const uint8_t marker = d[i + 1];
    if (marker == 0xDA || marker == 0xD9) break;  // start of scan: no more metadata
    const size_t len = (size_t{d[i + 2]} << 8) | d[i + 3];
    if (len < 2 || i + 2 + len > d.size()) break;
    const uint8_t* seg = d.data() + i + 4;
    const size_t seg_len = len - 2;
    if (marker == 0xE1 && seg_len >= 14 && std::memcmp(seg, "Exif\0\0", 6) == 0) {
      const uint8_t* t = seg + 6;
      const size_t tlen = seg_len - 6;
      bool le;
      if (t[0] == 'I' && t[1] == 'I')
        le = true;
      else if (t[0] == 'M' && t[1] == 'M')
        le = false;
      else
        return 1;
      const uint32_t ifd = rd32(t + 4, le);
      if (ifd > tlen || tlen - ifd < 2) return 1;
      const uint16_t count = rd16(t + ifd, le);
      for (uint32_t k = 0; k < count; ++k) {
        const size_t e = ifd + 2 + size_t{k} * 12;
        if (e + 12 > tlen) return 1;
        if (rd16(t + e, le) == 0x0112) {
          const int v = rd16(t + e + 8, le);
          return (v >= 1 && v <= 8) ? v : 1;
        }
      }
      return 1;
    }
    i += 2 + len;
  }
  return 1;
}

cv::Mat apply_orientation(cv::Mat m, int orientation) {
  cv::Mat out;
  switch (orientation) {
    case 2:
      cv::flip(m, out, 1);
      return out;
    case 3:
      cv::rotate(m, out, cv::ROTATE_180);
      return out;
    case 4:
      cv::flip(m, out, 0);
      return out;
    case 5:
      cv::transpose(m, out);
      return out;
    case 6:
      cv::rotate(m, out, cv::ROTATE_90_CLOCKWISE);
      return out;
    case 7:
      cv::transpose(m, out);
      cv::rotate(out, out, cv::ROTATE_180);
      return out;
    case 8:
      cv::rotate(m, out, cv::ROTATE_90_COUNTERCLOCKWISE);
      return out;
    default:
      return m;
  }
}

struct TjHandle {
  tjhandle h;
  explicit TjHandle(bool compress) : h(compress ? tjInitCompress() : tjInitDecompress()) {}
  ~TjHandle() { tjDestroy(h); }
};
tjhandle decompressor() {
  thread_local TjHandle t(false);
  return t.h;
}
tjhandle compressor() {
  thread_local TjHandle t(true);
  return t.h;
}

}  // namespace

void check_image_pixels(const ImageHeader& h, uint64_t max_pixels) {
  if (h.width <= 0 || h.height <= 0) return;
  const uint64_t px = uint64_t(h.width) * uint64_t(h.height);
  if (px > max_pixels)
    throw ParseError("image is " + std::to_string(h.width) + "x" + std::to_string(h.height) +
                     " = " + std::to_string(px) + " pixels, over --max-pixels " +
                     std::to_string(max_pixels));
}

namespace {

cv::Mat decode_jpeg(std::span<const uint8_t> d, const ImageHeader& h) {
  cv::Mat out(h.height, h.width, CV_8UC3);
  tjhandle tj = decompressor();
  const int r = tjDecompress2(tj, d.data(), static_cast<unsigned long>(d.size()), out.data, h.width,
                              0, h.height, TJPF_BGR, 0);
  if (r != 0) {
    const std::string msg = tjGetErrorStr2(tj);
    // libjpeg's "extraneous bytes before marker" warning is common in camera files and harmless.
    if (tjGetErrorCode(tj) != TJERR_WARNING || msg.find("extraneous bytes") == std::string::npos)
      throw ParseError("corrupt or truncated JPEG: " + msg);
  }
  return apply_orientation(out, h.orientation);
}

// TIFF: ImageWidth (256) and ImageLength (257) of the first IFD, the page OpenCV decodes.
// Throws when the IFD or either tag is missing or out of the data, so that no TIFF reaches
// the decoder with a size that was not checked against --max-pixels.
void tiff_size(std::span<const uint8_t> d, ImageHeader& h) {
  const bool le = d[0] == 'I';
  const uint32_t ifd = rd32(d.data() + 4, le);
  if (ifd < 8 || ifd > d.size() || d.size() - ifd < 2)
    throw ParseError("corrupt TIFF: first IFD outside the data");
  const uint16_t count = rd16(d.data() + ifd, le);
  if ((d.size() - ifd - 2) / 12 < count) throw ParseError("corrupt TIFF: IFD runs past the data");
  int64_t width = -1, height = -1;
  for (uint32_t k = 0; k < count; ++k) {
    const uint8_t* e = d.data() + ifd + 2 + size_t{k} * 12;
    const uint16_t tag = rd16(e, le), type = rd16(e + 2, le);
    if (tag != 256 && tag != 257) continue;
    int64_t v;
    if (type == 3)  // SHORT: the value sits in the first two bytes of the value field
      v = rd16(e + 8, le);
    else if (type == 4)  // LONG
      v = rd32(e + 8, le);
    else
      throw ParseError("corrupt TIFF: image size tag of type " + std::to_string(type));
    (tag == 256 ? width : height) = v;
  }
  if (width <= 0 || height <= 0) throw ParseError("corrupt TIFF: no image width or length");
  h.width = static_cast<int>(std::min<int64_t>(width, INT32_MAX));
  h.height = static_cast<int>(std::min<int64_t>(height, INT32_MAX));
}

// WebP through libwebp directly: BGR, or BGRA for a dense map with alpha (what OpenCV's
// decoder gives). Never through imdecode, which sniffs the bytes again and hands a WebP that
// libwebp refuses to whichever later decoder claims them (DICOM's asserts on garbage).
cv::Mat decode_webp(std::span<const uint8_t> d, const ImageHeader& h, bool keep_alpha) {
  const bool bgra = keep_alpha && h.alpha;
  cv::Mat out(h.height, h.width, bgra ? CV_8UC4 : CV_8UC3);
  const size_t stride = out.step[0];
  const uint8_t* r = bgra ? WebPDecodeBGRAInto(d.data(), d.size(), out.data, stride * out.rows,
                                               static_cast<int>(stride))
                          : WebPDecodeBGRInto(d.data(), d.size(), out.data, stride * out.rows,
                                              static_cast<int>(stride));
  if (r == nullptr) throw ParseError("corrupt or truncated WebP");
  return out;
}

// PNG: every chunk must be present and the stream must end with IEND; libpng tolerates some
// truncations that we do not.
void check_png_complete(std::span<const uint8_t> d) {
  size_t i = 8;
  while (i + 12 <= d.size()) {
    const uint32_t len = be32(d.data() + i);
    if (len > d.size() - i - 12) break;
    if (std::memcmp(d.data() + i + 4, "IEND", 4) == 0) return;
    i += 12 + size_t{len};
  }
  throw ParseError("truncated PNG: no IEND chunk");
}

std::atomic<uint64_t> g_png_opencv_decodes{0};

cv::Rect whole(const ImageHeader& h) {
  return {0, 0, h.width, h.height};
}

}  // namespace

ImageHeader probe_image(std::span<const uint8_t> d) {
  ImageHeader h;
  if (d.size() >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) {
    h.format = ImageFormat::Jpeg;
    int w = 0, hh = 0, subsamp = 0, cs = 0;
    if (tjDecompressHeader3(decompressor(), d.data(), static_cast<unsigned long>(d.size()), &w, &hh,
                            &subsamp, &cs) != 0)
      throw ParseError(std::string("corrupt JPEG header: ") + tjGetErrorStr2(decompressor()));
    h.width = w;
    h.height = hh;
    h.cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    h.grey = cs == TJCS_GRAY;
    h.orientation = jpeg_exif_orientation(d);
  } else if (d.size() >= 24 && std::memcmp(d.data(), "\x89PNG\r\n\x1a\n", 8) == 0) {
    h.format = ImageFormat::Png;
    if (std::memcmp(d.data() + 12, "IHDR", 4) != 0) throw ParseError("corrupt PNG: no IHDR");
    h.width = static_cast<int>(std::min<uint32_t>(be32(d.data() + 16), INT32_MAX));
    h.height = static_cast<int>(std::min<uint32_t>(be32(d.data() + 20), INT32_MAX));
    h.grey = d.size() > 25 && (d[25] == 0 || d[25] == 4);  // IHDR colour type
  } else if (d.size() >= 12 && std::memcmp(d.data(), "RIFF", 4) == 0 &&
             std::memcmp(d.data() + 8, "WEBP", 4) == 0) {
    // libwebp's own header parser: the same one its decoder uses, so what is probed here is
    // what gets decoded (no hand parsing of VP8/VP8L/VP8X to drift from it).
    h.format = ImageFormat::Webp;
    WebPBitstreamFeatures f;
    if (WebPGetFeatures(d.data(), d.size(), &f) != VP8_STATUS_OK)
      throw ParseError("corrupt WebP header");
    if (f.has_animation) throw ParseError("animated WebP: tarmac decodes still images only");
    h.width = f.width;
    h.height = f.height;
    h.alpha = f.has_alpha != 0;
  } else if (d.size() >= 26 && d[0] == 'B' && d[1] == 'M') {
    h.format = ImageFormat::Bmp;
    h.width = static_cast<int>(le32(d.data() + 18));
    const int32_t hh = static_cast<int32_t>(le32(d.data() + 22));
    h.height = hh == INT32_MIN ? INT32_MAX : std::abs(hh);
  } else if (d.size() >= 8 &&
             (std::memcmp(d.data(), "II*\0", 4) == 0 || std::memcmp(d.data(), "MM\0*", 4) == 0)) {
    h.format = ImageFormat::Tiff;
    tiff_size(d, h);
  } else {
    throw ParseError(d.empty() ? "empty image member" : "not a JPEG, PNG, WebP, BMP or TIFF image");
  }
  return h;
}

cv::Mat decode_image(std::span<const uint8_t> d, uint64_t max_pixels) {
  const ImageHeader h = probe_image(d);
  check_image_pixels(h, max_pixels);
  // CMYK: libjpeg-turbo cannot convert to BGR itself; OpenCV's decoder does.
  if (h.format == ImageFormat::Jpeg && !h.cmyk) return decode_jpeg(d, h);
  if (h.format == ImageFormat::Webp) return decode_webp(d, h, false);
  if (h.format == ImageFormat::Png) {
    // ISA-L's inflate and no libpng transforms: the same pixels in about half the time.
    if (auto m = decode_png_region(d, PngLayout::Bgr8, whole(h), max_pixels)) return *m;
    g_png_opencv_decodes.fetch_add(1, std::memory_order_relaxed);
    check_png_complete(d);
  }
  cv::Mat m = opencv_decode(d, detail::CvDecodeMode::Bgr8, "image");
  if (m.type() != CV_8UC3) throw ParseError("unexpected pixel type after decoding");
  return m;
}

cv::Mat decode_dense(std::span<const uint8_t> d, uint64_t max_pixels) {
  const ImageHeader h = probe_image(d);
  check_image_pixels(h, max_pixels);
  if (h.format == ImageFormat::Webp) return decode_webp(d, h, true);
  if (h.format == ImageFormat::Png) {
    if (auto m = decode_png_region(d, PngLayout::Unchanged, whole(h), max_pixels)) return *m;
    g_png_opencv_decodes.fetch_add(1, std::memory_order_relaxed);
    check_png_complete(d);
  }
  return opencv_decode(d, detail::CvDecodeMode::Unchanged, "dense map");
}

uint64_t png_opencv_decodes() {
  return g_png_opencv_decodes.load(std::memory_order_relaxed);
}

std::vector<uint8_t> encode_image(const cv::Mat& img, OutputFormat format, int quality) {
  switch (format) {
    case OutputFormat::Jpeg: {
      if ((img.type() != CV_8UC3 && img.type() != CV_8UC1) || !img.isContinuous())
        throw InternalError("JPEG encoding needs continuous 8-bit BGR or grey pixels");
      const bool grey = img.type() == CV_8UC1;
      unsigned char* buf = nullptr;
      unsigned long size = 0;
      if (tjCompress2(compressor(), img.data, img.cols, 0, img.rows, grey ? TJPF_GRAY : TJPF_BGR,
                      &buf, &size, grey ? TJSAMP_GRAY : TJSAMP_420, quality, 0) != 0) {
        std::string msg = tjGetErrorStr2(compressor());
        tjFree(buf);
        throw FatalError("JPEG encoding failed: " + msg);
      }
      std::vector<uint8_t> out(buf, buf + size);
      tjFree(buf);
      return out;
    }
    case OutputFormat::Png:
    case OutputFormat::Webp: {
      // PNG at zlib level 1: most of the size for a fraction of the time.
      return format == OutputFormat::Png
                 ? opencv_encode(img, detail::CvEncodeFormat::Png, 1)
                 : opencv_encode(img, detail::CvEncodeFormat::Webp, quality);
    }
    case OutputFormat::Raw: {
      if (img.type() != CV_8UC3) throw InternalError("raw pixels are 3-channel RGB");
      cv::Mat rgb;
      cv::cvtColor(img, rgb, cv::COLOR_BGR2RGB);
      return {rgb.data, rgb.data + rgb.total() * rgb.elemSize()};
    }
    case OutputFormat::Keep:
      break;
  }
  throw InternalError("encode_image: 'keep' stores the source bytes; nothing to encode");
}

std::string format_extension(OutputFormat f) {
  switch (f) {
    case OutputFormat::Jpeg:
      return "jpg";
    case OutputFormat::Png:
      return "png";
    case OutputFormat::Webp:
      return "webp";
    case OutputFormat::Raw:
      return "rgb";
    case OutputFormat::Keep:
      return "";
  }
  return "";
}

std::string image_format_extension(ImageFormat f) {
  switch (f) {
    case ImageFormat::Jpeg:
      return "jpg";
    case ImageFormat::Png:
      return "png";
    case ImageFormat::Webp:
      return "webp";
    case ImageFormat::Bmp:
      return "bmp";
    case ImageFormat::Tiff:
      return "tif";
    case ImageFormat::Unknown:
      break;
  }
  return "bin";
}

}  // namespace tarmac
