#include "kernels/thread_pool.h"

#include <algorithm>

namespace ps::kernels {
namespace {

// Chunk `c` of `chunks` over [0, n): contiguous, sizes differ by at most one.
std::pair<size_t, size_t> ChunkRange(size_t n, int chunks, int c) {
  size_t base = n / chunks, extra = n % chunks;
  size_t begin = c * base + std::min<size_t>(c, extra);
  return {begin, begin + base + (static_cast<size_t>(c) < extra ? 1 : 0)};
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(
    size_t n, size_t min_chunk,
    const std::function<void(size_t, size_t, int)>& fn) {
  if (n == 0) return;
  size_t max_chunks = std::max<size_t>(1, n / std::max<size_t>(min_chunk, 1));
  int chunks = static_cast<int>(std::min<size_t>(size(), max_chunks));
  if (chunks == 1) {
    fn(0, n, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  work_cv_.notify_all();
  auto [begin, end] = ChunkRange(n, chunks, 0);
  fn(begin, end, 0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  size_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= job_chunks_) continue;
    const auto* fn = job_;
    auto [begin, end] = ChunkRange(job_n_, job_chunks_, index);
    lock.unlock();
    (*fn)(begin, end, index);
    lock.lock();
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

void ParallelFor(ThreadPool* pool, size_t n, size_t min_chunk,
                 const std::function<void(size_t, size_t, int)>& fn) {
  if (pool == nullptr) {
    if (n > 0) fn(0, n, 0);
    return;
  }
  pool->ParallelFor(n, min_chunk, fn);
}

}  // namespace ps::kernels
