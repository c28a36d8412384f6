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
#include "convert/table_plan.h"
#include "source/input_reader.h"
#include "source/sample_grouper.h"

namespace tarmac {

/// What the feed needs of the run: how members are keyed and sorted (for a table's groups),
/// the duplicate and error policy, the window, this part, and where progress goes.
struct FeedSpec {
  KeyRule key_rule = KeyRule::FirstDot;
  std::vector<std::string> image_exts = MemberOptions{}.image_exts;
  std::vector<std::string> dense;  ///< --dense suffixes: a table's member columns after the image
  OnDuplicate on_duplicate = OnDuplicate::Error;
  bool skip_errors = false;  ///< --on-error skip: a member-level error does not stop the run
  uint64_t group_window = ConvertLimits{}.group_window;
  PartOptions part;          ///< --shard I/N (by sample: every N-th sample is this part's)
  std::string table_prefix;  ///< --table-prefix, named in a missing member's message
  ConvertProgress* progress = nullptr;  ///< null: no progress wanted
};

class SampleFeed {
 public:
  /// `resume_entries`: samples the interrupted run handled (0 for a fresh run). `ahead`: may
  /// samples go ahead while the window fills (not when resuming or splitting by sample, which
  /// decide at release what a sample becomes).
  /// `table`: with convert --table, the plan that groups members by the rows naming them
  /// (null: members are grouped by key).
  SampleFeed(FeedSpec spec, PartSplit split, GrouperOptions grouping, uint64_t resume_entries,
             bool ahead, InputReader& reader, Pipeline& pipe, const TablePlan* table = nullptr);

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
  /// True when some sample's members were not adjacent in its input (another key between).
  bool members_interleaved() const { return members_interleaved_; }
  /// --table: images in the inputs that no row names.
  uint64_t unused_images() const { return unused_images_; }

 private:
  void on_member(uint32_t input, Member&& m);
  void on_notice(MemberNotice&& n);
  void on_input_end();
  bool in_part();
  void add_entry(Entry&& e);
  void flush_batch();
  void push_ready();
  void go_ahead(const std::string& key);
  void on_table_member(uint32_t input, Member&& m);
  void release_table_group(uint32_t g);
  void finish_table();

  const FeedSpec spec_;
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
  uint64_t rows_read_ = 0;  // --table: rows of the groups released (the progress counts rows)
  bool members_interleaved_ = false;
  double seconds_ = 0;
  double first_release_seconds_ = 0;
  std::vector<MemberNotice> notices_;

  // --table: the groups whose members are being gathered, by group index.
  struct PendingGroup {
    std::vector<Member> members;  // in slot order
    std::vector<bool> filled;
    size_t missing = 0;
    uint32_t input = 0;  // the image's
    uint64_t bytes = 0;
  };
  const TablePlan* table_;
  std::unordered_map<uint32_t, PendingGroup> pending_groups_;
  std::vector<bool> released_groups_;
  uint64_t pending_group_bytes_ = 0;
  uint64_t unused_images_ = 0;
};

}  // namespace tarmac
