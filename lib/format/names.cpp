#include "format/names.h"

#include <cstdio>

#include "format/shard_list.h"

namespace tarmac::format {

std::string blob_tensor(std::string_view kind, BlobColumn column) {
  return std::string(kind) + "." + kBlobColumns[column].suffix;
}

std::string values_tensor(std::string_view column) {
  return std::string(column) + ".values";
}

std::string offsets_tensor(std::string_view column) {
  return std::string(column) + ".offsets";
}

std::string valid_tensor(std::string_view column) {
  return std::string(column) + ".valid";
}

std::string dense_blob_kind(std::string_view suffix) {
  const size_t dot = suffix.rfind('.');
  return "__" + std::string(dot == std::string_view::npos ? suffix : suffix.substr(0, dot)) + "__";
}

bool is_npy_dense(std::string_view suffix) {
  return suffix == "npy" || suffix.ends_with(".npy");
}

std::string shard_name(size_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%06zu.tar", index);
  return name;
}

bool is_shard_name(std::string_view name) {
  return name.size() >= 16 && name.starts_with("shard-") && name.ends_with(".tar") &&
         name.find_first_not_of("0123456789", 6) == name.size() - 4;
}

bool is_valid_shard_entry(std::string_view name) {
  return !name.empty() && name[0] != '.' && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

std::string_view encoding_name(StoredEncoding e) {
  switch (e) {
    case StoredEncoding::Jpeg:
      return "jpg";
    case StoredEncoding::Png:
      return "png";
    case StoredEncoding::Webp:
      return "webp";
    case StoredEncoding::Raw:
      return "rgb";
    case StoredEncoding::Source:
      return "source";
    case StoredEncoding::Npy:
      return "npy";
  }
  return "?";
}

std::optional<StoredEncoding> encoding_from_name(std::string_view name) {
  for (StoredEncoding e : {StoredEncoding::Jpeg, StoredEncoding::Png, StoredEncoding::Webp,
                           StoredEncoding::Raw, StoredEncoding::Source, StoredEncoding::Npy})
    if (encoding_name(e) == name) return e;
  return std::nullopt;
}

bool is_staging_file_name(std::string_view name) {
  for (const char* n :
       {kCheckpointFile, kLabelsFile, kManifestFile, kShardListFile, kSpillFile, kSkippedLog,
        kIgnoredLog, kDuplicatesLog, kDedupIndexFile, kUploadRecordFile})
    if (name == n) return true;
  if (is_shard_name(name)) return true;
  // FILE.tmp: one of those on its way to its name (write_file_atomic), cut short by a kill.
  constexpr std::string_view kTmp = ".tmp";
  return name.size() > kTmp.size() && name.ends_with(kTmp) &&
         is_staging_file_name(name.substr(0, name.size() - kTmp.size()));
}

}  // namespace tarmac::format
