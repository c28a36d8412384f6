#include "write/tar_writer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "common/crc32.h"
#include "common/error.h"
#include "write/manifest_file.h"

namespace tarmac {
namespace {

constexpr uint64_t kBlock = 512;
// The largest size the 11 octal digits of ustar's size field can hold, plus one.
constexpr uint64_t kUstarMaxSize = uint64_t{1} << 33;
constexpr std::string_view kPaxHeaderName = "././@PaxHeader";

using Block = std::array<uint8_t, kBlock>;

uint64_t padded(uint64_t n) {
  return (n + kBlock - 1) / kBlock * kBlock;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

struct UstarName {
  std::string_view prefix;
  std::string_view name;
};

// ustar holds a name of up to 100 bytes, or a prefix of up to 155 bytes and a name of up
// to 100 bytes that readers join with '/'. Returns nullopt when neither works.
std::optional<UstarName> split_ustar_name(std::string_view name) {
  if (!is_ascii(name)) return std::nullopt;
  if (name.size() <= 100) return UstarName{{}, name};
  for (size_t slash = name.find('/'); slash <= 155;  // npos > 155
       slash = name.find('/', slash + 1)) {
    const size_t rest = name.size() - slash - 1;
    if (slash > 0 && rest >= 1 && rest <= 100)
      return UstarName{name.substr(0, slash), name.substr(slash + 1)};
  }
  return std::nullopt;
}

size_t decimal_digits(uint64_t n) {
  size_t d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

// One pax record, "<len> <key>=<value>\n", where <len> counts the whole record, itself included.
void append_pax_record(std::string& out, std::string_view key, std::string_view value) {
  const uint64_t body = 1 + key.size() + 1 + value.size() + 1;
  uint64_t total = body + decimal_digits(body);
  while (body + decimal_digits(total) != total) total = body + decimal_digits(total);
  out += std::to_string(total);
  out += ' ';
  out += key;
  out += '=';
  out += value;
  out += '\n';
}

// The pax extended header body for a member, or "" when plain ustar suffices.
std::string pax_records(std::string_view name, uint64_t size) {
  std::string records;
  if (!split_ustar_name(name)) append_pax_record(records, "path", name);
  if (size >= kUstarMaxSize) append_pax_record(records, "size", std::to_string(size));
  return records;
}

void put_string(Block& b, size_t offset, size_t width, std::string_view s) {
  if (s.empty()) return;  // memcpy from an empty view's null data() is undefined
  std::memcpy(b.data() + offset, s.data(), std::min(width, s.size()));
}

// Zero-padded octal in width-1 digits followed by a NUL, as GNU tar and tarfile write.
void put_octal(Block& b, size_t offset, size_t width, uint64_t value) {
  for (size_t i = width - 1; i-- > 0;) {
    b[offset + i] = static_cast<uint8_t>('0' + (value & 7));
    value >>= 3;
  }
  b[offset + width - 1] = 0;
}

Block make_header(const UstarName& name, uint64_t size, char typeflag) {
  Block b{};
  put_string(b, 0, 100, name.name);
  put_octal(b, 100, 8, 0644);
  put_octal(b, 108, 8, 0);  // uid
  put_octal(b, 116, 8, 0);  // gid
  put_octal(b, 124, 12, size < kUstarMaxSize ? size : 0);
  put_octal(b, 136, 12, 0);  // mtime
  b[156] = static_cast<uint8_t>(typeflag);
  put_string(b, 257, 6, std::string_view("ustar\0", 6));
  put_string(b, 263, 2, "00");
  put_octal(b, 329, 8, 0);  // devmajor
  put_octal(b, 337, 8, 0);  // devminor
  put_string(b, 345, 155, name.prefix);
  // The checksum is the byte sum of the header with its own field read as spaces.
  std::memset(b.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (uint8_t c : b) sum += c;
  put_octal(b, 148, 7, sum);
  b[155] = ' ';
  return b;
}

// The name written in the ustar header of a member whose real name lives in a pax
// record: readers that ignore pax still get a plausible ASCII name.
std::string fallback_name(std::string_view name) {
  std::string out(name.substr(0, 99));
  for (char& c : out)
    if (static_cast<unsigned char>(c) >= 0x80) c = '_';
  return out;
}

}  // namespace

TarWriter::TarWriter(std::string path) : file_(std::move(path)) {}

TarWriter::TarWriter(std::string path, uint64_t size, uint32_t crc) : crc_(crc) {
  if (size % kBlock != 0)
    throw FatalError("cannot resume '" + path + "' at byte " + std::to_string(size) +
                     ": not a tar block boundary");
  file_.reopen_at(path, size);
  // The bytes kept (the file is cut back to `size`) are this run's own only if they are the
  // ones the checkpoint covered.
  const uint32_t got = file_crc32(path);
  if (got != crc)
    throw FatalError("cannot resume writing '" + path + "': its first " + std::to_string(size) +
                     " bytes have CRC-32 " + crc32_hex(got) + ", not " + crc32_hex(crc) +
                     " as its checkpoint recorded: it changed after the run was interrupted; run "
                     "again with --overwrite to start over");
}

uint64_t TarWriter::bytes_if_added(std::string_view member_name, uint64_t data_size) const {
  const std::string pax = pax_records(member_name, data_size);
  const uint64_t pax_bytes = pax.empty() ? 0 : kBlock + padded(pax.size());
  return pax_bytes + kBlock + padded(data_size);
}

uint64_t TarWriter::add(std::string_view member_name, std::span<const uint8_t> data) {
  if (member_name.empty()) throw InternalError("tar member name is empty");
  if (member_name.find('\0') != std::string_view::npos)
    throw InternalError("tar member name contains a NUL byte");
  if (member_name.back() == '/')
    throw InternalError("tar member name '" + std::string(member_name) +
                        "' ends with '/', which readers take for a directory");

  const std::string pax = pax_records(member_name, data.size());
  std::vector<uint8_t> head;
  head.reserve(kBlock * 3 + pax.size());
  const std::optional<UstarName> ustar = split_ustar_name(member_name);
  std::string fallback;
  if (!pax.empty()) {
    const Block pax_header = make_header({{}, kPaxHeaderName}, pax.size(), 'x');
    head.insert(head.end(), pax_header.begin(), pax_header.end());
    head.insert(head.end(), pax.begin(), pax.end());
    head.resize(padded(head.size()), 0);
    if (!ustar) fallback = fallback_name(member_name);
  }
  const Block header = make_header(ustar ? *ustar : UstarName{{}, fallback}, data.size(), '0');
  head.insert(head.end(), header.begin(), header.end());
  write(head);

  const uint64_t data_offset = file_.position();
  write(data);
  static constexpr Block kZeros{};
  const size_t pad = static_cast<size_t>(padded(data.size()) - data.size());
  write(std::span<const uint8_t>(kZeros.data(), pad));
  return data_offset;
}

void TarWriter::write(std::span<const uint8_t> bytes) {
  file_.write_all(bytes);
  crc_ = crc32_update(crc_, bytes.data(), bytes.size());
}

void TarWriter::finish() {
  static constexpr std::array<uint8_t, 2 * kBlock> kEnd{};
  write(kEnd);
  file_.sync();
  file_.close();
}

}  // namespace tarmac
