#pragma once
// The reader thread's work: read every input, group members into samples (source/), and feed
// the samples of this run's part to the pipeline in small batches, in order. While the group
// window first fills, samples that another key has followed go ahead to idle workers (their
// members lent by the grouper, taken back for a late member). Resuming, the samples the
// interrupted run handled are fed as replays: read again (for the input checksums and to group
// the rest) but not converted.
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "convert/convert.h"
#include "convert/pipeline.h"
#include "source/input_reader.h"
#include "source/sample_grouper.h"

namespace tarmac {

class SampleFeed {
 public:
  /// `resume_entries`: samples the interrupted run handled (0 for a fresh run). `ahead`: may
  /// samples go ahead while the window fills (not when resuming or splitting by sample, which
  /// decide at release what a sample becomes).
  SampleFeed(const ConvertOptions& o, PartSplit split, GrouperOptions grouping,
             uint64_t resume_entries, bool ahead, InputReader& reader, Pipeline& pipe);

  /// Reads everything and closes the pipeline's input. Never throws: a failure is kept
  /// (failure()) and the pipeline cancelled. Call once, on the reader thread; the accessors
  /// below are for after it returned (the thread joined).
  void run() noexcept;

  std::exception_ptr failure() const { return failure_; }
  uint64_t entries_read() const { return entries_read_; }
  double seconds() const { return seconds_; }
  /// Start to the first batch released to the workers.
  double first_release_seconds() const { return first_release_seconds_; }
  /// Members ignored or left out before grouping (hidden, unsafe, too large...), in order.
  const std::vector<MemberNotice>& notices() const { return notices_; }

 private:
  void on_member(uint32_t input, Member&& m);
  void on_notice(MemberNotice&& n);
  void on_input_end();
  bool in_part();
  void add_entry(Entry&& e);
  void flush_batch();
  void push_ready();
  void go_ahead(const std::string& key);

  const ConvertOptions& o_;
  const PartSplit split_;
  const uint64_t resume_entries_;
  InputReader& reader_;
  Pipeline& pipe_;
  SampleGrouper grouper_;
  std::vector<RawSample> ready_;
  Item batch_;
  uint64_t seq_ = 0;
  uint64_t sample_no_ = 0;  // --shard I/N by sample: every part groups all, keeps its share
  bool ahead_open_;
  std::unordered_map<std::string, std::shared_ptr<AheadJob>> ahead_;
  std::string last_key_;
  Clock::time_point t0_;

  std::exception_ptr failure_;
  uint64_t entries_read_ = 0;
  double seconds_ = 0;
  double first_release_seconds_ = 0;
  std::vector<MemberNotice> notices_;
};

}  // namespace tarmac
