// CheckpointGate: keeps a worker's training threads in step order around
// checkpoints. With checkpoints, batches are taken from the data one at a
// time (parsing included) and numbered; when checkpoint_due says that step
// S is followed by a checkpoint, no later batch is taken until every step
// up to S ended and the checkpoint was taken, so the cut holds exactly the
// batches of steps <= S and the data position is exactly theirs.
//
// Thread-safe: the training threads call Take and End concurrently.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::train {

class CheckpointGate {
 public:
  using DueFn = std::function<StatusOr<bool>(uint64_t step)>;
  using CheckpointFn =
      std::function<Status(uint64_t step, uint32_t epoch, uint64_t consumed)>;

  // Steps are numbered from start_step + 1. `stop` ends every wait; Wake
  // must be called after setting it.
  CheckpointGate(uint64_t start_step, DueFn due, CheckpointFn checkpoint,
                 const std::atomic<bool>& stop)
      : due_(std::move(due)),
        checkpoint_(std::move(checkpoint)),
        stop_(stop),
        taken_(start_step),
        ended_(start_step) {}

  // What Take got: next()'s result and, for a batch, its step and whether
  // a checkpoint follows it.
  struct Taken {
    StatusOr<size_t> got = size_t{0};
    uint64_t step = 0;
    bool cut_after = false;
  };
  // Waits until no checkpoint is pending, then takes a batch with next()
  // (which returns its size; 0 at the end of the data) and numbers it.
  // False when the run stopped while waiting.
  bool Take(const std::function<StatusOr<size_t>()>& next, Taken* taken);

  // Step `taken.step` ended. With cut_after: waits until every earlier step
  // ended, takes the checkpoint at the data position consumed() and lets
  // the next batch be taken. *stopped: the run stopped while waiting.
  Status End(const Taken& taken, uint32_t epoch,
             const std::function<uint64_t()>& consumed, bool* stopped);

  // Wakes the waiting threads (the run stopped).
  void Wake();

 private:
  const DueFn due_;
  const CheckpointFn checkpoint_;
  const std::atomic<bool>& stop_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t taken_, ended_;    // steps taken from the data, steps ended
  uint64_t pending_cut_ = 0;  // the due step that holds back the next batch
};

}  // namespace ps::train
