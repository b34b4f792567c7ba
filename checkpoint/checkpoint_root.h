// CheckCheckpointRoot: whether a directory can hold checkpoints, checked once
// at startup (ps_server's --checkpoint_dir), so that a mistyped flag fails
// with a message naming the path instead of at the first checkpoint, hours
// into training, or never (a write into /proc or /sys that "succeeds").
#pragma once

#include <string>

#include "base/status.h"

namespace ps::checkpoint {

// Makes sure `path` is a writable directory on a real filesystem, creating
// it (and its parents) when missing. Refuses, with a message naming the path
// and the reason:
//   kInvalidArgument  an empty path; a path that exists (or has an ancestor
//                     that exists) and is not a directory; a path on a
//                     pseudo filesystem (proc, sysfs, devpts, cgroup,
//                     debugfs, tracefs, ...), which cannot hold files;
//   kIOError          a directory that cannot be created, or that this
//                     process cannot write (probed by creating and removing
//                     a file in it).
// Leaves nothing behind in an existing directory. Safe to call from several
// processes on the same path at once.
Status CheckCheckpointRoot(const std::string& path);

}  // namespace ps::checkpoint
