#pragma once
#include <string>

#include "convert/convert.h"

namespace tarmac::cli {

/// Draws a one-line progress bar on stderr when it is a terminal; otherwise does nothing.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled);
  void update(const Progress& p);

 private:
  bool enabled_;
};

}  // namespace tarmac::cli
