#include "worker/train/checkpoint_gate.h"

namespace ps::train {

bool CheckpointGate::Take(const std::function<StatusOr<size_t>()>& next,
                          Taken* taken) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stop_ || pending_cut_ == 0; });
  if (stop_) return false;
  *taken = Taken();
  taken->got = next();
  if (taken->got.ok() && *taken->got > 0) {
    taken->step = ++taken_;
    StatusOr<bool> due = due_(taken->step);
    if (!due.ok()) {
      taken->got = due.status();
    } else if (*due) {
      pending_cut_ = taken->step;
      taken->cut_after = true;
    }
  }
  return true;
}

Status CheckpointGate::End(const Taken& taken, uint32_t epoch,
                           const std::function<uint64_t()>& consumed,
                           bool* stopped) {
  *stopped = false;
  std::unique_lock<std::mutex> lock(mu_);
  ++ended_;
  cv_.notify_all();
  if (!taken.cut_after) return Status::OK();
  // Every earlier step ended and no later one started: the data position
  // is exactly that of the steps up to this one.
  cv_.wait(lock, [&] { return stop_ || ended_ == taken.step; });
  if (stop_) {
    *stopped = true;
    return Status::OK();
  }
  const uint64_t position = consumed();
  lock.unlock();
  Status s = checkpoint_(taken.step, epoch, position);
  lock.lock();
  pending_cut_ = 0;
  cv_.notify_all();
  return s;
}

void CheckpointGate::Wake() {
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

}  // namespace ps::train
