// InputReader's reader of a folder: its regular files in name order, each a member; links,
// FIFOs, devices and folders holding a tarmac dataset listed, never read.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "common/crc32.h"
#include "common/error.h"
#include "common/utf8.h"
#include "source/input_reader_internal.h"

namespace tarmac {
namespace fs = std::filesystem;
using detail::bad_name_notice;

bool InputReader::excluded(const fs::path& dir) const {
  std::error_code ec;
  for (const auto& x : options_.exclude)
    if (fs::equivalent(dir, x, ec)) return true;
  return false;
}

void InputReader::read_directory(uint32_t index, const InputCallbacks& cb) {
  InputInfo& info = inputs_[index];
  const fs::path root(info.path);
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const auto& e = *it;
    if (e.is_symlink()) {
      // relative() would follow the link itself: make only its directory relative.
      const fs::path rel = fs::relative(e.path().parent_path(), root) / e.path().filename();
      std::string name = rel.lexically_normal().generic_string();
      // as in an archive, the name is checked first: a notice's name goes into the manifest
      if (!is_valid_utf8(name))
        cb.on_notice(bad_name_notice(index, name));
      else
        cb.on_notice({index, name, "symbolic link, not followed", false, ErrorCode::Link});
      continue;
    }
    if (e.is_directory() && excluded(e.path())) {
      it.disable_recursion_pending();
      continue;
    }
    if (e.is_directory() && options_.dataset_in_folder) {
      if (std::string why = options_.dataset_in_folder(e.path()); !why.empty()) {
        it.disable_recursion_pending();
        std::string name = fs::relative(e.path(), root).generic_string() + "/";
        if (!is_valid_utf8(name))
          cb.on_notice(bad_name_notice(index, name));
        else
          cb.on_notice({index, name, why, false, ErrorCode::TarmacDataset});
        continue;
      }
    }
    if (e.is_regular_file()) {
      files.push_back(e.path());
    } else if (!e.is_directory()) {
      // a FIFO, socket or device: listed as a tar's is, never left out unsaid
      std::string name = fs::relative(e.path(), root).generic_string();
      if (!is_valid_utf8(name))
        cb.on_notice(bad_name_notice(index, name));
      else
        cb.on_notice({index, name, "not a regular file", false, ErrorCode::NotRegularFile});
    }
  }
  if (ec) throw FatalError("cannot list directory '" + info.path + "': " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::string name = fs::relative(f, root).generic_string();
    ++info.members;
    // a file's name is a member name, held to the rule of tar and zip members
    if (!is_valid_utf8(name)) {
      cb.on_notice(bad_name_notice(index, name));
      continue;
    }
    uint64_t size = fs::file_size(f, ec);
    if (ec) throw FatalError("cannot read '" + f.string() + "': " + ec.message());
    info.size += size;
    if (size > options_.max_member_size) {
      cb.on_notice({index, name,
                    "file is " + format_bytes(size) + ", over --max-member-size " +
                        format_bytes(options_.max_member_size),
                    true, ErrorCode::MemberTooLarge});
      continue;
    }
    if (names_only_) {
      cb.on_member(index, Member{name, {}});
      continue;
    }
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw FatalError("cannot open '" + f.string() + "': " + std::strerror(errno));
    Member m;
    m.name = name;
    m.data.resize(size);
    size_t got = 0;
    while (got < size) {
      ssize_t n = ::read(fd, m.data.data() + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        throw FatalError("cannot read '" + f.string() +
                         "': " + (n < 0 ? std::strerror(errno) : "file shrank while reading"));
      }
      got += static_cast<size_t>(n);
    }
    ::close(fd);
    // Resuming: the position the checkpoint recorded is checked once it is read past.
    if (expected_ && expected_->mark.input == index && !expected_->mark.at_end &&
        info.bytes_read + size >= expected_->mark.bytes) {
      const auto part = static_cast<size_t>(expected_->mark.bytes - info.bytes_read);
      if (crc32_update(info.crc32, m.data.data(), part) != expected_->mark.crc32)
        refuse_changed(index);
      expected_.reset();
    }
    info.crc32 = crc32_update(info.crc32, m.data.data(), size);
    info.bytes_read += size;
    bytes_read_.fetch_add(size, std::memory_order_relaxed);
    cb.on_member(index, std::move(m));
  }
}

}  // namespace tarmac
