#pragma once
// The libcurl options every request sets, whether it reads (http.cpp) or writes (upload.cpp):
// one place, so that a setting (a timeout, the CA bundle) cannot reach one side and not the
// other.
#include <curl/curl.h>

#include <string>

#include "remote/remote_config.h"

namespace tarmac::remote {

/// The URL (its path sent as is), no signals (threads), HTTP and HTTPS only, tarmac's user agent,
/// the connect and stall timeouts of `config.retry`, and `config.ca_bundle` when one is set.
void set_transfer_options(CURL* h, const RemoteConfig& config, const std::string& url);

/// What to do about a transfer that failed on the server's certificate (not trusted, or a CA
/// bundle that cannot be read); empty for any other failure.
std::string certificate_advice(CURLcode c, const RemoteConfig& config);

/// AWS SigV4 signing with the config's region and keys (the x-amz-* headers are the caller's).
void set_sigv4(CURL* h, const RemoteConfig& config);

}  // namespace tarmac::remote
