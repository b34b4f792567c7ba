// Checkpointer (server/checkpoint/checkpointer.h): options, life and stop, and
// the cut: the copy of the shard's tables that a background writer thread takes
// to disk (checkpointer_write.cc), and how shard 0 records each checkpoint's
// end. Restore, the wait for the other shards' parts and the control requests
// have their own files (checkpointer_*.cc).
#include "server/checkpoint/checkpointer.h"

#include <glog/logging.h>

#include <mutex>

#include "server/checkpoint/checkpointer_internal.h"

namespace ps::server {

namespace ck = ps::checkpoint;
using checkpointer_internal::Clock;
using checkpointer_internal::kMaxCutStep;
using checkpointer_internal::kPartsKept;
using checkpointer_internal::Reply;

Status ValidateCheckpointOptions(const CheckpointOptions& o) {
  if (o.dir.empty()) {
    if (o.every_steps || o.every_secs) {
      return InvalidArgument(
          "--checkpoint_every_steps/--checkpoint_every_secs need "
          "--checkpoint_dir");
    }
    if (o.restore_from == "latest" || o.restore_from == "best") {
      return InvalidArgument("--restore_from=" + o.restore_from +
                             " needs --checkpoint_dir");
    }
  }
  if (!o.restore_from.empty() && o.restore_from != "latest" &&
      o.restore_from != "best" &&
      o.restore_from.find('/') == std::string::npos) {
    return InvalidArgument(
        "--restore_from must be 'latest', 'best' or a checkpoint "
        "directory path, not '" +
        o.restore_from + "'");
  }
  if (o.full_every == 0) {
    return InvalidArgument("--checkpoint_full_every must be at least 1");
  }
  if (o.timeout_ms <= 0) {
    return InvalidArgument("--timeout_ms must be positive");
  }
  return Status::OK();
}

Checkpointer::Checkpointer(CheckpointOptions options, Shard* shard,
                           PeerRegistry* peers, uint64_t instance)
    : options_(std::move(options)),
      shard_(shard),
      peers_(peers),
      instance_(instance),
      last_cut_time_(Clock::now()) {
  if (!options_.dir.empty()) writer_ = std::thread([this] { WriterLoop(); });
}

Checkpointer::~Checkpointer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = stopping_ = aborted_ = true;
    cv_.notify_all();
  }
  if (writer_.joinable()) writer_.join();
}

void Checkpointer::BeginStop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  cv_.notify_all();
}

void Checkpointer::Abort() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = aborted_ = true;
  cv_.notify_all();
}

bool Checkpointer::stopping() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_;
}

StatusOr<ck::ShardSnapshot> Checkpointer::Copy() const {
  ck::ShardSnapshot snap;
  snap.shard_id = shard_->shard_id();
  snap.num_shards = shard_->num_shards();
  for (const auto& t : shard_->tables()) {
    ck::TableSnapshot s;
    s.spec = t->spec();
    PS_RETURN_IF_ERROR(t->table().Snapshot(&s));
    snap.tables.push_back(std::move(s));
  }
  return snap;
}

void Checkpointer::SetPart(uint64_t step, Reply::PartState state,
                           std::string error) {
  std::lock_guard<std::mutex> lock(mu_);
  Part& p = parts_[step];
  p.state = state;
  p.error = std::move(error);
  while (parts_.size() > kPartsKept) parts_.erase(parts_.begin());
}

StatusOr<double> Checkpointer::Cut(uint64_t step, bool with_positions) {
  return CutLocked(step, with_positions, /*final_checkpoint=*/false);
}

StatusOr<double> Checkpointer::CutLocked(uint64_t step, bool with_positions,
                                         bool final_checkpoint) {
  if (options_.dir.empty()) {
    return InvalidArgument("this server has no --checkpoint_dir");
  }
  std::lock_guard<std::mutex> cut(cut_mu_);
  {
    // The previous checkpoint must be on disk before the next copy (its
    // copy is the next one's baseline, and memory holds two at most).
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] {
      return (queue_.empty() && !writing_) || aborted_ ||
             (stopping_ && !final_checkpoint);
    });
    if (aborted_ || (stopping_ && !final_checkpoint)) {
      return Cancelled("server shard " + std::to_string(shard_->shard_id()) +
                       " is stopping: no cut at step " + std::to_string(step));
    }
    if (step <= last_cut_step_ || step >= kMaxCutStep) {
      return InvalidArgument("checkpoint step " + std::to_string(step) +
                             " is not after the last cut (step " +
                             std::to_string(last_cut_step_) + ")");
    }
  }
  const auto start = Clock::now();
  Job job;
  PS_ASSIGN_OR_RETURN(job.snapshot, Copy());
  job.pause_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  job.snapshot.step = step;
  SetPart(step, Reply::WRITING);
  std::lock_guard<std::mutex> lock(mu_);
  if (with_positions) {
    auto p = positions_.find(step);
    if (p != positions_.end()) {
      for (auto& [w, pos] : p->second) job.positions.push_back(pos);
    }
  }
  positions_.erase(positions_.begin(), positions_.upper_bound(step));
  due_.erase(due_.begin(), due_.upper_bound(step));
  last_cut_step_ = step;
  last_cut_time_ = Clock::now();
  const double pause = job.pause_ms;
  queue_.push_back(std::move(job));
  cv_.notify_all();
  return pause;
}

void Checkpointer::WriterLoop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    Write(std::move(job));
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    cv_.notify_all();
  }
}

void Checkpointer::Settle(uint64_t step, const Status& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  Outcomes& o = outcomes_;
  o.last_step = step;
  o.last_failed = !outcome.ok();
  o.last_error = outcome.ok() ? "" : outcome.ToString();
  o.consecutive_failures = outcome.ok() ? 0 : o.consecutive_failures + 1;
  if (outcome.ok()) o.newest_complete_step = step;
}

void Checkpointer::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && !writing_; });
}

void Checkpointer::Finish() {
  if (!options_.dir.empty() && options_.final_on_stop) {
    uint64_t step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      step = last_cut_step_ + 1;
    }
    LOG(INFO) << "final checkpoint (step " << step << ", no worker positions)";
    auto c = CutLocked(step, /*with_positions=*/false,
                       /*final_checkpoint=*/true);
    if (!c.ok()) LOG(ERROR) << "final checkpoint: " << c.status();
  }
  WaitIdle();
}

Checkpointer::Progress Checkpointer::progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  Progress p;
  p.last_cut_step = last_cut_step_;
  if (restored_) p.restored_step = restored_manifest_.step();
  return p;
}

}  // namespace ps::server
