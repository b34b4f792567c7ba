// TableCounters: what a table reports about its rows beyond applies (which
// the server counts itself): admission and eviction of keyed tables. A
// plain value type, additive over tables.
#pragma once

#include <cstdint>

namespace ps::table {

struct TableCounters {
  uint64_t rows = 0;               // keys that hold a row now
  uint64_t evicted = 0;            // rows freed by age or for room
  uint64_t admission_pending = 0;  // keys pushed, not yet admitted
  uint64_t dropped_pushes = 0;     // key pushes not applied (not admitted)
  uint64_t refused_full = 0;       // admissions refused: shard at capacity

  TableCounters& operator+=(const TableCounters& o) {
    rows += o.rows;
    evicted += o.evicted;
    admission_pending += o.admission_pending;
    dropped_pushes += o.dropped_pushes;
    refused_full += o.refused_full;
    return *this;
  }
};

}  // namespace ps::table
