// The process's own resources, read from /proc/self at scrape time, under
// the names Prometheus' client libraries use: process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_threads, process_start_time_seconds.
// Thread-safe (reads files only).
#pragma once

#include "metrics/registry.h"

namespace ps::metrics {

void AddProcessCollector(Registry* registry);

}  // namespace ps::metrics
