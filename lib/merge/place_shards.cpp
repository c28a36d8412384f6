// Placing the parts' shards in the merge's staging directory (merge_internal.h): each hard-linked
// (or copied) under its new name, numbered on from the parts before it, and checked to be the
// part's own regular file, whole; its CRC-32 taken from the part's manifest or computed.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/stop.h"
#include "format/manifest.h"
#include "format/names.h"
#include "merge/merge_internal.h"
#include "write/manifest_file.h"

namespace tarmac::merge_detail {
namespace fs = std::filesystem;
using namespace format;

// Places part shard `from` in the staging directory as `to`: a hard link, or a copy. Only a
// part's own regular file: a symbolic link could bring any file of the machine into the
// dataset (a hard link to the link itself, or a copy of what it points to). The placed file
// is checked again (regular, the size the part's annotation file needs), so that a file
// swapped for a link in between is caught too.
bool place_shard(const std::string& part, const fs::path& from, const fs::path& to, bool copy,
                 uint64_t needed) {
  std::error_code ec;
  const auto refuse = [&](const std::string& why) {
    return FatalError("part '" + part + "': shard '" + from.filename().string() + "' " + why +
                      "; the merge stopped and wrote nothing (run 'tarmac verify " + part + "')");
  };
  if (fs::symlink_status(from, ec).type() != fs::file_type::regular)
    throw refuse(
        "is not a regular file (a symbolic link, or missing): merge takes only the parts' own "
        "files; put the file itself there, or convert the part again");
  bool linked = false;
  if (!copy) {
    fs::create_hard_link(from, to, ec);
    linked = !ec;
  }
  if (!linked) {
    ec.clear();
    fs::copy_file(from, to, ec);
    if (ec)
      throw FatalError("cannot copy shard '" + from.string() + "' to '" + to.string() +
                       "': " + ec.message());
  }
  if (fs::symlink_status(to, ec).type() != fs::file_type::regular)
    throw refuse("changed into a link while it was being merged");
  const uint64_t size = fs::file_size(to, ec);
  if (ec || size < needed || size % 512 != 0)
    throw refuse("is " + std::to_string(size) + " bytes, not a whole tar holding the " +
                 std::to_string(needed) + " bytes its samples' records need");
  return linked;
}

// The bytes each shard of part `p` must hold: the end of its last stored blob.
std::vector<uint64_t> shard_bytes_needed(const Part& p) {
  std::vector<uint64_t> needed(p.a.shards().size(), 0);
  for (size_t k = 0; k < p.a.blob_kinds().size(); ++k)
    for (uint64_t i = 0; i < p.a.size(); ++i) {
      const auto b = p.a.blob(k, i);
      if (b.shard >= 0 && static_cast<size_t>(b.shard) < needed.size() && b.offset >= 0 &&
          b.size >= 0)
        needed[static_cast<size_t>(b.shard)] =
            std::max(needed[static_cast<size_t>(b.shard)],
                     static_cast<uint64_t>(b.offset) + static_cast<uint64_t>(b.size));
    }
  return needed;
}

// Hard-links (or copies) every part's shards into the staging directory, renumbered in order,
// checking each (place_shard); counts samples and blob bytes. Throws FatalError (Interrupted on
// a stop request) with the staging directory left for the caller to remove.
PlacedShards place_shards(const MergeOptions& o, const PartSet& set, const fs::path& staging,
                          MergeResult& result) {
  PlacedShards placed;
  for (const auto& p : set.all) {
    if (p->a.size() > 0 || p.get() == set.sampled[0])
      placed.base.push_back(static_cast<int32_t>(placed.names.size()));
    const format::Manifest& m = p->manifest;
    const size_t first_shard = placed.samples.size();
    placed.samples.resize(first_shard + p->a.shards().size(), 0);
    if (!p->a.blob_kinds().empty())
      for (uint64_t i = 0; i < p->a.size(); ++i) {
        const int32_t s = p->a.blob(0, i).shard;  // checked by the part's validation
        if (s >= 0 && static_cast<size_t>(s) < p->a.shards().size())
          ++placed.samples[first_shard + static_cast<size_t>(s)];
      }
    const std::vector<uint64_t> needed = shard_bytes_needed(*p);
    for (size_t s = 0; s < p->a.shards().size(); ++s) {
      throw_if_stopped(o.stop);
      const std::string name = shard_name(placed.names.size());
      const fs::path from = fs::path(p->path) / p->a.shards()[s];
      if (place_shard(p->path, from, staging / name, o.copy, needed[s]))
        ++result.linked;
      else
        ++result.copied;
      placed.names.push_back(name);
      // The part's manifest knows each shard's CRC-32; computed when it does not.
      std::string crc;
      if (m.shards && s < m.shards->size() && (*m.shards)[s].name == p->a.shards()[s])
        crc = (*m.shards)[s].crc32;
      if (crc.empty()) crc = crc32_hex(file_crc32((staging / name).string()));
      placed.manifest.push_back({name, fs::file_size(staging / name), crc});
    }
    result.samples += p->a.size();
    for (size_t k = 0; k < p->a.blob_kinds().size(); ++k)
      for (uint64_t i = 0; i < p->a.size(); ++i)
        result.image_bytes += static_cast<uint64_t>(p->a.blob(k, i).size);
  }
  result.shards = placed.names.size();
  return placed;
}

}  // namespace tarmac::merge_detail
