#pragma once
// The words for ISA-L's inflate error codes, shared by every stage that inflates with it (gzip
// inputs and zip members in source/, PNG image data in transform/).
#include <string>

namespace tarmac {

/// What an ISA-L inflate error code (ISAL_INVALID_BLOCK, ...) means, in words.
std::string isal_error_text(int code);

}  // namespace tarmac
