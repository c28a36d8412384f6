#pragma once
// Writing objects to S3 (`convert -o s3://`): PUTs of local files (multipart above a part size),
// small objects, deletes, and a conditional PUT for the lock object. Each request is signed
// with AWS signature version 4 by libcurl; a 5xx, a SlowDown or a dropped connection is retried
// with backoff, a part re-sent from the local file. A background ObjectUploader takes the
// files of a run one by one as they complete.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "common/stop.h"
#include "remote/remote_config.h"

namespace tarmac::remote {

/// The default size of a multipart upload's parts, and the size from which a file is sent in
/// parts (--multipart-size).
inline constexpr uint64_t kDefaultPartSize = 64ull << 20;
/// S3 refuses parts under 5 MiB (but the last).
inline constexpr uint64_t kMinPartSize = 5ull << 20;
/// S3 allows at most 10 000 parts per object.
inline constexpr uint64_t kMaxParts = 10000;
/// The user metadata an uploaded file's CRC-32 (8 hex digits) is stored under, so that a
/// resumed run can check an object by HEAD alone (x-amz-meta-tarmac-crc32).
inline constexpr const char* kCrcMetadata = "tarmac-crc32";

/// An s3:// destination: "s3://bucket/prefix/" or "s3://bucket/prefix" (also a prefix: the
/// objects are PREFIX/NAME), or "s3://bucket" (the bucket's top).
struct S3Prefix {
  std::string bucket;
  std::string prefix;  ///< "" or ending with '/'
  /// "s3://bucket/prefix/NAME".
  std::string url(std::string_view name) const;
};

/// Parses a destination; throws ParseError naming what is wrong.
S3Prefix parse_s3_prefix(const std::string& url);

/// What a HEAD found.
struct ObjectInfo {
  bool exists = false;
  uint64_t size = 0;
  std::string etag;   ///< as the server quoted it
  std::string crc32;  ///< the kCrcMetadata metadata, "" when absent
};

/// Counts of one run's uploads of files (put_file), for the summary and the tests.
struct UploadCounts {
  std::atomic<uint64_t> objects{0};    ///< objects written (PUT or completed multipart)
  std::atomic<uint64_t> multipart{0};  ///< of which multipart
  std::atomic<uint64_t> parts{0};      ///< parts sent (first tries)
  std::atomic<uint64_t> retries{0};    ///< requests sent again after a failure
  std::atomic<uint64_t> bytes{0};      ///< bytes of the objects written
  std::atomic<uint64_t> skipped{0};    ///< already complete on the server (a resumed run)
};

/// A request abandoned because a stop was requested (or cancel() called): the run's stop, not a
/// write error, whichever thread saw the request first (the caller reports the signal).
class TransferStopped : public RemoteError {
 public:
  explicit TransferStopped(const std::string& name)
      : RemoteError("cannot write '" + name + "': stopped") {}
};

/// The requests. Safe to use from several threads at once (each request its own handle).
class S3Client {
 public:
  /// `stop` (may be null) is polled in every wait: a transfer in flight is abandoned within a
  /// fraction of a second of a stop request, with TransferStopped.
  S3Client(RemoteConfig config, const StopRequest* stop);

  const RemoteConfig& config() const { return config_; }
  UploadCounts& counts() { return counts_; }

  /// HEAD of an object: exists false for 404 NoSuchKey. Throws RemoteError (one line naming
  /// the URL, the server's code and what to do) for anything else, e.g. a missing bucket.
  ObjectInfo head(const std::string& url);
  /// The bytes of a small object (at most `limit`); nullopt for 404. Throws RemoteError.
  std::optional<std::string> get(const std::string& url, size_t limit = 16 << 20);
  /// PUT of `data`, `crc32` (8 hex digits, may be empty) as its metadata. Throws RemoteError.
  void put(const std::string& url, std::string_view data, const std::string& crc32);
  /// Uploads the local file `path` to `url`: one PUT up to `part_size` bytes, else a multipart
  /// upload of parts of `part_size` (aborted when it fails). Throws RemoteError, FatalError
  /// when the file cannot be read.
  void put_file(const std::string& url, const std::string& path, const std::string& crc32,
                uint64_t part_size);
  /// DELETE; a missing object is fine. Throws RemoteError.
  void remove(const std::string& url);
  /// Abandons every request in flight and to come (TransferStopped): for a run that
  /// failed elsewhere.
  void cancel() { cancelled_.store(true); }
  /// True once a stop was requested or cancel() called.
  bool stopping() const;

  enum class Created { Yes, Exists, Unsupported };
  /// PUT with If-None-Match: * : Yes when made, Exists when an object has the name (412 or
  /// 409), Unsupported when the server does not do conditional PUTs (501 NotImplemented, as
  /// OpenStack Swift's s3api answers). Throws RemoteError otherwise.
  Created create_if_absent(const std::string& url, std::string_view data);

  struct Request;
  struct Response;

 private:
  Response send(const Request& r);
  [[noreturn]] void fail(const Request& r, const Response& resp);

  RemoteConfig config_;
  const StopRequest* stop_;
  std::atomic<bool> cancelled_{false};
  UploadCounts counts_;
};

/// Uploads files in a background thread, in the order given, so that the caller goes on
/// working meanwhile. At most `max_pending` files wait (push() blocks beyond that), which
/// bounds the local disk a run holds: the caller deletes a file once `on_done` reports it.
class ObjectUploader {
 public:
  struct Job {
    std::string path;  ///< the local file
    std::string url;   ///< s3://bucket/key
    std::string crc32;
  };
  /// `on_done(job)` runs on the upload thread after each object is confirmed.
  ObjectUploader(S3Client& client, uint64_t part_size, size_t max_pending,
                 std::function<void(const Job&)> on_done);
  /// Stops the thread (a transfer in flight is abandoned) and joins it.
  ~ObjectUploader();
  ObjectUploader(const ObjectUploader&) = delete;
  ObjectUploader& operator=(const ObjectUploader&) = delete;

  /// Queues a file; blocks while `max_pending` wait, asking `keep_waiting` every 100 ms: false
  /// gives up (returns false, nothing queued), as does an upload a stop abandoned (the caller
  /// stops: no write failed). Rethrows the upload thread's failure otherwise.
  bool push(Job job, const std::function<bool()>& keep_waiting);
  /// Waits until every queued file is uploaded, calling `wait_tick` as push() does; rethrows
  /// the upload thread's failure.
  void drain(const std::function<void()>& wait_tick);
  /// Rethrows the upload thread's failure, if any.
  void check() const;

 private:
  void run();

  S3Client& client_;
  uint64_t part_size_;
  size_t max_pending_;
  std::function<void(const Job&)> on_done_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool busy_ = false, quit_ = false;
  std::exception_ptr failure_;
  std::thread thread_;
};

}  // namespace tarmac::remote
