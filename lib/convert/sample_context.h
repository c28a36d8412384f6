#pragma once
// Where in a sample a worker is, and how what bad data throws there becomes the sample's error
// (its message naming the member, its code): shared by the sample processor's jobs.
#include <new>
#include <opencv2/core.hpp>
#include <string>

#include "common/error.h"
#include "convert/sample_processor.h"

namespace tarmac {

/// The member being read, named in a message, and what a parse failure there means.
struct SampleContext {
  const std::string* member = nullptr;  ///< null: the message names its own member
  /// What a ParseError (or OpenCV's failure) from the current member means for the sample.
  ErrorCode parse_code = ErrorCode::BadSample;
};

/// Runs `f`, turning what bad data throws into `out`'s error and code (FatalError, and
/// anything else, goes through: it stops the run).
template <class F>
void guarded(ProcessedSample& out, SampleContext& ctx, F&& f) {
  auto where = [&] { return ctx.member ? "member '" + *ctx.member + "': " : std::string(); };
  try {
    f();
  } catch (const ParseError& e) {
    out.error = where() + e.what();
    out.error_code = ctx.parse_code;
  } catch (const SampleError& e) {
    out.error = where() + e.what();
    out.error_code = e.code();
  } catch (const cv::Exception& e) {
    out.error = where() + "OpenCV failed: " + e.what();
    out.error_code = ctx.parse_code;
  } catch (const std::bad_alloc&) {
    out.error = where() + "out of memory while converting this sample";
    out.error_code = ErrorCode::OutOfMemory;
  }
}

}  // namespace tarmac
