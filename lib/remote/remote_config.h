#pragma once
// Where remote inputs live and as whom they are read: the endpoint, the region and the
// credentials, found the way the AWS CLI finds them, and how failed transfers are retried.
#include <string>

#include "common/error.h"

namespace tarmac::remote {

/// A remote input could not be listed or read (after the retries); the message is one line
/// naming the URL, the server's error code and what to do.
class RemoteError : public FatalError {
 public:
  explicit RemoteError(const std::string& what, long http_status = 0)
      : FatalError(what), status_(http_status) {}
  /// The HTTP status the server refused with (404: no such object); 0 when it did not answer.
  long http_status() const { return status_; }

 private:
  long status_ = 0;
};

struct RetryPolicy {
  /// Failed requests in a row, with no byte received between them, before giving up.
  int max_attempts = 8;
  double first_backoff_s = 0.2;  ///< doubled after each failure in a row
  double max_backoff_s = 10;
  /// A transfer slower than 1 byte/s for this long counts as a dropped connection.
  long stall_timeout_s = 30;
  long connect_timeout_s = 10;
};

struct RemoteConfig {
  /// Where s3:// URLs go, e.g. "http://127.0.0.1:9000"; buckets are addressed by path
  /// (endpoint/bucket/key). Empty: AWS itself, https://s3.REGION.amazonaws.com.
  std::string endpoint_url;
  std::string region = "us-east-1";
  std::string access_key, secret_key, session_token;
  /// Where the credentials came from, for messages ("environment", "profile 'x' of PATH");
  /// empty when none were found (s3:// inputs are then refused).
  std::string credentials_from;
  /// A PEM file of the certificate authorities that HTTPS servers are checked against instead of
  /// the system's (an S3-compatible service with a private CA); empty: the system's.
  std::string ca_bundle;
  RetryPolicy retry;

  /// The endpoint s3:// URLs go to (endpoint_url, or AWS's for the region), without a
  /// trailing '/'.
  std::string s3_endpoint() const;

  /// As the AWS CLI reads them: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN,
  /// else the profile AWS_PROFILE (or "default") of AWS_SHARED_CREDENTIALS_FILE
  /// (~/.aws/credentials); AWS_REGION or AWS_DEFAULT_REGION, else the profile's region in
  /// AWS_CONFIG_FILE (~/.aws/config); `endpoint_url` (--endpoint-url) or AWS_ENDPOINT_URL_S3
  /// or AWS_ENDPOINT_URL; AWS_CA_BUNDLE, else the profile's ca_bundle in AWS_CONFIG_FILE.
  /// Throws RemoteError for a profile named but not found.
  static RemoteConfig from_environment(const std::string& endpoint_url = "");
};

}  // namespace tarmac::remote
