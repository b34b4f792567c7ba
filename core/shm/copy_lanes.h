// CopyLanes: helper threads that copy parts of one large same-host write
// alongside the thread that issued it. One core cannot saturate memory: on
// a strided source (a KV cache's head slices, 1 KiB out of every 2 KiB) one
// thread moves about 14.5 GB/s here where two move about 19, because each
// core has only so many cache misses in flight. ContextOptions::copy_threads
// asks for them; the shm transport hands each operation of at least
// kParallelCopyBytes to Run.
//
// A job is cut into chunks that the caller and the helpers take from one
// counter, so a helper the scheduler has set aside delays the job by at most
// the chunk it holds, and the caller copies whatever no helper took. One job
// runs at a time: a second thread's Run while one is in progress returns
// false at once and that thread copies alone, so callers never queue behind
// each other. Helpers spin for a while after each job (a stream of 1 MiB
// writes keeps them awake) and then sleep on a futex.
//
// Thread-safe: Run may be called from any number of threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"

namespace ps::xfer::internal {

// Operations at least this large (all segments together) are shared out.
inline constexpr size_t kParallelCopyBytes = 512 * 1024;
// Bytes of one chunk: ~4 us of copying, small enough to balance the lanes,
// large enough that taking one costs nothing by comparison.
inline constexpr size_t kCopyChunkBytes = 64 * 1024;

class CopyLanes {
 public:
  // Copies a job's chunk `index`; a failure stops the job (chunks not yet
  // taken are skipped) and the first one is what Run returns.
  using ChunkFn = std::function<Status(size_t index)>;

  // Starts `helpers` threads (1 .. kMaxHelpers).
  explicit CopyLanes(int helpers);
  ~CopyLanes();  // stops and joins the helpers
  CopyLanes(const CopyLanes&) = delete;
  CopyLanes& operator=(const CopyLanes&) = delete;

  // Runs chunk(0 .. chunks - 1) on this thread and the helpers and returns
  // once every chunk taken has finished, with the first failure. Returns
  // false (nothing run) when another thread's job holds the lanes.
  // chunks < 2^20.
  bool Run(size_t chunks, const ChunkFn& chunk, Status* status);

  static constexpr int kMaxHelpers = 63;
  static constexpr size_t kMaxChunks = (size_t{1} << 20) - 1;

 private:
  // The job word: generation (24 bits) | chunk count (20) | next chunk (20).
  // One word, so a helper can take a chunk only of the job it woke for.
  static constexpr int kCountShift = 20;
  static constexpr int kGenerationShift = 40;
  static constexpr uint64_t kFieldMask = (uint64_t{1} << 20) - 1;

  void HelperLoop();
  // Takes chunks of generation `generation` until none is left; false once
  // the job word has moved on.
  void Work(uint64_t generation);
  // Takes the next chunk of `generation`'s job (of *count), or returns
  // false.
  bool Take(uint64_t generation, size_t* index, size_t* count);
  void RecordFailure(Status s);

  std::mutex run_mu_;  // one job at a time: held by Run, try_lock'ed
  std::atomic<uint64_t> job_{0};
  std::atomic<const ChunkFn*> fn_{nullptr};
  std::atomic<uint32_t> finished_{0};  // chunks of the current job done
  // Run sleeps on finished_; the helper that finishes the last chunk wakes it.
  std::atomic<bool> caller_waiting_{false};
  std::atomic<bool> failed_{false};
  std::mutex failure_mu_;
  Status failure_;  // guarded by failure_mu_

  // Helpers sleep on wake_ (bumped for every job) once `sleepers_` says so.
  std::atomic<uint32_t> wake_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> helpers_;
};

}  // namespace ps::xfer::internal
