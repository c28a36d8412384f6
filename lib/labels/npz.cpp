#include "labels/npz.h"

#include <archive.h>
#include <archive_entry.h>

#include <memory>
#include <new>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/error.h"
#include "common/utf8.h"
#include "labels/npy.h"

namespace tarmac {
namespace {

using ArchivePtr = std::unique_ptr<archive, decltype(&archive_read_free)>;

std::string archive_reason(archive* a) {
  const char* s = archive_error_string(a);
  return s ? s : "unknown error";
}

}  // namespace

std::vector<NpzMember> read_npz_members(std::span<const uint8_t> bytes, uint64_t max_bytes,
                                        std::string_view limit_flag) {
  // "the limit of N bytes", then the flag that raises it when there is one.
  const std::string limit =
      "the limit of " + std::to_string(max_bytes) + " bytes" +
      (limit_flag.empty() ? std::string() : " (" + std::string(limit_flag) + ")");
  uint64_t total = 0;  // the entries' bytes so far: the limit holds for all of them together
  if (bytes.empty()) throw ParseError("the .npz file is empty");
  ArchivePtr a(archive_read_new(), archive_read_free);
  if (!a) throw std::bad_alloc();
  archive_read_support_format_zip(a.get());
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK)
    throw ParseError("the .npz file is not a readable zip archive: " + archive_reason(a.get()));

  std::vector<NpzMember> out;
  std::unordered_set<std::string> seen;
  std::vector<uint8_t> chunk(64 * 1024);
  for (;;) {
    archive_entry* entry = nullptr;
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN)
      throw ParseError("the .npz zip archive is damaged: " + archive_reason(a.get()));
    const char* raw_name = archive_entry_pathname_utf8(entry);
    if (!raw_name) raw_name = archive_entry_pathname(entry);
    if (!raw_name || !*raw_name) throw ParseError("the .npz holds an entry without a name");
    const std::string name = raw_name;
    if (!is_valid_utf8({reinterpret_cast<const uint8_t*>(name.data()), name.size()}))
      throw ParseError("the .npz holds an entry whose name is not valid UTF-8");
    if (name.size() <= 4 || !name.ends_with(".npy"))
      throw ParseError("the .npz holds '" + name + "', which is not a .npy array");
    if (archive_entry_filetype(entry) != AE_IFREG)
      throw ParseError("the .npz holds '" + name + "', which is not a regular file");
    if (!seen.insert(name).second) throw ParseError("the .npz holds '" + name + "' twice");
    if (archive_entry_size_is_set(entry) &&
        static_cast<uint64_t>(archive_entry_size(entry)) > max_bytes - total)
      throw ParseError("'" + name + "' in the .npz is " +
                       std::to_string(archive_entry_size(entry)) + " bytes uncompressed" +
                       (total ? " after " + std::to_string(total) + " in the entries before it"
                              : std::string()) +
                       ", more than " + limit);

    // The declared size may lie; count what inflation actually produces and stop at the limit.
    std::vector<uint8_t> data;
    for (;;) {
      const la_ssize_t n = archive_read_data(a.get(), chunk.data(), chunk.size());
      if (n == 0) break;
      if (n < 0)
        throw ParseError("'" + name + "' in the .npz cannot be read: " + archive_reason(a.get()));
      if (static_cast<uint64_t>(n) > max_bytes - total - data.size())
        throw ParseError("'" + name + "' in the .npz expands past " + limit +
                         (total ? " with the entries before it" : ""));
      data.insert(data.end(), chunk.begin(), chunk.begin() + n);
    }
    total += data.size();
    out.emplace_back(name.substr(0, name.size() - 4), std::move(data));
  }
  return out;
}

Fields parse_npz(std::span<const uint8_t> bytes, std::string_view prefix, uint64_t max_bytes,
                 std::string_view limit_flag) {
  Fields out;
  for (auto& [name, data] : read_npz_members(bytes, max_bytes, limit_flag)) {
    FieldValue value;
    try {
      value = parse_npy(data);
    } catch (const ParseError& e) {
      throw ParseError("'" + name + ".npy' in the .npz: " + e.what());
    }
    out.emplace_back(std::string(prefix) + name, std::move(value));
  }
  return out;
}

}  // namespace tarmac
