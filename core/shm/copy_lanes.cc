#include "core/shm/copy_lanes.h"

#include <glog/logging.h>
#include <immintrin.h>

#include <chrono>

namespace ps::xfer::internal {
namespace {

// How long an idle helper keeps looking for the next job before it sleeps:
// longer than the gap between two writes of a stream of them, short enough
// that an idle context costs nothing.
constexpr auto kHelperSpin = std::chrono::microseconds(200);

inline void Pause() { _mm_pause(); }

}  // namespace

CopyLanes::CopyLanes(int helpers) {
  CHECK(helpers >= 1 && helpers <= kMaxHelpers) << helpers;
  helpers_.reserve(helpers);
  for (int i = 0; i < helpers; ++i)
    helpers_.emplace_back([this] { HelperLoop(); });
}

CopyLanes::~CopyLanes() {
  stop_.store(true);
  wake_.fetch_add(1);
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

bool CopyLanes::Run(size_t chunks, const ChunkFn& chunk, Status* status) {
  CHECK(chunks <= kMaxChunks) << chunks;
  if (!run_mu_.try_lock()) return false;
  std::lock_guard<std::mutex> hold(run_mu_, std::adopt_lock);
  failed_.store(false, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(failure_mu_);
    failure_ = Status::OK();
  }
  finished_.store(0, std::memory_order_relaxed);
  fn_.store(&chunk, std::memory_order_relaxed);
  const uint64_t generation =
      ((job_.load(std::memory_order_relaxed) >> kGenerationShift) + 1) &
      ((uint64_t{1} << (64 - kGenerationShift)) - 1);
  // Release: a helper that takes a chunk of this job sees fn_ and the rest.
  job_.store(generation << kGenerationShift | uint64_t{chunks} << kCountShift,
             std::memory_order_release);
  wake_.fetch_add(1);
  if (sleepers_.load() > 0) wake_.notify_all();
  Work(generation);
  // Every chunk is taken; wait for those a helper still copies. Briefly
  // spinning, then asleep: a helper the scheduler set aside may need this
  // core, and an idle core is where the kernel moves it soonest.
  for (int spins = 0; spins < 4096; ++spins) {
    if (finished_.load(std::memory_order_acquire) == chunks) break;
    Pause();
  }
  caller_waiting_.store(true);
  for (uint32_t done = finished_.load(); done < chunks;
       done = finished_.load()) {
    finished_.wait(done);
  }
  caller_waiting_.store(false, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(failure_mu_);
  *status = failure_;
  return true;
}

bool CopyLanes::Take(uint64_t generation, size_t* index, size_t* count) {
  uint64_t word = job_.load(std::memory_order_acquire);
  for (;;) {
    if (word >> kGenerationShift != generation) return false;
    *count = (word >> kCountShift) & kFieldMask;
    const uint64_t next = word & kFieldMask;
    if (next >= *count) return false;
    if (job_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                   std::memory_order_acquire)) {
      *index = next;
      return true;
    }
  }
}

void CopyLanes::Work(uint64_t generation) {
  size_t index = 0, count = 0;
  while (Take(generation, &index, &count)) {
    // After a failure the chunks left are counted, not copied.
    if (!failed_.load(std::memory_order_relaxed)) {
      Status s = (*fn_.load(std::memory_order_relaxed))(index);
      if (!s.ok()) RecordFailure(std::move(s));
    }
    const uint32_t done = finished_.fetch_add(1) + 1;
    if (done == count && caller_waiting_.load()) {
      finished_.notify_one();
    }
  }
}

void CopyLanes::RecordFailure(Status s) {
  std::lock_guard<std::mutex> lock(failure_mu_);
  if (failure_.ok()) failure_ = std::move(s);
  failed_.store(true, std::memory_order_relaxed);
}

void CopyLanes::HelperLoop() {
  using Clock = std::chrono::steady_clock;
  auto idle_since = Clock::now();
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint64_t word = job_.load(std::memory_order_acquire);
    if ((word & kFieldMask) < ((word >> kCountShift) & kFieldMask)) {
      Work(word >> kGenerationShift);
      idle_since = Clock::now();
      continue;
    }
    if (Clock::now() - idle_since < kHelperSpin) {
      for (int i = 0; i < 64; ++i) Pause();
      continue;
    }
    // Sleep until the next job. Registered first, then the job looked at
    // again: a Run that bumps wake_ after this load sees the sleeper and
    // wakes it; one before it left its job visible to the look.
    sleepers_.fetch_add(1);
    const uint32_t seen = wake_.load();
    const uint64_t again = job_.load(std::memory_order_acquire);
    if ((again & kFieldMask) >= ((again >> kCountShift) & kFieldMask) &&
        !stop_.load()) {
      wake_.wait(seen);
    }
    sleepers_.fetch_sub(1);
    idle_since = Clock::now();
  }
}

}  // namespace ps::xfer::internal
