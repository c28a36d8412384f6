#pragma once
// The pre-pass of --on-duplicate last: which input each key's sample is kept from, known
// before any sample is converted (an earlier sample may otherwise be written before a later
// input repeats its key). It reads the inputs' member names only, never their data.
#include <cstdint>
#include <functional>

#include "source/input_reader.h"
#include "source/key_set.h"
#include "source/sample_grouper.h"

namespace tarmac {

/// Every key among `reader`'s members (those with a key under `rule`, not hidden) with the
/// input it is kept from under `keep` (First or Last), numbered from `first_input` (the index
/// of the reader's input 0 among all the run's inputs). Throws FatalError as InputReader::run
/// does. `on_member`, if given, is called after each member (for progress: reader.bytes_read()).
KeySet scan_kept_keys(InputReader& reader, OnDuplicate keep, uint32_t first_input, KeyRule rule,
                      const std::function<void()>& on_member = {});

}  // namespace tarmac
