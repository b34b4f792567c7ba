// TableCounters: what a table reports about its rows beyond applies (which
// the server counts itself): admission, eviction and the disk tier of keyed
// tables. A plain value type, additive over tables.
#pragma once

#include <cstdint>

namespace ps::table {

struct TableCounters {
  uint64_t rows = 0;               // keys that hold a row now
  uint64_t evicted = 0;            // rows freed by age or for room
  uint64_t admission_pending = 0;  // keys pushed, not yet admitted
  uint64_t dropped_pushes = 0;     // key pushes not applied (not admitted)
  uint64_t refused_full = 0;       // admissions refused: shard at capacity
  // With a disk tier (EXACT tables, when_full: WHEN_FULL_MOVE_TO_DISK):
  uint64_t rows_on_disk = 0;        // keys whose row is on disk now
  uint64_t demoted = 0;             // rows moved to disk for room
  uint64_t promoted = 0;            // rows brought back from disk
  uint64_t disk_bytes_written = 0;  // of rows moved to disk
  uint64_t disk_bytes_read = 0;     // of rows read from disk
  // Keys of pulls and pushes found in memory, and found on disk (read from
  // there): the tier's hits and misses (keys in neither are new).
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;

  TableCounters& operator+=(const TableCounters& o) {
    rows += o.rows;
    evicted += o.evicted;
    admission_pending += o.admission_pending;
    dropped_pushes += o.dropped_pushes;
    refused_full += o.refused_full;
    rows_on_disk += o.rows_on_disk;
    demoted += o.demoted;
    promoted += o.promoted;
    disk_bytes_written += o.disk_bytes_written;
    disk_bytes_read += o.disk_bytes_read;
    memory_hits += o.memory_hits;
    disk_hits += o.disk_hits;
    return *this;
  }
};

}  // namespace ps::table
