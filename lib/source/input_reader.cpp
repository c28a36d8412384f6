#include "source/input_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>

#include "common/bytes.h"
#include "common/crc32.h"
#include "common/error.h"
#include "common/printable.h"
#include "remote/inputs.h"
#include "remote/url.h"
#include "source/input_reader_internal.h"

namespace tarmac {
namespace fs = std::filesystem;

namespace {

constexpr size_t kZipEndRecord = 22;       // the end-of-central-directory record, no comment
constexpr size_t kZipMaxComment = 0xffff;  // its comment's length is 16 bits
constexpr size_t kTailBytes = kZipEndRecord + kZipMaxComment;

void keep_tail(std::vector<uint8_t>& tail, const uint8_t* p, size_t n) {
  if (n >= kTailBytes) {
    tail.assign(p + n - kTailBytes, p + n);
    return;
  }
  if (tail.size() + n > kTailBytes)
    tail.erase(tail.begin(), tail.begin() + static_cast<ptrdiff_t>(tail.size() + n - kTailBytes));
  tail.insert(tail.end(), p, p + n);
}

}  // namespace

namespace detail {

bool ends_with_zip_end(const std::vector<uint8_t>& tail) {
  if (tail.size() < kZipEndRecord) return false;
  for (size_t at = tail.size() - kZipEndRecord + 1; at-- > 0;) {
    const uint8_t* p = tail.data() + at;
    if (p[0] == 'P' && p[1] == 'K' && p[2] == 5 && p[3] == 6 &&
        at + kZipEndRecord + (p[20] | (p[21] << 8)) <= tail.size())
      return true;
  }
  return false;
}

ssize_t read_raw(FdSource* src, size_t at) {
  uint8_t* const into = src->buffer.data() + at;
  const size_t room = src->buffer.size() - at;
  ssize_t n;
  if (src->stream || src->pipe) {
    // A whole block unless the stream ends, as a file gives: where samples are released (the
    // checkpoint's read positions) must not depend on how the bytes arrived, or a --resume
    // would find a sample after the checkpoint released before its recorded position.
    size_t got = 0;
    try {
      if (!src->stream_error.empty()) throw FatalError(src->stream_error);
      while (got < room) {
        uint8_t* to = into + got;
        const size_t want = room - got;
        const size_t r = src->stream ? src->stream->read(to, want) : src->pipe->read(to, want);
        if (r == 0) break;
        got += r;
      }
    } catch (const std::exception& e) {  // libarchive's callbacks are C: nothing thrown through
      if (got == 0) {
        src->read_error = e.what();
        src->remote_failed = true;
        return -1;
      }
      src->stream_error = e.what();  // the bytes read first are handed on
    }
    n = static_cast<ssize_t>(got);
  } else {
    do {
      n = ::read(src->fd, into, room);
    } while (n < 0 && errno == EINTR);
  }
  if (n < 0) {
    src->read_error = std::strerror(errno);
    return -1;
  }
  if (src->check_at != kNoCheck &&
      src->info->bytes_read + static_cast<uint64_t>(n) >= src->check_at) {
    const auto part = static_cast<size_t>(src->check_at - src->info->bytes_read);
    if (crc32_update(src->info->crc32, into, part) != src->check_crc) {
      src->changed = true;
      src->read_error = "the input changed since the checkpoint";
      return -1;
    }
    src->check_at = kNoCheck;
    src->expected->reset();
  }
  src->info->crc32 = crc32_update(src->info->crc32, into, static_cast<size_t>(n));
  if (!src->seekable) keep_tail(src->tail, into, static_cast<size_t>(n));
  src->info->bytes_read += static_cast<uint64_t>(n);
  src->total->fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  return n;
}

std::string normalise(const std::string& name) {
  std::string out;
  out.reserve(name.size());
  if (!name.empty() && name.front() == '/') out = "/";
  size_t start = 0;
  while (start < name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string_view part(name.data() + start, end - start);
    if (!part.empty() && part != ".") {
      if (!out.empty() && out.back() != '/') out += '/';
      out += part;
    }
    start = end + 1;
  }
  return out;
}

MemberNotice bad_name_notice(uint32_t input, std::string_view name) {
  return {input, printable(name), "member name is not valid UTF-8", true, ErrorCode::BadMemberName};
}

}  // namespace detail

InputReader::InputReader(const std::vector<std::string>& paths, InputReaderOptions options)
    : options_(std::move(options)) {
  for (auto& p : paths) {
    InputInfo info;
    info.path = p;
    if (remote::is_remote(p)) {
      info.size = remote::known_size(p).value_or(0);
    } else if (is_pipe(p)) {
      pipe_command(p);  // names a command
    } else if (p != "-") {
      struct stat st {};
      if (::stat(p.c_str(), &st) != 0)
        throw FatalError("cannot open input '" + p + "': " + std::strerror(errno));
      if (S_ISREG(st.st_mode)) info.size = static_cast<uint64_t>(st.st_size);
    }
    inputs_.push_back(std::move(info));
  }
}

uint64_t InputReader::total_size() const {
  uint64_t total = 0;
  for (const auto& i : inputs_) {
    if (i.path == "-" || is_pipe(i.path) ||
        (i.size == 0 && (remote::is_remote(i.path) || !fs::is_regular_file(i.path))))
      return 0;
    total += i.size;
  }
  return total;
}

void InputReader::expect(ReadExpectation e) {
  if (e.mark.input >= inputs_.size() || e.done.size() != e.mark.input)
    throw FatalError("cannot resume: the checkpoint records a position in input " +
                     std::to_string(e.mark.input + 1) + " of " + std::to_string(inputs_.size()) +
                     "; run again with --overwrite to start again");
  expected_ = std::move(e);
}

ReadMark InputReader::mark() const {
  if (inputs_.empty()) return {};
  const InputInfo& info = inputs_[current_];
  return {current_, info.bytes_read, info.crc32, at_end_};
}

void InputReader::refuse_changed(uint32_t index) const {
  if (is_pipe(inputs_[index].path))
    throw InputChanged("cannot resume: input '" + printable(inputs_[index].path) +
                       "' changed since the checkpoint: the command wrote other bytes than it "
                       "wrote for the interrupted run, so the samples converted from it may not "
                       "match it. Run the same command with --overwrite to convert everything "
                       "again");
  throw InputChanged(
      "cannot resume: input '" + inputs_[index].path +
      "' changed since the checkpoint: its bytes differ from those the interrupted run read, "
      "though its size and modification time are the same (a file rewritten in place, e.g. by "
      "rsync -a, tar -x or cp -p, keeps both), so the samples converted from it may hold its "
      "old data. Run the same command with --overwrite to convert everything again");
}

// Resuming: an input read to its end must have read as before, up to where the checkpoint's
// position lies.
void InputReader::check_input_end(uint32_t index) {
  if (!expected_) return;
  const ReadMark& m = expected_->mark;
  const InputInfo& info = inputs_[index];
  if (index < m.input) {
    if (expected_->done[index] != std::pair(info.bytes_read, info.crc32)) refuse_changed(index);
  } else if (index == m.input) {
    // A position inside the input was checked as it was read past; one not reached, or an end
    // that differs, is a change.
    if (!m.at_end || info.bytes_read != m.bytes || info.crc32 != m.crc32) refuse_changed(index);
    expected_.reset();
  }
}

void InputReader::run(const InputCallbacks& cb) {
  for (uint32_t i = 0; i < inputs_.size(); ++i) {
    current_ = i;
    at_end_ = false;
    if (expected_ && expected_->mark.input == i && !expected_->mark.at_end &&
        expected_->mark.bytes == 0) {
      if (expected_->mark.crc32 != 0) refuse_changed(i);
      expected_.reset();
    }
    const auto& path = inputs_[i].path;
    if (path != "-" && !remote::is_remote(path) && !is_pipe(path) && fs::is_directory(path))
      read_directory(i, cb);
    else
      read_archive(i, cb);
    check_input_end(i);
    at_end_ = true;
    cb.on_input_end(i);
  }
}

void InputReader::run_names_only(const InputCallbacks& cb) {
  names_only_ = true;
  try {
    run(cb);
  } catch (...) {
    names_only_ = false;
    throw;
  }
  names_only_ = false;
}

// A regular member's name and declared size: true when it may be read, else a notice says why.
bool InputReader::admit(uint32_t index, const InputCallbacks& cb, const std::string& name,
                        uint64_t size, bool size_known) {
  if (auto why = unsafe_name_reason(name); !why.empty()) {
    cb.on_notice(
        {index, name, "unsafe member name (" + why + ")", true, ErrorCode::UnsafeMemberName});
    return false;
  }
  if (size_known && size > options_.max_member_size) {
    cb.on_notice({index, name,
                  "member is " + format_bytes(size) + ", over --max-member-size " +
                      format_bytes(options_.max_member_size),
                  true, ErrorCode::MemberTooLarge});
    return false;
  }
  return true;
}

}  // namespace tarmac
