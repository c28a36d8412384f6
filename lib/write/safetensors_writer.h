#pragma once
// Streams a safetensors file whose tensors are produced piecewise by callbacks, so
// no tensor needs to be held in memory. The layout is the contract with read/
// (docs/format.md): u64 LE header length N, N bytes of JSON, then the data buffer.
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace tarmac {

/// Receives a tensor's bytes from its fill callback, in order, in any number of pieces.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  /// Appends `bytes` (only read during the call); throws what the writer throws.
  virtual void write(std::span<const uint8_t> bytes) = 0;
};

/// One tensor to write: `fill` must write exactly product(shape) * dtype_size(dtype)
/// bytes (little-endian, row-major) to the sink it is given.
struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::function<void(ByteSink&)> fill;
};

/// Writes `tensors` and `metadata` to `path` (created or truncated, written directly,
/// fsynced and closed). The header lists "__metadata__" first, then the tensors in data
/// order: element size descending, then name; the data buffer starts at a multiple of 8 so
/// each tensor is aligned to its element size. Throws FatalError on I/O failure,
/// InternalError for bad specs (duplicate/reserved names, negative dims, invalid
/// UTF-8, size overflow) and InternalError naming the tensor when a fill writes a
/// wrong number of bytes.
void write_safetensors(const std::string& path, std::vector<TensorSpec> tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace tarmac
