// Stopping a cluster from its run folder (ps_launch --stop, under
// scripts/stop_cluster.sh): the pid files ps_launch wrote name the
// processes, which may have outlived the launcher (--detach).
//
// Order: a ps_launch still supervising the folder (launch.pid) is asked
// first (SIGTERM: it stops its cluster in order); then the workers, then
// the servers, each group with SIGTERM and SIGKILL for what is still alive
// after the timeout. A pid file whose process is gone, or now runs another
// program (a recycled pid: ours have --num_workers= on their command line),
// is only removed.
//
// Thread-safety: a free function; it sends signals and sleeps.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "base/status_or.h"

namespace ps::launch {

// 0 when everything stopped on SIGTERM, 1 if something had to be killed;
// an error for a folder that cannot be read.
StatusOr<int> StopRunDir(const std::string& run_dir, int timeout_ms,
                         const std::function<void(std::string_view)>& log);

// The newest <dir>/cluster-* folder (names sort by time), or kNotFound.
StatusOr<std::string> NewestRunDir(const std::string& dir);

}  // namespace ps::launch
