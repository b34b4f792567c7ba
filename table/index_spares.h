// IndexSpares: a thread that makes the arrays the key indexes of a table's
// partitions will grow into, before they need them (RowIndex::SpareWanted).
//
// A partition's index grows under the partition's exclusive lock, and the
// new array's pages are faulted in there: on this project's VM a fresh
// 2 MiB huge page took ~10 ms, and pushes of new keys into a 10M-key table
// stalled 17 ms on average (up to 33) at each partition's growth to 2 MiB.
// A partition nearing a growth asks for its next array here; this thread
// allocates and writes it, off every lock, and hands it back
// (ExactPartition::AdoptIndexSpare), and the growth then only re-files the
// entries. Training steps of 39,000 new keys (ps_bench --mode=train, 500
// steps into one shard, by turns): push p99 13.4-14.4 ms against
// 28.7-30.5, steps/s 109-119 against 101-107; pulls' p99 rose 1-2 ms (this
// thread's page faults take a core meanwhile). What a spare costs is its
// memory, held from the ask until the growth, which the index would take
// at the growth anyway.
//
// Thread-safe: Ask may be called from any thread. The destructor stops the
// thread and drops the asks not yet answered; whatever `deliver` touches
// must outlive this object.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "base/huge_pages.h"
#include "table/row_index.h"

namespace ps::table {

class IndexSpares {
 public:
  using Deliver = std::function<void(RowIndex::Slots spare)>;
  // The arrays it makes: from min_slots to max_slots.
  struct Sizes {
    size_t min_slots;
    size_t max_slots;
  };
  // Arrays of 2 to 8 MiB: from the first on huge pages (whose fresh pages
  // are the costly ones) to where a spare held ahead begins to show in a
  // table's memory (held for 10^8 keys of dim 8, spares of up to 16 MiB
  // added 0.8 bytes a row to the 24 of bench/exact_growth_bench).
  static constexpr Sizes kDefaultSizes = {
      kHugePageBytes / sizeof(uint32_t), 4 * kHugePageBytes / sizeof(uint32_t)};

  explicit IndexSpares(Sizes sizes) : sizes_(sizes) {}
  ~IndexSpares();
  IndexSpares(const IndexSpares&) = delete;
  IndexSpares& operator=(const IndexSpares&) = delete;

  // Whether it makes arrays of `slots`.
  bool Makes(size_t slots) const {
    return slots >= sizes_.min_slots && slots <= sizes_.max_slots;
  }
  // Makes RowIndex::EmptySlots(slots) on this object's thread and calls
  // deliver with it there (an empty array without memory).
  void Ask(size_t slots, Deliver deliver);

 private:
  struct Asked {
    size_t slots;
    Deliver deliver;
  };
  void Run();

  const Sizes sizes_;
  std::mutex mu_;
  std::condition_variable asked_cv_;
  std::deque<Asked> asked_;                // mu_
  bool stop_ = false;                      // mu_
  std::thread thread_{[this] { Run(); }};  // last: starts once all is built
};

}  // namespace ps::table
