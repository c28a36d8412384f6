#pragma once
// The two grades of failure, kept apart in the type (as libarchive does with
// ARCHIVE_WARN/ARCHIVE_FATAL): a SampleError spoils one sample, and the run may
// go on without it under --on-error skip; a FatalError stops the run.
#include <stdexcept>
#include <string>

namespace tarmac {

/// This sample cannot be converted; the message names archive, member and reason.
class SampleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The run cannot go on (unreadable archive, full disk, bad options...).
class FatalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A parser of untrusted bytes (labels, images, annotation file) refused its input.
/// The message says why; the caller adds where (archive, member).
class ParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tarmac
