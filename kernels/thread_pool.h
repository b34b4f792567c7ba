// ThreadPool: a fixed set of worker threads that kernels borrow to split a
// loop. Kernels never create threads of their own; the caller passes a pool
// (or nullptr, meaning "run on the calling thread").
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ps::kernels {

class ThreadPool {
 public:
  // `threads` >= 1 counts the calling thread: a pool of 1 starts no threads.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Splits [0, n) into at most size() contiguous chunks of at least
  // `min_chunk` items and runs fn(begin, end, chunk_index) on each, the
  // calling thread taking one. Returns when all chunks are done. Not
  // reentrant: one ParallelFor at a time per pool.
  void ParallelFor(size_t n, size_t min_chunk,
                   const std::function<void(size_t, size_t, int)>& fn);

 private:
  void WorkerLoop(int index);

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(size_t, size_t, int)>* job_ = nullptr;
  size_t job_n_ = 0;
  int job_chunks_ = 0;
  size_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// Runs fn over [0, n) on `pool`, or inline as one chunk when pool is null.
void ParallelFor(ThreadPool* pool, size_t n, size_t min_chunk,
                 const std::function<void(size_t, size_t, int)>& fn);

}  // namespace ps::kernels
