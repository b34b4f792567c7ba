// SharedPool: the client's few threads for hashing and copying in large
// calls, shared by all tables. One call uses them at a time; a call that
// finds them busy runs on its own thread instead of waiting for them.
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>

#include "kernels/thread_pool.h"

namespace ps::worker {

class SharedPool {
 public:
  // `threads` counts the calling thread (kernels::ThreadPool).
  explicit SharedPool(int threads) : pool_(threads) {}

  int size() const { return pool_.size(); }

  // Runs fn(begin, end, chunk) over [0, n) in chunks of at least `min_chunk`
  // on the pool and returns true when the pool is free; returns false, having
  // run nothing, when another call holds it.
  bool TryParallelFor(size_t n, size_t min_chunk,
                      const std::function<void(size_t, size_t, int)>& fn) {
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    pool_.ParallelFor(n, min_chunk, fn);
    return true;
  }

  // Runs fn(part) for every part in [0, parts): on the pool, a contiguous
  // share of the parts per thread, when it is free; else one after the
  // other on the calling thread. Either way every part runs exactly once,
  // so callers may split work into parts up front.
  void ForEachPart(size_t parts, const std::function<void(size_t)>& fn) {
    if (parts > 1 && TryParallelFor(parts, 1, [&](size_t b, size_t e, int) {
          for (size_t p = b; p < e; ++p) fn(p);
        })) {
      return;
    }
    for (size_t p = 0; p < parts; ++p) fn(p);
  }

 private:
  std::mutex mu_;  // one user at a time (ThreadPool is not reentrant)
  kernels::ThreadPool pool_;
};

}  // namespace ps::worker
