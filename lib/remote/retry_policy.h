#pragma once
// What a failed request is worth sending again: one rule for reads (http.cpp) and for the
// writes of -o s3:// (upload.cpp).
#include <curl/curl.h>

#include <string>

namespace tarmac::remote {

/// An answer worth sending again: any 5xx but 501 (a feature the server lacks, as a
/// conditional PUT on Swift, never passes), 429, and S3's SlowDown, RequestTimeout,
/// InternalError and ServiceUnavailable codes.
bool retryable_status(long status, const std::string& code);

/// A transfer that failed on the way and is worth sending again: no connection, a timeout, a
/// connection cut while sending or receiving, a TLS handshake that failed.
bool retryable_curl(CURLcode c);

}  // namespace tarmac::remote
