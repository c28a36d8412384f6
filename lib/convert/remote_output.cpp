#include "convert/remote_output.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>

#include "common/crc32.h"
#include "common/error.h"
#include "convert/checkpoint.h"
#include "format/json_object.h"
#include "format/lock_record.h"
#include "format/manifest.h"
#include "format/names.h"
#include "format/shard_list.h"
#include "remote/inputs.h"
#include "write/file_util.h"

namespace tarmac {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using namespace format;

namespace {

// At most this many closed shards wait for their upload (each on the local disk, as big as
// --shard-size): the conversion waits beyond.
constexpr size_t kMaxPendingShards = 2;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  if (!in) throw FatalError("cannot read '" + p.string() + "'");
  return s.str();
}

std::string file_crc32(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw FatalError("cannot read '" + p.string() + "'");
  std::vector<char> buf(1 << 20);
  uint32_t crc = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    crc = crc32_update(crc, buf.data(), static_cast<size_t>(in.gcount()));
  }
  return crc32_hex(crc);
}

std::string new_run_id() {
  std::random_device rd;
  std::string id;
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) id += hex[rd() & 15];
  return id;
}

}  // namespace

std::string remote_checkpoint_dir(const std::string& output, const std::string& checkpoint_dir) {
  if (!checkpoint_dir.empty()) return checkpoint_dir;
  const remote::S3Prefix p = remote::parse_s3_prefix(output);
  return (fs::path(".tarmac-checkpoint") / p.bucket /
          crc32_hex(crc32_update(0, p.prefix.data(), p.prefix.size())))
      .string();
}

std::vector<std::string> recorded_objects(const fs::path& staging, const std::string& destination) {
  std::vector<std::string> names;
  std::error_code ec;
  if (!fs::is_regular_file(staging / kUploadRecordFile, ec)) return names;
  try {
    const json r = json::parse(read_text(staging / kUploadRecordFile));
    // A record of another prefix (a --checkpoint-dir used for two) owns nothing here.
    if (r.value("destination", "") != remote::parse_s3_prefix(destination).url("")) return names;
    for (const auto& [name, v] : r.at("uploaded").items()) names.push_back(name);
    for (const auto& n : r.value("finishing", json::array())) names.push_back(n.get<std::string>());
    // Shards a checkpoint covers may be sent (or half-recorded) when the run is killed.
    if (fs::is_regular_file(staging / kCheckpointFile, ec)) {
      const format::Checkpoint cp = load_checkpoint(staging / kCheckpointFile);  // sealed: ours
      for (const auto& n : cp.writer.shards) names.push_back(n);
    }
  } catch (const std::exception&) {  // unreadable: it names nothing, so nothing is replaced
    names.clear();
  }
  return names;
}

RemoteOutput::RemoteOutput(RemoteOutputSpec spec, const std::string& destination, fs::path staging)
    : spec_(std::move(spec)),
      dest_(remote::parse_s3_prefix(destination)),
      staging_(std::move(staging)) {
  remote::RemoteConfig config = remote::RemoteConfig::from_environment(spec_.endpoint_url);
  if (config.access_key.empty())
    throw remote::RemoteError("cannot write '" + destination +
                              "': no AWS credentials: set AWS_ACCESS_KEY_ID and "
                              "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with a profile in "
                              "~/.aws/credentials");
  client_ = std::make_unique<remote::S3Client>(std::move(config), spec_.stop);
  std::error_code ec;
  if (fs::exists(staging_ / kUploadRecordFile, ec)) {
    try {
      const json r = json::parse(read_text(staging_ / kUploadRecordFile));
      run_id_ = r.at("run").get<std::string>();
      for (const auto& [name, v] : r.at("uploaded").items())
        uploaded_[name] = {format::integer_of<uint64_t>(v.at("size")).value(),
                           v.at("crc32").get<std::string>()};
      resumed_ = true;
    } catch (const std::exception& e) {
      throw FatalError("cannot resume: '" + (staging_ / kUploadRecordFile).string() +
                       "' cannot be read (" + e.what() + "); run again with --overwrite");
    }
  } else {
    run_id_ = new_run_id();
    save_record();
  }
}

RemoteOutput::~RemoteOutput() {
  uploader_.reset();
  if (!locked_) return;
  // Quickly and without the stop request: a stopped run releases its lock too.
  remote::RemoteConfig quick = client_->config();
  quick.retry.max_attempts = 2;
  quick.retry.connect_timeout_s = 2;
  quick.retry.stall_timeout_s = 2;
  try {
    remote::S3Client(quick, nullptr).remove(dest_.url(kRemoteLockObject));
  } catch (const std::exception&) {  // left behind: the next run names it
  }
}

void RemoteOutput::save_record() {
  json up = json::object();
  for (const auto& [name, v] : uploaded_) up[name] = {{"size", v.first}, {"crc32", v.second}};
  json r{{"run", run_id_}, {"destination", dest_.url("")}, {"uploaded", up}};
  // Named before they are sent: a kill during their PUTs leaves objects this record owns.
  if (finishing_) r["finishing"] = {kLabelsFile, kShardListFile, kManifestFile};
  write_file_atomic((staging_ / kUploadRecordFile).string(), r.dump());
}

void RemoteOutput::record_uploaded(const std::string& name, uint64_t size,
                                   const std::string& crc32) {
  std::lock_guard lock(mu_);
  uploaded_[name] = {size, crc32};
  save_record();
}

bool RemoteOutput::begin(const std::vector<std::string>& recorded) {
  const std::string lock_url = dest_.url(kRemoteLockObject);
  std::string command;
  for (const auto& a : spec_.command_line) command += (command.empty() ? "" : " ") + a;
  const std::string record =
      format::lock_record_text(format::this_process_lock_record(command, run_id_));
  // Whose a lock record is: nullopt for this run's own (a killed attempt of it).
  auto other_holder = [&](const std::string& text) -> std::optional<std::string> {
    try {
      const format::LockRecord r = format::parse_lock_record(text);
      if (r.run == run_id_) return std::nullopt;
      return format::holder_description(r);
    } catch (const ParseError&) {
      return std::string("a writer that does not say who it is");
    }
  };
  auto in_use = [&](const std::string& who) {
    return FatalError("'" + dest_.url("") + "' is being written by another tarmac (" + who +
                      "; its lock object " + lock_url +
                      "). Only one run may write a prefix at a time: wait for it to end or "
                      "choose another prefix; if that run no longer runs (it was killed), go "
                      "on with its --resume, or remove the lock: aws s3 rm " +
                      lock_url);
  };
  // A lock that is gone again when read (its run ended between the two requests) is made anew
  // by a conditional PUT, never by a plain one, which could replace a third run's lock.
  constexpr int kLockTries = 5;
  for (int tries = 1;; ++tries) {
    const auto created = client_->create_if_absent(lock_url, record);
    if (created == remote::S3Client::Created::Yes) break;
    if (created == remote::S3Client::Created::Unsupported && !spec_.options.no_lock)
      throw FatalError("the server at " + client_->config().s3_endpoint() +
                       " does not support conditional PUTs (If-None-Match: *; it answered "
                       "NotImplemented), so tarmac cannot make sure it is the only writer of '" +
                       dest_.url("") +
                       "': pass --no-lock if nothing else writes there (the lock object is "
                       "then checked and written, but not atomically)");
    const auto text = client_->get(lock_url, 64 << 10);
    if (text) {
      if (const auto who = other_holder(*text)) throw in_use(*who);
    } else if (created == remote::S3Client::Created::Exists) {
      if (tries < kLockTries) continue;
      throw FatalError("the lock object " + lock_url + " was made and removed again " +
                       std::to_string(kLockTries) +
                       " times while tarmac tried to take it: other runs are starting and "
                       "ending there; wait for them, or choose another prefix");
    }
    // this run's own lock (a killed attempt of it), or --no-lock on a server without
    // conditional PUTs: written over
    client_->put(lock_url, record, "");
    break;
  }
  locked_ = true;
  const std::string manifest_url = dest_.url(kManifestFile);
  const bool has_manifest = client_->head(manifest_url).exists;
  const bool finishing =
      std::find(recorded.begin(), recorded.end(), kManifestFile) != recorded.end();
  if (has_manifest) {
    // Only this run's finish uploads a manifest while it holds the lock (--overwrite removes
    // the old one first): on --resume, one found is this run's, complete, if its record says
    // it had begun its last uploads (or there is no interrupted run: nothing to do); else it
    // is not tarmac's, refused below.
    if (spec_.resume && (!resumed_ || finishing)) return true;
    if (!spec_.overwrite)
      throw FatalError("'" + dest_.url("") + "' holds a dataset (" + manifest_url +
                       "): choose another prefix, or pass --overwrite to replace it (the "
                       "objects its manifest lists are removed first)");
  }
  // What tarmac owns under the prefix: the old dataset's objects by its own manifest, and
  // those an interrupted run of this checkpoint folder recorded; never anything by pattern.
  std::set<std::string> owned(recorded.begin(), recorded.end());
  for (const auto& [name, v] : uploaded_) owned.insert(name);
  std::vector<std::string> old_dataset;
  if (has_manifest && !spec_.resume) {
    const auto text = client_->get(manifest_url);
    old_dataset = {kManifestFile, kLabelsFile, kShardListFile};
    try {
      if (text)
        for (auto& n : manifest_shard_names(parse_manifest(*text)))
          old_dataset.push_back(std::move(n));
    } catch (const ParseError& e) {
      throw FatalError("--overwrite: the dataset at '" + dest_.url("") +
                       "' has a manifest tarmac cannot read (" + e.what() +
                       "), so it cannot tell which objects are its own and removes none; "
                       "remove the old dataset yourself, or choose another prefix");
    }
    owned.insert(old_dataset.begin(), old_dataset.end());
  }
  refuse_foreign_objects(owned);
  if (!spec_.overwrite || resumed_) return false;  // a resumed run keeps what it sent
  // The manifest first, so that from here on the prefix does not look complete; then the rest
  // of the old dataset, and what an interrupted run had sent (shards a shorter new run would
  // not replace).
  if (has_manifest) client_->remove(manifest_url);
  for (const auto& n : owned)
    if (n != kManifestFile) client_->remove(dest_.url(n));
  return false;
}

std::optional<std::string> RemoteOutput::manifest_text() {
  return client_->get(dest_.url(kManifestFile), size_t{1} << 30);
}

void RemoteOutput::refuse_foreign_objects(const std::set<std::string>& owned) {
  std::vector<std::string> foreign, colliding;
  for (const auto& [url, size] : remote::list_objects(dest_.url(""), client_->config())) {
    const std::string name = url.substr(dest_.url("").size());
    if (name == kRemoteLockObject || owned.contains(name)) continue;
    foreign.push_back(url);
    // A name the new dataset may be written under: refused whatever the flags, as a local
    // output's file named so is.
    if (is_shard_name(name) || name == kLabelsFile || name == kManifestFile ||
        name == kShardListFile)
      colliding.push_back(url);
  }
  auto some = [](const std::vector<std::string>& urls) {
    std::string s;
    for (size_t i = 0; i < urls.size() && i < 5; ++i) s += (i ? ", " : "") + urls[i];
    if (urls.size() > 5) s += " and " + std::to_string(urls.size() - 5) + " more";
    return s;
  };
  // A plain run writes only where nothing is (an interrupted run's own objects aside), as a
  // plain local run needs an empty directory; --resume goes on where its run left objects.
  if (!foreign.empty() && !spec_.overwrite && !spec_.resume)
    throw FatalError("'" + dest_.url("") + "' holds " + std::to_string(foreign.size()) +
                     " object(s) tarmac did not write (no dataset's manifest, checkpoint or "
                     "upload record names them): " +
                     some(foreign) +
                     ". Choose another prefix, or pass --overwrite to write the dataset beside "
                     "them (it replaces or removes only an old dataset's own objects)");
  if (!colliding.empty())
    throw FatalError("'" + dest_.url("") + "' holds " + some(colliding) +
                     ", which no dataset there lists as its own; --overwrite replaces only an "
                     "old dataset's objects. Move it away (aws s3 mv), or choose another prefix");
}

std::vector<std::string> RemoteOutput::check_uploaded(const format::CheckpointWriter& w) {
  const auto& names = w.shards;
  const auto& sizes = w.shard_sizes;
  const auto& crcs = w.shard_crcs;
  std::vector<std::string> done;
  for (size_t i = 0; i < sizes.size() && i < names.size() && i < crcs.size(); ++i) {
    const std::string url = dest_.url(names[i]), crc = crc32_hex(crcs[i]);
    const remote::ObjectInfo info = client_->head(url);
    const bool same = info.exists && info.size == sizes[i] && info.crc32 == crc;
    if (uploaded_.contains(names[i])) {
      if (!same)
        throw FatalError("cannot resume: '" + url + "' was uploaded by the interrupted run (" +
                         std::to_string(sizes[i]) + " bytes, CRC-32 " + crc +
                         ") but the server now has " +
                         (info.exists ? std::to_string(info.size) + " bytes, CRC-32 " +
                                            (info.crc32.empty() ? "not recorded" : info.crc32)
                                      : std::string("no such object")) +
                         ", and its local copy is gone: run again with --overwrite");
      done.push_back(names[i]);
      continue;
    }
    std::error_code ec;
    if (same) {  // sent before the kill, not yet recorded
      record_uploaded(names[i], sizes[i], crc);
      fs::remove(staging_ / names[i], ec);
      client_->counts().skipped.fetch_add(1);
      done.push_back(names[i]);
    }
  }
  return done;
}

void RemoteOutput::start(const DatasetWriter&) {
  uploader_ = std::make_unique<remote::ObjectUploader>(
      *client_, spec_.options.multipart_size, kMaxPendingShards,
      [this](const remote::ObjectUploader::Job& j) {
        std::error_code ec;
        const uint64_t size = fs::file_size(j.path, ec);
        const std::string name = fs::path(j.path).filename().string();
        record_uploaded(name, size, j.crc32);
        std::lock_guard lock(mu_);
        // Confirmed: the local copy is not needed any more, unless no checkpoint covers the
        // shard closed (the last, closed by finish()): a --resume cuts that one back and
        // writes its end again.
        if (!keep_local_.contains(name)) fs::remove(j.path, ec);
      });
}

bool RemoteOutput::already_sent(const std::string& name, uint64_t size, const std::string& crc32) {
  // A shard closed after the last checkpoint may have been sent by a killed attempt of this
  // run; it is written again the same, which the size and CRC-32 confirm.
  std::lock_guard lock(mu_);
  const auto it = uploaded_.find(name);
  return it != uploaded_.end() && it->second.first == size && it->second.second == crc32;
}

void RemoteOutput::queue_closed(const DatasetWriter& writer) {
  while (queued_ < writer.closed_shards()) {
    const std::string& name = writer.shard_names()[queued_];
    if (!already_sent(name, writer.shard_sizes()[queued_],
                      crc32_hex(writer.shard_crcs()[queued_]))) {
      const bool queued = uploader_->push(
          {(staging_ / name).string(), dest_.url(name), crc32_hex(writer.shard_crcs()[queued_])},
          [this] { return !(spec_.stop && spec_.stop->requested()); });
      if (!queued) return;  // stopping: the shard stays local for --resume
    }
    ++queued_;
  }
  check();
}

void RemoteOutput::check() const {
  // An upload a stop request cut short is no failure: the shard is sent again on --resume.
  if (uploader_ && !(spec_.stop && spec_.stop->requested())) uploader_->check();
}

void RemoteOutput::publish(const DatasetWriter& writer, const std::function<void()>& wait_tick) {
  while (queued_ < writer.closed_shards()) {
    const std::string& name = writer.shard_names()[queued_];
    {
      std::lock_guard lock(mu_);
      keep_local_.insert(name);
    }
    if (!already_sent(name, writer.shard_sizes()[queued_], crc32_hex(writer.shard_crcs()[queued_])))
      uploader_->push(
          {(staging_ / name).string(), dest_.url(name), crc32_hex(writer.shard_crcs()[queued_])},
          [&] {
            wait_tick();
            return true;
          });
    ++queued_;
  }
  uploader_->drain(wait_tick);
  {
    std::lock_guard lock(mu_);
    finishing_ = true;
    save_record();
  }
  // The last files, in order: the manifest, which says the dataset is complete, last of all.
  for (const char* name : {kLabelsFile, kShardListFile, kManifestFile}) {
    const fs::path path = staging_ / name;
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    const std::string crc = file_crc32(path), url = dest_.url(name);
    if (resumed_ && name != std::string(kManifestFile)) {  // sent before a kill?
      const remote::ObjectInfo info = client_->head(url);
      if (info.exists && info.size == fs::file_size(path, ec) && info.crc32 == crc) {
        client_->counts().skipped.fetch_add(1);
        continue;
      }
    }
    wait_tick();
    client_->put_file(url, path.string(), crc, spec_.options.multipart_size);
  }
  client_->remove(dest_.url(kRemoteLockObject));
  locked_ = false;
}

void RemoteOutput::count(ConvertResult& r) const {
  const remote::UploadCounts& c = client_->counts();
  r.uploaded_objects = c.objects.load();
  r.uploaded_multipart = c.multipart.load();
  r.uploaded_bytes = c.bytes.load();
  r.upload_retries = c.retries.load();
  r.upload_skipped = c.skipped.load();
}

}  // namespace tarmac
