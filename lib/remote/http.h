#pragma once
// HTTP through libcurl for remote inputs: small requests (HEAD, listings) and the stream an
// object is read through, signed with AWS signature version 4 (libcurl's CURLOPT_AWS_SIGV4)
// for s3:// names. A dropped connection, a 5xx or a SlowDown is retried with backoff, and a
// stream resumes with a Range request from the byte it reached.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/stop.h"
#include "remote/remote_config.h"

namespace tarmac::remote {

/// What is requested, and how: `name` as the user wrote it (messages), `url` the HTTP URL.
struct Target {
  std::string name;
  std::string url;
  bool sign = false;  ///< s3://: signed with the configuration's credentials
};

/// The HTTP target of an s3:// or http(s):// name (s3: path-style, on the configured
/// endpoint). Throws RemoteError for s3:// without credentials, ParseError for a bad name.
Target target_for(const std::string& name, const RemoteConfig& config);

struct Response {
  long status = 0;
  std::string body;  ///< at most the limit asked for
  std::optional<uint64_t> content_length;
  std::string etag;
  uint32_t retries = 0;  ///< failed tries sent again before this answer
};

/// One request, retried as a stream is; a status >= 300 that is not retried ends it with
/// RemoteError (its one line names the target, the server's error code and what to do).
/// `query` ("a=1&b=2", sorted by name, values percent-encoded) is appended to the URL;
/// `range` ("START-END", inclusive) asks for those bytes alone; a server that answers it with
/// more than `body_limit` bytes of HTTP 200 (the whole object: it serves no ranges) ends it
/// with RemoteError whose http_status() is 200. `stop`, if any, is polled while the request
/// and its backoff wait: RemoteError ("stopped") once it is requested.
Response request(const Target& target, const RemoteConfig& config, bool head,
                 const std::string& query = "", size_t body_limit = 64 << 20,
                 const std::string& range = "", const StopRequest* stop = nullptr);

/// Size (and ETag) of an object, by HEAD; RemoteError when it cannot be read (an http(s)
/// URL that refuses HEAD, 403 or 405, is answered as it is: its GET may still succeed).
Response head_object(const Target& target, const RemoteConfig& config);

/// The S3 error code in an error response's XML body (<Code>NoSuchKey</Code>), or "".
std::string s3_error_code(const std::string& body);

/// Counts of one stream's retries.
struct TransferCounts {
  uint32_t retries = 0;        ///< failed requests retried
  uint64_t resumed_bytes = 0;  ///< bytes not fetched again: the offsets retries resumed from
};

/// An object read front to back, with at most a few MiB buffered (the transfer pauses while
/// the reader is behind). Single-threaded; the stop request, if any, is polled while waiting.
class HttpStream {
 public:
  HttpStream(Target target, const RemoteConfig& config, const StopRequest* stop = nullptr);
  ~HttpStream();
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;

  /// Up to `size` next bytes into `out`; 0 at the object's end. Throws RemoteError when the
  /// object cannot be read on (after the retries), or when a stop was requested.
  size_t read(uint8_t* out, size_t size);
  /// The size the object's listing or HEAD declared: an answer that says another, or a body
  /// that ends short of it, is a RemoteError (the object changed, or the transfer was cut)
  /// rather than the end of the object. Call before the first read().
  void expect_size(uint64_t size);
  /// The object's size, once the first response (or expect_size()) said it.
  std::optional<uint64_t> size() const;
  const TransferCounts& counts() const;
  const std::string& name() const;
  /// The object's ETag, once the first response said it ("" when it said none).
  const std::string& etag() const;

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace tarmac::remote
