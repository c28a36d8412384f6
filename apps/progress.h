#pragma once
#include <string>

#include "convert/convert.h"

namespace tarmac::cli {

/// Draws a one-line progress bar on stderr when it is a terminal; otherwise does nothing.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled);
  void update(const Progress& p);
  /// Ends the bar's line, if one was drawn, so that messages start on a line of their own.
  void end_line();

 private:
  bool enabled_;
  bool drawn_ = false;
};

}  // namespace tarmac::cli
