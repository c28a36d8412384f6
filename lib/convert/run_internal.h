#pragma once
// What convert()'s two units (run_plan.cpp: planning; convert.cpp: the run) share, and nothing
// else includes.
#include <cstdint>

#include "common/error.h"
#include "convert/convert.h"

namespace tarmac::convert_detail {

// Thrown inside the run when a stop request ends it (after its checkpoint, if any); told apart
// from an Interrupted of a lower layer, which ends the run as an error.
class StopSignal : public Interrupted {
 public:
  using Interrupted::Interrupted;
};

// A run that converted no sample, without allow_empty; why.
class EmptyRun : public FatalError {
 public:
  using FatalError::FatalError;
};

inline void begin_phase(ConvertProgress* p, ConvertProgress::Phase phase, uint64_t total_bytes) {
  if (!p) return;
  p->bytes_read.store(0, std::memory_order_relaxed);
  p->total_bytes.store(total_bytes, std::memory_order_relaxed);
  p->phase.store(phase);
}

}  // namespace tarmac::convert_detail
