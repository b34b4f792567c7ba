// ListPlainFolder: the files of a folder that must hold nothing but regular
// files, such as the folder of a table's rows on disk in a checkpoint,
// which a reader opens on a manifest's word (checkpoint/shard_scan.h) and a
// restore links into a server's own disk tier (table/cold_row_store.h): a
// symbolic link there could point a reader, or the links, anywhere.
//
// Thread-safe (a free function; the folder may change meanwhile, and a
// caller that must not follow links opens what it lists with care).
#pragma once

#include <string>
#include <vector>

#include "base/status_or.h"

namespace ps {

// The names of the files in `dir`, sorted. kCorruption naming the path when
// `dir` is not a directory itself (a symbolic link to one is not) or holds
// anything but regular files (links, folders, devices); kNotFound when it
// does not exist; kIOError when it cannot be listed.
StatusOr<std::vector<std::string>> ListPlainFolder(const std::string& dir);

}  // namespace ps
