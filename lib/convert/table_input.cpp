#include "convert/table_input.h"

#include <new>
#include <vector>

#include "common/bytes.h"
#include "common/error.h"
#include "common/printable.h"
#include "remote/fetch.h"
#include "remote/http.h"
#include "remote/url.h"
#include "source/pipe_stream.h"

namespace tarmac {
namespace {

std::string over_limit(const std::string& path, uint64_t size, uint64_t limit) {
  return "table " + path + ": " + format_bytes(size) + ", over the limit of " +
         format_bytes(limit) + " for a table (--max-table-size raises it)";
}

// A table held whole in memory that memory did not hold (the bound is larger than the
// machine's memory, or an address-space limit is lower): the table, how far it got, the bound.
[[noreturn]] void out_of_memory(const std::string& path, uint64_t read, uint64_t limit) {
  throw FatalError("out of memory reading table '" + printable(path) + "' into memory after " +
                   format_bytes(read) + " (its bound, --max-table-size, is " + format_bytes(limit) +
                   "): lower --max-table-size to refuse it sooner, or free memory");
}

std::vector<uint8_t> download_table(const std::string& path, uint64_t limit,
                                    const remote::RemoteConfig& config, const StopRequest* stop) {
  try {
    const remote::Target target = remote::target_for(path, config);
    // HEAD first: a missing table is one line before anything is read, and one too large is
    // refused before it is downloaded (a URL that refuses HEAD is read all the same).
    const remote::Response head = remote::head_object(target, config);
    if (head.status < 300 && head.content_length && *head.content_length > limit)
      throw FatalError(over_limit(path, *head.content_length, limit));
    // the GET must give the HEAD's size: a shorter table would be a dataset with rows missing
    try {
      return remote::download_to_memory(
          target, config, limit, stop,
          head.status < 300 ? head.content_length : std::optional<uint64_t>());
    } catch (const std::bad_alloc&) {
      out_of_memory(path, head.content_length.value_or(0), limit);
    }
  } catch (const remote::RemoteError& e) {
    throw remote::RemoteError(std::string("--table: ") + e.what(), e.http_status());
  }
}

std::vector<uint8_t> run_table_command(const std::string& path, uint64_t limit,
                                       const StopRequest* stop) {
  PipeStream in(path, stop);
  std::vector<uint8_t> out;
  std::vector<uint8_t> buf(1 << 20);
  for (size_t n; (n = in.read(buf.data(), buf.size())) > 0;) {
    // An endless command (pipe:yes) stops here, its group killed as `in` goes.
    if (out.size() + n > limit)
      throw FatalError("table '" + printable(path) + "': the command's output passed " +
                       format_bytes(limit) +
                       ", the limit for a table (--max-table-size raises it), and was cut off "
                       "there; check that the command ends");
    try {
      out.insert(out.end(), buf.data(), buf.data() + n);
    } catch (const std::bad_alloc&) {
      out_of_memory(path, out.size(), limit);
    }
  }
  return out;
}

}  // namespace

bool table_is_remote_or_pipe(const std::string& path) {
  return remote::is_remote(path) || is_pipe(path);
}

Table read_table(const std::string& path, const TableOptions& options,
                 const remote::RemoteConfig* remote, const StopRequest* stop) {
  if (is_pipe(path))
    return parse_table(path, run_table_command(path, options.max_bytes, stop), options);
  if (!remote::is_remote(path)) return load_table(path, options);
  const remote::RemoteConfig config = remote ? *remote : remote::RemoteConfig::from_environment();
  return parse_table(path, download_table(path, options.max_bytes, config, stop), options);
}

}  // namespace tarmac
