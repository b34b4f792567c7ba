// Peak resident memory of processes on this host, for the benchmarks that
// report what a worker and its servers needed: the kernel's high-water mark
// of the resident set (VmHWM in /proc/PID/status), which counts the shared
// memory a process touched (a server's registered table region, and on shm
// the rows a worker read out of it) as well as its own heap. And the bytes
// a process read from storage (a server's disk tier).
//
// Thread-safety: free functions without state; safe from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "base/status_or.h"

namespace ps::bench {

// VmHWM of process `pid` (0: this process), in KiB. kNotFound when the
// process is gone or not visible, kCorruption when the line is missing.
StatusOr<uint64_t> PeakRssKib(pid_t pid);
// VmRSS of process `pid` (0: this process), in KiB: its resident set now.
StatusOr<uint64_t> RssKib(pid_t pid);

// read_bytes of /proc/PID/io: what process `pid` caused to be read from
// storage (not the page cache). kNotFound / kCorruption as above.
StatusOr<uint64_t> StorageReadBytes(pid_t pid);

// The pid in a pid file such as ps_launch's RUN_DIR/server-<i>.pid (one
// decimal number and a newline). kNotFound / kInvalidArgument naming `path`.
StatusOr<pid_t> ReadPidFile(const std::string& path);

}  // namespace ps::bench
