#include "convert/sample_feed.h"

#include "common/error.h"

namespace tarmac {

SampleFeed::SampleFeed(FeedSpec spec, PartSplit split, GrouperOptions grouping,
                       uint64_t resume_entries, bool ahead, InputReader& reader, Pipeline& pipe,
                       const TablePlan* table)
    : spec_(std::move(spec)),
      split_(split),
      resume_entries_(resume_entries),
      reader_(reader),
      pipe_(pipe),
      grouper_(std::move(grouping)),
      ahead_open_(ahead && !table),
      table_(table),
      released_groups_(table ? table->groups().size() : 0, false) {}

void SampleFeed::run() noexcept {
  t0_ = Clock::now();
  try {
    InputCallbacks cb;
    cb.on_member = [this](uint32_t input, Member&& m) { on_member(input, std::move(m)); };
    cb.on_notice = [this](MemberNotice&& n) { on_notice(std::move(n)); };
    cb.on_input_end = [this](uint32_t) { on_input_end(); };
    reader_.run(cb);
    if (table_) finish_table();
  } catch (...) {
    // After a graceful stop (Pipeline::stop_input) the refused push ends the reading: no failure.
    if (!pipe_.input_stopped()) {
      failure_ = std::current_exception();
      pipe_.cancel();
    }
  }
  // A stopped reader has not met every sample: the estimate made while reading stands.
  if (spec_.progress && !pipe_.input_stopped()) {
    spec_.progress->bytes_read.store(reader_.bytes_read(), std::memory_order_relaxed);
    spec_.progress->seen.store(table_ ? rows_read_ : entries_read_, std::memory_order_relaxed);
    spec_.progress->input_done.store(true);
  }
  pipe_.close_input(seq_);
  seconds_ = seconds_since(t0_);
}

bool SampleFeed::in_part() {
  return split_ != PartSplit::Samples || sample_no_++ % spec_.part.count == spec_.part.index;
}

void SampleFeed::flush_batch() {
  if (batch_.entries.empty()) return;
  if (seq_ == 0) first_release_seconds_ = seconds_since(t0_);
  batch_.seq = seq_++;
  if (!pipe_.push(std::move(batch_))) throw FatalError("cancelled");
  batch_ = Item{};
}

void SampleFeed::add_entry(Entry&& e) {
  // Resuming: what the interrupted run finished is read again (for the input checksums and to
  // group the rest) but goes no further than the writer's skip.
  if (entries_read_++ < resume_entries_) {
    e.replay = true;
    e.raw.members = {};
  } else if (!reader_.verified()) {
    // Unchanged inputs are read again past the checkpoint's position before the sample after it
    // is released (as they were then); anything new before that is written from changed bytes.
    reader_.refuse_changed(reader_.mark().input);
  }
  e.mark = reader_.mark();
  if (e.raw.table_group >= 0)
    rows_read_ += table_->groups()[static_cast<size_t>(e.raw.table_group)].rows.size();
  batch_.bytes += e.ahead ? e.ahead->bytes() : e.raw.bytes();
  batch_.entries.push_back(std::move(e));
  if (batch_.entries.size() >= kBatchSamples || batch_.bytes >= kBatchBytes) flush_batch();
}

void SampleFeed::push_ready() {
  // Samples leave the group window for the workers only once it is full (or the input ends);
  // after the first release nothing goes ahead any more.
  if (!ready_.empty()) ahead_open_ = false;
  for (auto& r : ready_) {
    if (!in_part()) continue;
    Entry e;
    if (auto j = ahead_.find(r.key); j != ahead_.end()) {
      e.ahead = std::move(j->second);  // unchanged since it went ahead; r has no members
      ahead_.erase(j);
    }
    e.raw = std::move(r);
    add_entry(std::move(e));
  }
  ready_.clear();
}

// After a member of `key` was added: the sample before it, followed now, is probably whole and
// goes ahead to idle workers. The output is the same either way.
void SampleFeed::go_ahead(const std::string& key) {
  if (ahead_open_ && !last_key_.empty() && key != last_key_)
    if (const RawSample* s = grouper_.find_pending(last_key_);
        s && !s->dropped && s->errors.empty() && s->bytes() >= kAheadMinBytes &&
        !ahead_.count(last_key_)) {
      RawSample lent;
      lent.key = s->key;
      lent.input = s->input;
      lent.members = grouper_.lend_members(last_key_);
      auto job = std::make_shared<AheadJob>(std::move(lent));
      ahead_.emplace(last_key_, job);
      pipe_.push_ahead(std::move(job));
    }
  last_key_ = key;
}

void SampleFeed::on_member(uint32_t input, Member&& m) {
  if (pipe_.input_stopped()) throw FatalError("stopped");  // read no further (run() ends quietly)
  if (table_) {
    on_table_member(input, std::move(m));
    return;
  }
  std::string key, ext;
  if (is_hidden_or_metadata(m.name) || !split_member_name(m.name, key, ext, spec_.key_rule)) {
    const bool hidden = is_hidden_or_metadata(m.name);
    notices_.push_back({input, m.name,
                        hidden ? "hidden or metadata file" : "name has no extension, so no key",
                        false, hidden ? ErrorCode::HiddenFile : ErrorCode::NoExtension});
    return;
  }
  try {
    if (auto j = ahead_.find(key); j != ahead_.end()) {  // late for a sample gone ahead
      grouper_.return_members(key, j->second->reclaim());
      ahead_.erase(j);
      ahead_open_ = false;  // members are not adjacent here: going ahead would waste work
    }
    if (key != last_key_ && grouper_.find_pending(key)) members_interleaved_ = true;
    grouper_.add(input, std::move(m), key, ready_);
    go_ahead(key);
    if (spec_.progress) {
      // Samples still in the group window count too; by sample, this part's share of them.
      // Stored with the bytes read, so that samples per byte is of one moment.
      const uint64_t waiting = grouper_.pending_samples();
      spec_.progress->bytes_read.store(reader_.bytes_read(), std::memory_order_relaxed);
      spec_.progress->seen.store(
          entries_read_ + ready_.size() / (split_ == PartSplit::Samples ? spec_.part.count : 1) +
              waiting / (split_ == PartSplit::Samples ? spec_.part.count : 1),
          std::memory_order_relaxed);
    }
  } catch (const SampleError& e) {
    if (in_part()) {
      Entry bad;
      bad.raw.key = key;
      bad.raw.input = input;
      bad.reader_error = e.what();
      bad.reader_error_code = e.code();
      add_entry(std::move(bad));
    }
  }
  push_ready();
}

void SampleFeed::on_notice(MemberNotice&& n) {
  if (n.is_error && !spec_.skip_errors)
    throw FatalError("'" + reader_.inputs()[n.input].path + "', member '" + n.member +
                     "': " + n.reason);
  notices_.push_back(std::move(n));
}

void SampleFeed::on_input_end() {
  if (table_) {  // a table's groups may take members from several inputs
    flush_batch();
    return;
  }
  grouper_.flush(ready_);
  push_ready();
  flush_batch();
  last_key_.clear();
}

// --table: a member goes to every group of rows naming it; a group complete goes to the workers.
void SampleFeed::on_table_member(uint32_t input, Member&& m) {
  if (spec_.progress) {  // rows of the groups released, with the bytes read for them
    spec_.progress->bytes_read.store(reader_.bytes_read(), std::memory_order_relaxed);
    spec_.progress->seen.store(rows_read_, std::memory_order_relaxed);
  }
  const auto* slots = table_->slots(m.name);
  if (!slots) {
    std::string key, ext;
    const bool image = split_member_name(m.name, key, ext, KeyRule::LastDot) &&
                       is_image_extension(ext, spec_.image_exts);
    if (image) ++unused_images_;
    notices_.push_back({input, m.name,
                        image ? "an image that no row of the table names (not converted)"
                              : "no row of the table names it",
                        false, image ? ErrorCode::UnusedImage : ErrorCode::UnusedMember});
    return;
  }
  const std::string name = m.name;  // m is moved into the last group that needs it
  for (size_t i = 0; i < slots->size(); ++i) {
    const auto [g, slot] = (*slots)[i];
    const TableGroup& group = table_->groups()[g];
    auto it = pending_groups_.find(g);
    if (released_groups_[g] || (it != pending_groups_.end() && it->second.filled[slot])) {
      // The same path twice in the inputs: the rows took the first.
      notices_.push_back({input, name,
                          "read again: the table's rows took the first member of this name",
                          spec_.on_duplicate == OnDuplicate::Error, ErrorCode::DuplicateMember});
      if (spec_.on_duplicate == OnDuplicate::Error && !spec_.skip_errors)
        throw FatalError("'" + reader_.inputs()[input].path + "', member '" + name +
                         "': a member of this name was read before, and the table's rows name "
                         "it: which one they mean is unclear (--on-duplicate first keeps the "
                         "first)");
      continue;
    }
    if (it == pending_groups_.end()) {
      PendingGroup p;
      p.members.resize(group.paths.size());
      p.filled.assign(group.paths.size(), false);
      p.missing = group.paths.size();
      it = pending_groups_.emplace(g, std::move(p)).first;
    }
    PendingGroup& p = it->second;
    // Copied for all but the last group needing it, which takes it.
    p.members[slot] = i + 1 == slots->size() ? std::move(m) : m;  // NOLINT(bugprone-use-after-move)
    p.filled[slot] = true;
    p.bytes += p.members[slot].data.size();
    pending_group_bytes_ += p.members[slot].data.size();
    if (slot == 0) p.input = input;
    if (--p.missing == 0) release_table_group(g);
  }
  if (pending_group_bytes_ > spec_.group_window) {
    // The oldest group still waiting says what it waits for.
    uint32_t oldest = UINT32_MAX;
    for (const auto& [g, p] : pending_groups_) oldest = std::min(oldest, g);
    const TableGroup& group = table_->groups()[oldest];
    const PendingGroup& p = pending_groups_.at(oldest);
    std::string have, want;
    for (size_t s = 0; s < group.paths.size(); ++s)
      (p.filled[s] ? have : want) += (p.filled[s] ? have : want).empty()
                                         ? "'" + group.paths[s] + "'"
                                         : ", '" + group.paths[s] + "'";
    throw FatalError(
        "the members that the table's rows pair are further apart in the inputs "
        "than the group window (" +
        std::to_string(spec_.group_window >> 20) + " MiB): " + have + " waits for " + want +
        "; pass a larger --group-window, or order the inputs so that each row's "
        "members are near each other");
  }
}

void SampleFeed::release_table_group(uint32_t g) {
  PendingGroup p = std::move(pending_groups_.at(g));
  pending_groups_.erase(g);
  pending_group_bytes_ -= p.bytes;
  released_groups_[g] = true;
  if (!in_part()) return;
  Entry e;
  e.raw.key = table_->groups()[g].key;
  e.raw.input = p.input;
  e.raw.members = std::move(p.members);
  e.raw.table_group = g;
  add_entry(std::move(e));
}

// After the last input: the groups whose members did not all come, in table order; each row of
// them is a bad sample naming what is missing.
void SampleFeed::finish_table() {
  for (uint32_t g = 0; g < released_groups_.size(); ++g) {
    if (released_groups_[g]) continue;
    const TableGroup& group = table_->groups()[g];
    const auto it = pending_groups_.find(g);
    std::string missing;
    for (size_t s = 0; s < group.paths.size(); ++s)
      if (it == pending_groups_.end() || !it->second.filled[s])
        missing += (missing.empty() ? "'" : ", '") + group.paths[s] + "' (column '" +
                   (s == 0 ? table_->table().member_columns.front() : spec_.dense[s - 1]) + "')";
    released_groups_[g] = true;
    if (!in_part()) continue;
    Entry e;
    e.raw.key = group.key;
    e.raw.input = it == pending_groups_.end() ? 0 : it->second.input;
    e.raw.table_group = g;
    e.raw.errors.push_back("the table names " + missing + ", which no input holds" +
                           (spec_.table_prefix.empty()
                                ? " (if the inputs hold it under a folder that the table's "
                                  "paths leave out, pass --table-prefix FOLDER/)"
                                : " (with --table-prefix " + spec_.table_prefix + ")"));
    e.raw.error_code = ErrorCode::MissingMember;
    add_entry(std::move(e));
  }
  pending_groups_.clear();
  pending_group_bytes_ = 0;
  flush_batch();
}

}  // namespace tarmac
