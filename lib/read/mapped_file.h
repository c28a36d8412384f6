#pragma once
// A whole file mapped read-only into memory.
#include <cstdint>
#include <span>
#include <string>

namespace tarmac {

/// Read-only mmap of a whole regular file, unmapped on destruction. Move-only.
class MappedFile {
 public:
  MappedFile() = default;
  /// Maps `path` (an empty file gives empty bytes()); throws FatalError with the path
  /// and strerror if it cannot be opened, is not a regular file, or cannot be mapped.
  explicit MappedFile(std::string path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  /// The file's bytes; valid while this MappedFile lives (and is not moved from).
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void unmap();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tarmac
