#include "write/safetensors_writer.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "common/error.h"
#include "format/json_object.h"
#include "write/file_util.h"

namespace tarmac {
namespace {

constexpr size_t kBufferSize = size_t{1} << 20;

// Buffers writes to an OutputFile and counts the bytes each tensor's fill produces.
class BufferedSink final : public ByteSink {
 public:
  explicit BufferedSink(OutputFile& file) : file_(file) { buffer_.reserve(kBufferSize); }

  void begin_tensor(const std::string& name, uint64_t expected) {
    name_ = &name;
    expected_ = expected;
    written_ = 0;
  }

  void write(std::span<const uint8_t> bytes) override {
    if (bytes.size() > expected_ - written_)
      throw InternalError("safetensors tensor '" + *name_ + "': fill wrote more than the " +
                          std::to_string(expected_) + " bytes its dtype and shape need");
    written_ += bytes.size();
    raw_write(bytes);
  }

  void end_tensor() const {
    if (written_ != expected_)
      throw InternalError("safetensors tensor '" + *name_ + "': fill wrote " +
                          std::to_string(written_) + " bytes, its dtype and shape need " +
                          std::to_string(expected_));
  }

  void raw_write(std::span<const uint8_t> bytes) {
    if (buffer_.size() + bytes.size() > kBufferSize) flush();
    if (bytes.size() >= kBufferSize) {
      file_.write_all(bytes);
    } else {
      buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
    }
  }

  void flush() {
    file_.write_all(buffer_);
    buffer_.clear();
  }

 private:
  OutputFile& file_;
  std::vector<uint8_t> buffer_;
  const std::string* name_ = nullptr;
  uint64_t expected_ = 0;
  uint64_t written_ = 0;
};

uint64_t byte_size(const TensorSpec& t) {
  uint64_t n = dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    if (d < 0)
      throw InternalError("safetensors tensor '" + t.name + "': negative dimension " +
                          std::to_string(d));
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
      throw InternalError("safetensors tensor '" + t.name + "': byte size overflows 64 bits");
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

}  // namespace

void write_safetensors(const std::string& path, std::vector<TensorSpec> tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::sort(tensors.begin(), tensors.end(), [](const TensorSpec& a, const TensorSpec& b) {
    const size_t sa = dtype_size(a.dtype), sb = dtype_size(b.dtype);
    if (sa != sb) return sa > sb;
    return a.name < b.name;
  });

  std::set<std::string_view> names;
  std::vector<uint64_t> sizes;
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    if (t.name == "__metadata__")
      throw InternalError("safetensors tensor name '__metadata__' is reserved");
    if (!names.insert(t.name).second)
      throw InternalError("safetensors tensor '" + t.name + "' is given twice");
    if (!t.fill) throw InternalError("safetensors tensor '" + t.name + "' has no fill");
    const uint64_t size = byte_size(t);
    if (size > std::numeric_limits<uint64_t>::max() - offset)
      throw InternalError("safetensors data buffer size overflows 64 bits");
    sizes.push_back(size);
    format::append_new_key(header, t.name,
                           {{"dtype", dtype_name(t.dtype)},
                            {"shape", t.shape},
                            {"data_offsets", {offset, offset + size}}});
    offset += size;
  }

  std::string json;
  try {
    json = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw InternalError(std::string("safetensors header is not valid UTF-8: ") + e.what());
  }
  // Pad with spaces so the data buffer, and with it every tensor, starts 8-aligned.
  json.append((8 - json.size() % 8) % 8, ' ');

  OutputFile file(path);
  BufferedSink sink(file);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(json.size() >> (8 * i));
  sink.raw_write(length);
  sink.raw_write({reinterpret_cast<const uint8_t*>(json.data()), json.size()});
  for (size_t i = 0; i < tensors.size(); ++i) {
    sink.begin_tensor(tensors[i].name, sizes[i]);
    tensors[i].fill(sink);
    sink.end_tensor();
  }
  sink.flush();
  file.sync();
  file.close();
}

}  // namespace tarmac
