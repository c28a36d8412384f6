#pragma once
// The --table wherever it is: a local file (table/table.h reads it), or an s3:// or http(s)://
// object or a pipe:COMMAND's output, read whole into memory (at most TableOptions::max_bytes)
// and parsed as a local table is. A remote table is downloaded with the retries and Range
// resumes of remote inputs (remote/fetch.h), its size checked by HEAD first.
#include <string>

#include "common/stop.h"
#include "remote/remote_config.h"
#include "table/table.h"

namespace tarmac {

/// True for a table that is no local file (s3://, http(s)://, pipe:): it has no modification
/// time, so a resume knows it by its size and CRC-32.
bool table_is_remote_or_pipe(const std::string& path);

/// Reads and parses the table `path` names; `remote` is used for s3:// and http(s):// (null:
/// from the environment). Throws FatalError naming the table and why (RemoteError: the URL and
/// the server's error code).
Table read_table(const std::string& path, const TableOptions& options,
                 const remote::RemoteConfig* remote, const StopRequest* stop);

}  // namespace tarmac
