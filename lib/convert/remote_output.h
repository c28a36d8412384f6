#pragma once
// convert -o s3://bucket/prefix/: the run stages in a local checkpoint folder as a local run
// does; each shard is uploaded in the background once a checkpoint covers it, and its local
// copy deleted once the upload is confirmed; at the end labels.safetensors, shardlist.json and
// manifest.json go last, so that a reader finding the manifest finds a complete dataset. One
// writer per prefix: a lock object PREFIX.tarmac-lock made by a conditional PUT.
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/dataset_writer.h"
#include "format/checkpoint.h"
#include "format/names.h"
#include "remote/upload.h"

namespace tarmac {

/// The lock object's name under the prefix.
inline constexpr const char* kRemoteLockObject = format::kLockFile;
/// The record of the uploads confirmed, in the staging directory (with the run's id).
using format::kUploadRecordFile;  // format/names.h

/// The objects under `destination` that the staging folder's upload record (and the
/// checkpoint beside it) says an interrupted run wrote or was writing; empty when there is no
/// record, it is unreadable, or it is another prefix's.
std::vector<std::string> recorded_objects(const std::filesystem::path& staging,
                                          const std::string& destination);

/// What -o s3:// needs of the run: the server, the upload and lock policy, what it may replace
/// (--overwrite, --resume), the command line (recorded in the lock object) and the stop.
struct RemoteOutputSpec {
  std::string endpoint_url;  ///< --endpoint-url (empty: AWS_ENDPOINT_URL, else AWS's own)
  RemoteOutputOptions options;
  bool overwrite = false;
  bool resume = false;
  std::vector<std::string> command_line;
  const StopRequest* stop = nullptr;  ///< null: never stops early
};

class RemoteOutput {
 public:
  /// For `destination` (s3://), staging in `staging` (which exists). Throws ParseError for a
  /// malformed destination, RemoteError without credentials.
  RemoteOutput(RemoteOutputSpec spec, const std::string& destination,
               std::filesystem::path staging);
  /// Releases the lock object (when taken) and stops the uploads in flight.
  ~RemoteOutput();
  RemoteOutput(const RemoteOutput&) = delete;
  RemoteOutput& operator=(const RemoteOutput&) = delete;

  /// Before anything is written: takes the lock object; refuses a prefix that holds a dataset
  /// (its manifest.json) unless --overwrite (which removes that dataset's objects, as its
  /// manifest lists them, manifest first) or --resume (the dataset is then this run's, finished:
  /// returns true, nothing to do). An object under the prefix that neither the old manifest
  /// nor `recorded` (recorded_objects(), read before the staging folder was cleared) names is
  /// the user's: refused without --overwrite or --resume, never replaced or removed, and
  /// refused even then when a dataset file may be written under its name. Throws FatalError or
  /// RemoteError (one line).
  bool begin(const std::vector<std::string>& recorded);

  /// --resume: the closed shards of the checkpoint `writer` (its "writer" object) already on
  /// the server, checked by HEAD (size and CRC-32): recorded as uploaded, their local copies
  /// deleted. Returns their names (check_resumable does not look for their local files).
  /// Throws FatalError when an upload recorded is no longer on the server as it was sent.
  std::vector<std::string> check_uploaded(const format::CheckpointWriter& writer);

  /// The destination's manifest.json as it is on the server (at most 1 GiB); nullopt when
  /// there is none. For the comparison of a --resume that begin() found complete.
  std::optional<std::string> manifest_text();

  /// Starts the background uploads, of the shards `writer` closes from now on (and of those a
  /// resumed checkpoint left local).
  void start(const DatasetWriter& writer);
  /// After each checkpoint: queues the shards it covers. Waits while the queue is full (disk
  /// use bounded), not past a stop request. Rethrows a failed upload.
  void queue_closed(const DatasetWriter& writer);
  /// Rethrows a failed upload (RemoteError), if any.
  void check() const;

  /// The end of a run: every shard uploaded, then labels.safetensors, shardlist.json (when
  /// there) and manifest.json from `staging`; the lock released. `wait_tick` is called while
  /// waiting (it throws to stop). Throws RemoteError.
  void publish(const DatasetWriter& writer, const std::function<void()>& wait_tick);

  /// What was uploaded, into `r`.
  void count(ConvertResult& r) const;

 private:
  void record_uploaded(const std::string& name, uint64_t size, const std::string& crc32);
  /// True when `name` was uploaded (recorded) with this size and CRC-32.
  bool already_sent(const std::string& name, uint64_t size, const std::string& crc32);
  void save_record();
  void refuse_foreign_objects(const std::set<std::string>& owned);

  const RemoteOutputSpec spec_;
  remote::S3Prefix dest_;
  std::filesystem::path staging_;
  std::unique_ptr<remote::S3Client> client_;
  std::unique_ptr<remote::ObjectUploader> uploader_;
  std::string run_id_;
  bool locked_ = false;
  bool resumed_ = false;
  bool finishing_ = false;  // the last uploads (labels, shard list, manifest) begun
  size_t queued_ = 0;       // shards handed to the uploader (or found uploaded)
  mutable std::mutex mu_;
  std::map<std::string, std::pair<uint64_t, std::string>> uploaded_;  // name: size, crc32
  std::set<std::string> keep_local_;  // shards no checkpoint covers closed: kept after upload
};

}  // namespace tarmac
