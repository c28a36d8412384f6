#pragma once
// The dataset a command (verify, info, ls, cat) names: a local folder, or a prefix in object
// storage (s3://bucket/prefix/, http(s)://host/path/) whose small files (manifest.json,
// labels.safetensors, shardlist.json, merged columns) are downloaded into a temporary folder,
// so that the code that checks and prints a local dataset reads them unchanged. Its shards are
// read where they are: by a Range GET (cat), or downloaded one at a time (verify).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/manifest.h"
#include "read/dataset_summary.h"
#include "remote/remote_config.h"

namespace tarmac::check {

class DatasetSource {
 public:
  /// A local folder is taken as it is. A remote prefix has its small files downloaded now
  /// (credentials and endpoint from the environment); throws RemoteError when it has no
  /// manifest.json ("not a complete dataset", http_status() 404) or the server refuses.
  explicit DatasetSource(const std::string& name);
  ~DatasetSource();
  DatasetSource(const DatasetSource&) = delete;
  DatasetSource& operator=(const DatasetSource&) = delete;

  bool remote() const { return remote_; }
  /// The name as given (a remote prefix: with a trailing '/').
  const std::string& name() const { return name_; }
  /// The local folder that holds the dataset's files (a remote one's small files).
  const std::string& dir() const { return dir_; }
  /// The remote dataset's manifest (nullopt for a local folder).
  const std::optional<format::Manifest>& manifest() const { return manifest_; }
  const remote::RemoteConfig& config() const { return config_; }
  /// Where `file` of the dataset is: DIR/file, or the prefix's URL + file.
  std::string location(const std::string& file) const;

  /// Bytes [offset, offset + size) of `file` (pread, or one Range GET). Throws FatalError (a
  /// RemoteError for a remote one) naming the file when they cannot all be read.
  std::vector<uint8_t> read_range(const std::string& file, uint64_t offset, uint64_t size) const;

  /// Puts a copy of the remote `file` at DIR/file (downloaded whole, once, without checks);
  /// returns the bytes downloaded. Throws RemoteError. For a local folder, does nothing.
  uint64_t download(const std::string& file) const;
  /// Removes what download() put there.
  void discard(const std::string& file) const;

 private:
  std::string name_, dir_;
  std::string dir_root_;  // the temporary folder a remote dataset's files are in
  bool remote_ = false;
  std::optional<format::Manifest> manifest_;
  remote::RemoteConfig config_;
};

/// `info`'s summary of the dataset: summarize_dataset() of its folder; a remote one's path is
/// its URL and its shards' sizes are the manifest's (the shards are not downloaded).
DatasetSummary summarize_source(const DatasetSource& src, bool image_sizes);

}  // namespace tarmac::check
