#include "remote/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/version.h"
#include "remote/curl_options.h"
#include "remote/header_line.h"
#include "remote/retry_policy.h"
#include "remote/url.h"

namespace tarmac::remote {

void set_transfer_options(CURL* h, const RemoteConfig& config, const std::string& url) {
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  // The path as named: libcurl would otherwise remove '.' and '..' segments, sending the
  // request for another object than the one named (parse_s3 refuses them in s3:// names).
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_USERAGENT, (std::string("tarmac/") + kVersion).c_str());
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, config.retry.connect_timeout_s);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, config.retry.stall_timeout_s);
  if (!config.ca_bundle.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, config.ca_bundle.c_str());
}

std::string certificate_advice(CURLcode c, const RemoteConfig& config) {
  if (c == CURLE_PEER_FAILED_VERIFICATION)
    return config.ca_bundle.empty()
               ? "the server's certificate is not signed by an authority this system trusts: "
                 "name the file of its authority's certificate (PEM) with AWS_CA_BUNDLE=FILE "
                 "(or ca_bundle in the profile of ~/.aws/config)"
               : "the server's certificate is not signed by an authority of AWS_CA_BUNDLE '" +
                     config.ca_bundle + "': name the file of its authority's certificate (PEM)";
  if (c == CURLE_SSL_CACERT_BADFILE)
    return "the certificate authorities of AWS_CA_BUNDLE '" + config.ca_bundle +
           "' cannot be read: name a readable PEM file";
  return "";
}

void set_sigv4(CURL* h, const RemoteConfig& config) {
  const std::string sigv4 = "aws:amz:" + config.region + ":s3";
  curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
  // USERNAME and PASSWORD apart: an access key may hold ':' (Swift's tempauth: account:user)
  curl_easy_setopt(h, CURLOPT_USERNAME, config.access_key.c_str());
  curl_easy_setopt(h, CURLOPT_PASSWORD, config.secret_key.c_str());
}

namespace {

constexpr size_t kMaxBuffered = 4 << 20;  // a stream's unread bytes before its transfer pauses
constexpr size_t kErrorBodyLimit = 64 << 10;
// SHA-256 of an empty payload: every request here sends none. libcurl 7.88 signs the
// payload's hash but does not send it, which S3 servers require (x-amz-content-sha256).
constexpr const char* kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// What the headers of the last response (after redirects) said.
struct Headers {
  std::optional<uint64_t> content_length;
  std::optional<uint64_t> range_start, range_total;
  std::string etag;
  void clear() { *this = Headers{}; }
};

std::optional<uint64_t> parse_u64(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 19)
    return std::nullopt;
  return std::stoull(s);
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* h = static_cast<Headers*>(user);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    h->clear();
  } else if (ieq_prefix(line, "content-length:")) {
    h->content_length = parse_u64(header_value(line, 15));
  } else if (ieq_prefix(line, "etag:")) {
    h->etag = header_value(line, 5);
  } else if (ieq_prefix(line, "content-range:")) {
    // bytes START-END/TOTAL
    const std::string v = header_value(line, 14);
    const auto sp = v.find(' '), dash = v.find('-'), slash = v.find('/');
    if (sp != std::string::npos && dash != std::string::npos && slash != std::string::npos &&
        sp < dash && dash < slash) {
      h->range_start = parse_u64(v.substr(sp + 1, dash - sp - 1));
      h->range_total = parse_u64(v.substr(slash + 1));
    }
  }
  return size * count;
}

// What to do about an error code, for the one line a user reads.
std::string advice(const Target& t, long status, const std::string& code,
                   const RemoteConfig& config) {
  const std::string creds =
      "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE; used: " +
      (config.credentials_from.empty() ? std::string("none") : config.credentials_from) +
      "), AWS_REGION (" + config.region + ") and the endpoint (" + config.s3_endpoint() + ")";
  if (code == "NoSuchKey" || (status == 404 && t.sign && code.empty()))
    return "no object has this key: check the name (aws s3 ls lists a bucket)";
  if (code == "NoSuchBucket")
    return "no such bucket at " + config.s3_endpoint() +
           ": check the bucket's name and the endpoint (--endpoint-url or AWS_ENDPOINT_URL)";
  if (code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
      code == "AuthorizationHeaderMalformed" || code == "InvalidToken" || code == "ExpiredToken")
    return "the server refused the credentials: " + creds;
  if (code == "AccessDenied" || status == 403 || status == 401)
    return t.sign ? "access denied: " + creds + "; the key may lack read access to this bucket"
                  : "access denied: the URL needs credentials tarmac does not send";
  if (status == 404) return "not found: check the URL";
  if (status == 412) return "the object changed while it was read: run again";
  if (retryable_status(status, code)) return "the server kept failing: try again later";
  return "the server refused the request";
}

std::string failure_line(const Target& t, long status, const std::string& body,
                         const RemoteConfig& config) {
  const std::string code = s3_error_code(body);
  std::string line = "cannot read '" + t.name + "': ";
  line += code.empty() ? "HTTP " + std::to_string(status)
                       : code + " (HTTP " + std::to_string(status) + ")";
  return line + ": " + advice(t, status, code, config);
}

std::string transport_line(const Target& t, CURLcode c, const char* detail, int tries,
                           const RemoteConfig& config) {
  std::string what = detail && *detail ? detail : curl_easy_strerror(c);
  std::string line = "cannot read '" + t.name + "': " + what;
  if (tries > 1) line += " (" + std::to_string(tries) + " tries)";
  if (const std::string advice = certificate_advice(c, config); !advice.empty())
    return line + ": " + advice;
  if (c == CURLE_COULDNT_CONNECT || c == CURLE_COULDNT_RESOLVE_HOST ||
      c == CURLE_OPERATION_TIMEDOUT)
    return line + ": check that the server at " + t.url.substr(0, t.url.find('/', 8)) +
           " is up and the endpoint is right (--endpoint-url or AWS_ENDPOINT_URL)";
  return line + ": check the network and try again";
}

// One configured handle: URL, signing, timeouts; `headers` must outlive it.
CURL* make_handle(const Target& t, const RemoteConfig& config, const std::string& url,
                  curl_slist*& headers, std::vector<std::string> extra) {
  global_init();
  CURL* h = curl_easy_init();
  if (!h) throw RemoteError("cannot read '" + t.name + "': libcurl could not start a transfer");
  set_transfer_options(h, config, url);
  if (t.sign) {
    set_sigv4(h, config);
    extra.push_back(std::string("x-amz-content-sha256: ") + kEmptySha256);
    if (!config.session_token.empty())
      extra.push_back("x-amz-security-token: " + config.session_token);
  } else {
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  }
  for (const auto& e : extra) headers = curl_slist_append(headers, e.c_str());
  if (headers) curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  return h;
}

// Sleeps before retry `failures` (1, 2, ...): false when a stop came meanwhile.
bool back_off(const RetryPolicy& p, int failures, const StopRequest* stop) {
  double wait = p.first_backoff_s;
  for (int i = 1; i < failures && wait < p.max_backoff_s; ++i) wait *= 2;
  wait = std::min(wait, p.max_backoff_s);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait);
  while (std::chrono::steady_clock::now() < until) {
    if (stop && stop->requested()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

int max_tries(const RetryPolicy& p, CURLcode c) {
  // A server that is not there at all is told at once, not after a minute of backoff.
  return c == CURLE_COULDNT_CONNECT ? std::min(p.max_attempts, 3) : p.max_attempts;
}

size_t collect_body(char* data, size_t size, size_t count, void* user) {
  auto* r = static_cast<std::pair<std::string*, size_t>*>(user);
  const size_t n = size * count;
  if (r->first->size() + n > r->second) return 0;  // over the limit: the transfer fails
  r->first->append(data, n);
  return n;
}

// CURLOPT_XFERINFOFUNCTION: non-zero (the transfer aborts) once a stop is requested.
int stop_progress(void* stop, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const StopRequest*>(stop)->requested() ? 1 : 0;
}

}  // namespace

bool retryable_status(long status, const std::string& code) {
  if (status == 501 || code == "NotImplemented") return false;
  return status >= 500 || status == 429 || code == "SlowDown" || code == "RequestTimeout" ||
         code == "InternalError" || code == "ServiceUnavailable";
}

bool retryable_curl(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

std::string s3_error_code(const std::string& body) {
  const auto b = body.find("<Code>");
  if (b == std::string::npos) return "";
  const auto e = body.find("</Code>", b);
  if (e == std::string::npos || e - b > 70) return "";
  return body.substr(b + 6, e - b - 6);
}

Target target_for(const std::string& name, const RemoteConfig& config) {
  if (!is_s3(name)) return {name, name, false};
  const S3Location loc = parse_s3(name);
  if (config.access_key.empty())
    throw RemoteError("cannot read '" + name +
                      "': no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                      "or AWS_PROFILE with a profile in ~/.aws/credentials");
  return {name, s3_object_url(config.s3_endpoint(), loc), true};
}

Response request(const Target& target, const RemoteConfig& config, bool head,
                 const std::string& query, size_t body_limit, const std::string& range,
                 const StopRequest* stop) {
  const std::string stopped = "cannot read '" + target.name + "': stopped";
  const std::string url = query.empty() ? target.url : target.url + "?" + query;
  for (int failures = 0;;) {
    Response r;
    Headers h;
    curl_slist* headers = nullptr;
    std::vector<std::string> extra;
    if (!range.empty()) extra.push_back("Range: bytes=" + range);
    CURL* c = make_handle(target, config, url, headers, std::move(extra));
    std::pair<std::string*, size_t> sink{&r.body, body_limit};
    if (head) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    char detail[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
    if (stop) {
      curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, stop_progress);
      curl_easy_setopt(c, CURLOPT_XFERINFODATA, const_cast<StopRequest*>(stop));
    }
    const CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_easy_cleanup(c);
    curl_slist_free_all(headers);
    if (rc == CURLE_ABORTED_BY_CALLBACK) throw RemoteError(stopped);
    if (rc == CURLE_WRITE_ERROR && !range.empty() && r.status == 200)
      throw RemoteError("cannot read '" + target.name + "': asked for bytes " + range +
                            ", the server answered with the whole object: it serves no ranges",
                        200);
    if (rc == CURLE_WRITE_ERROR)
      throw RemoteError("cannot read '" + target.name + "': the answer is larger than " +
                        std::to_string(body_limit) + " bytes");
    if (rc != CURLE_OK) {
      ++failures;
      if (!retryable_curl(rc) || failures >= max_tries(config.retry, rc))
        throw RemoteError(transport_line(target, rc, detail, failures, config));
      if (!back_off(config.retry, failures, stop)) throw RemoteError(stopped);
      continue;
    }
    if (r.status >= 300) {
      // A URL signed for GET alone (a presigned URL) refuses HEAD: its GET is tried when read.
      if (head && !target.sign && (r.status == 403 || r.status == 405)) return r;
      if (head) {
        // A HEAD answer has no body, so no error code: ask again with GET to learn it.
        Response g = request(target, config, false, query, kErrorBodyLimit, range);
        if (g.status < 300)
          throw RemoteError("cannot read '" + target.name + "': HEAD answered HTTP " +
                            std::to_string(r.status) +
                            " but GET succeeds: the server is "
                            "inconsistent; try again");
        return g;  // not reached: request() threw for g's status
      }
      if (retryable_status(r.status, s3_error_code(r.body)) &&
          ++failures < config.retry.max_attempts) {
        if (!back_off(config.retry, failures, stop)) throw RemoteError(stopped);
        continue;
      }
      throw RemoteError(failure_line(target, r.status, r.body, config), r.status);
    }
    r.content_length = h.content_length;
    r.etag = h.etag;
    r.retries = static_cast<uint32_t>(failures);
    return r;
  }
}

Response head_object(const Target& target, const RemoteConfig& config) {
  return request(target, config, true);
}

struct HttpStream::State {
  Target target;
  RemoteConfig config;
  const StopRequest* stop = nullptr;
  CURLM* multi = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  Headers h;
  char detail[CURL_ERROR_SIZE] = "";

  std::vector<uint8_t> buf;  // received, not yet read: buf[head, size)
  size_t head = 0;
  uint64_t pos = 0;  // bytes of the object received
  bool paused = false, done = false;

  // The request in flight.
  bool checked = false;  // its status was looked at
  bool ok = false;       // 200 or 206: its body is the object's bytes
  long status = 0;
  std::string error_body;
  uint64_t skip = 0;         // bytes to drop: a server that answered a range with all of it
  uint64_t attempt_pos = 0;  // pos when it started

  std::string etag;
  std::optional<uint64_t> total;
  std::optional<uint64_t> declared;  // expect_size()
  std::string refused;               // why on_body refused the answer (check_status)
  int failures = 0;                  // in a row, with no byte received between them
  TransferCounts counts;

  void start();
  void finish_handle();
  void check_status();
  void complete(CURLcode rc);
  void fail_or_retry(const std::string& why, int max);
  static size_t on_body(char* data, size_t size, size_t count, void* user);
};

void HttpStream::State::start() {
  std::vector<std::string> extra;
  if (pos > 0) {
    extra.push_back("Range: bytes=" + std::to_string(pos) + "-");
    if (!etag.empty()) extra.push_back("If-Match: " + etag);
  }
  easy = make_handle(target, config, target.url, headers, std::move(extra));
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, this);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &h);
  detail[0] = '\0';
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, detail);
  checked = ok = paused = false;
  status = 0;
  skip = 0;
  error_body.clear();
  refused.clear();
  attempt_pos = pos;
  curl_multi_add_handle(multi, easy);
}

void HttpStream::State::finish_handle() {
  if (easy) {
    curl_multi_remove_handle(multi, easy);
    curl_easy_cleanup(easy);
    easy = nullptr;
  }
  curl_slist_free_all(headers);
  headers = nullptr;
}

void HttpStream::State::check_status() {
  if (checked) return;
  checked = true;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  std::optional<uint64_t> says;  // the object's size by this answer
  if (status == 200) {
    ok = true;
    skip = pos;  // a resume the server answered from the start
    says = h.content_length;
  } else if (status == 206) {
    ok = true;
    if (h.range_start != pos)
      throw RemoteError("cannot read '" + target.name + "': asked for the bytes from " +
                        std::to_string(pos) + ", the server answered others: try again");
    says = h.range_total;
  }
  if (ok && declared && says && *says != *declared)
    throw RemoteError("cannot read '" + target.name + "': its GET answers " +
                      std::to_string(*says) + " byte(s), its listing or HEAD said " +
                      std::to_string(*declared) +
                      ": the object changed while it was read (or the server is inconsistent); "
                      "run again");
  if (ok && !total && says) total = says;
  if (ok && etag.empty()) etag = h.etag;
}

size_t HttpStream::State::on_body(char* data, size_t size, size_t count, void* user) {
  auto* s = static_cast<State*>(user);
  size_t n = size * count;
  try {
    s->check_status();
  } catch (const RemoteError& e) {
    s->ok = false;
    s->error_body = "";
    s->refused = e.what();
    return 0;
  }
  if (!s->ok) {
    if (s->error_body.size() + n <= kErrorBodyLimit) s->error_body.append(data, n);
    return n;
  }
  if (s->buf.size() - s->head >= kMaxBuffered) {
    s->paused = true;
    return CURL_WRITEFUNC_PAUSE;  // libcurl hands the same bytes again once unpaused
  }
  const size_t dropped = static_cast<size_t>(std::min<uint64_t>(s->skip, n));
  s->skip -= dropped;
  s->buf.insert(s->buf.end(), data + dropped, data + n);
  s->pos += n - dropped;
  return n;
}

void HttpStream::State::fail_or_retry(const std::string& why, int max) {
  finish_handle();
  if (pos > attempt_pos) failures = 0;
  ++failures;
  if (failures >= max) throw RemoteError(why);
  if (!back_off(config.retry, failures, stop))
    throw RemoteError("cannot read '" + target.name + "': stopped");
  ++counts.retries;
  counts.resumed_bytes += pos;
  start();
}

void HttpStream::State::complete(CURLcode rc) {
  if (rc != CURLE_WRITE_ERROR) check_status();
  if (rc == CURLE_OK && ok) {
    if (total && pos < *total) {
      fail_or_retry("cannot read '" + target.name + "': the server ended the object at byte " +
                        std::to_string(pos) + " of " + std::to_string(*total) +
                        ", again and again: try again later",
                    config.retry.max_attempts);
      return;
    }
    finish_handle();
    if (declared && pos != *declared)  // an answer that said no size (chunked, or none)
      throw RemoteError("cannot read '" + target.name + "': the server ended the object at byte " +
                        std::to_string(pos) + ", its listing or HEAD said " +
                        std::to_string(*declared) +
                        " byte(s): the object changed while it was read, or the transfer was "
                        "cut; run again");
    done = true;
    return;
  }
  if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && !ok && status >= 300)) {
    const std::string code = s3_error_code(error_body);
    const std::string line = failure_line(target, status, error_body, config);
    if (!retryable_status(status, code)) {
      finish_handle();
      throw RemoteError(line, status);
    }
    fail_or_retry(line, config.retry.max_attempts);
    return;
  }
  if (rc == CURLE_WRITE_ERROR) {  // check_status refused the answer
    finish_handle();
    throw RemoteError(!refused.empty() ? refused
                                       : "cannot read '" + target.name +
                                             "': the server answered a range other than the one "
                                             "asked for: try again");
  }
  const std::string line = transport_line(target, rc, detail, failures + 1, config);
  if (!retryable_curl(rc)) {
    finish_handle();
    throw RemoteError(line);
  }
  fail_or_retry(line, max_tries(config.retry, rc));
}

HttpStream::HttpStream(Target target, const RemoteConfig& config, const StopRequest* stop)
    : s_(std::make_unique<State>()) {
  global_init();
  s_->target = std::move(target);
  s_->config = config;
  s_->stop = stop;
  s_->multi = curl_multi_init();
  if (!s_->multi)
    throw RemoteError("cannot read '" + s_->target.name + "': libcurl could not start");
}

HttpStream::~HttpStream() {
  s_->finish_handle();
  curl_multi_cleanup(s_->multi);
}

size_t HttpStream::read(uint8_t* out, size_t size) {
  State& s = *s_;
  while (s.head == s.buf.size()) {
    s.buf.clear();
    s.head = 0;
    if (s.done) return 0;
    if (s.stop && s.stop->requested())
      throw RemoteError("cannot read '" + s.target.name + "': stopped");
    if (!s.easy) s.start();
    if (s.paused) {
      s.paused = false;
      curl_easy_pause(s.easy, CURLPAUSE_CONT);
    }
    int running = 0;
    curl_multi_perform(s.multi, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(s.multi, &left))
      if (m->msg == CURLMSG_DONE && m->easy_handle == s.easy) {
        s.complete(m->data.result);
        break;
      }
    if (s.head == s.buf.size() && s.easy && !s.paused)
      curl_multi_poll(s.multi, nullptr, 0, 100, nullptr);
  }
  const size_t n = std::min(size, s.buf.size() - s.head);
  std::memcpy(out, s.buf.data() + s.head, n);
  s.head += n;
  if (s.head > (1u << 20) && s.head * 2 > s.buf.size()) {  // keep the buffer bounded
    s.buf.erase(s.buf.begin(), s.buf.begin() + static_cast<ptrdiff_t>(s.head));
    s.head = 0;
  }
  if (s.paused && s.buf.size() - s.head < kMaxBuffered) {
    s.paused = false;
    curl_easy_pause(s.easy, CURLPAUSE_CONT);
  }
  return n;
}

void HttpStream::expect_size(uint64_t size) {
  s_->declared = size;
  s_->total = size;
}

std::optional<uint64_t> HttpStream::size() const {
  return s_->total;
}
const TransferCounts& HttpStream::counts() const {
  return s_->counts;
}
const std::string& HttpStream::name() const {
  return s_->target.name;
}
const std::string& HttpStream::etag() const {
  return s_->etag;
}

}  // namespace tarmac::remote
