// Checkpointer::Handle: the control requests of checkpoints (INFO, DUE,
// POSITION, CUT, PART, RESTORE, and early stopping's EVALUATED and
// STOP_QUERY), from workers and the other shards.
#include <mutex>

#include "server/checkpoint/checkpointer.h"
#include "server/checkpoint/checkpointer_internal.h"

namespace ps::server {

namespace ck = ps::checkpoint;
using checkpointer_internal::Clock;
using checkpointer_internal::kMaxPendingSteps;
using checkpointer_internal::Reply;

StatusOr<proto::CheckpointReply> Checkpointer::Handle(
    const proto::CheckpointRequest& r, int64_t worker_id) {
  Reply reply;
  reply.set_every_steps(options_.every_steps);
  reply.set_every_secs(options_.every_secs);
  reply.set_server_instance(instance_);
  reply.set_server_shard(shard_->shard_id());
  reply.set_has_dir(!options_.dir.empty());
  switch (r.action()) {
    case proto::CheckpointRequest::INFO: {
      std::lock_guard<std::mutex> lock(mu_);
      if (restored_) {
        reply.set_restored(true);
        reply.set_restored_step(restored_manifest_.step());
        reply.set_restored_from(restored_from_);
        for (const auto& w : restored_manifest_.workers()) {
          if (w.worker_id() != r.worker_id()) continue;
          reply.set_epoch(w.epoch());
          reply.set_examples_consumed(w.examples_consumed());
        }
      }
      return reply;
    }
    case proto::CheckpointRequest::DUE: {
      if (worker_id < 0) {
        return InvalidArgument("DUE needs a worker's hello first");
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (options_.every_secs > 0 && due_.size() >= kMaxPendingSteps &&
          !due_.count(r.step())) {
        return ResourceExhausted("too many pending DUE steps");
      }
      bool due =
          options_.every_steps > 0 && r.step() % options_.every_steps == 0;
      if (options_.every_secs > 0) {
        // The first worker to ask about a step decides for all of them.
        auto [it, inserted] = due_.emplace(r.step(), false);
        if (inserted) {
          it->second = Clock::now() - last_cut_time_ >=
                       std::chrono::seconds(options_.every_secs);
        }
        due = due || it->second;
      }
      reply.set_due(due && !options_.dir.empty());
      return reply;
    }
    case proto::CheckpointRequest::POSITION: {
      if (worker_id < 0) {
        return InvalidArgument("POSITION needs a worker's hello first");
      }
      ck::proto::WorkerPosition p;
      p.set_worker_id(static_cast<uint32_t>(worker_id));
      p.set_step(r.step());
      p.set_epoch(r.epoch());
      p.set_examples_consumed(r.examples_consumed());
      // Wait until the previous checkpoint ended, so that every worker
      // gets the same account of it (the cut would wait for it anyway).
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock,
               [this] { return (queue_.empty() && !writing_) || stopping_; });
      if (stopping_) return Cancelled("the server is stopping");
      if (r.step() <= last_cut_step_ ||
          (positions_.size() >= kMaxPendingSteps &&
           !positions_.count(r.step()))) {
        return InvalidArgument("POSITION for step " + std::to_string(r.step()) +
                               ", which is not after the last cut (step " +
                               std::to_string(last_cut_step_) +
                               ") or too far ahead");
      }
      positions_[r.step()][p.worker_id()] = p;
      reply.set_previous_step(outcomes_.last_step);
      reply.set_previous_failed(outcomes_.last_failed);
      reply.set_previous_error(outcomes_.last_error);
      reply.set_consecutive_failures(outcomes_.consecutive_failures);
      reply.set_newest_complete_step(outcomes_.newest_complete_step);
      return reply;
    }
    case proto::CheckpointRequest::CUT: {
      // Only the worker that drives the cut may take one: an anonymous cut
      // would make shard 0 wait for parts no other shard writes.
      if (worker_id != 0) {
        return InvalidArgument(
            "CUT is worker 0's request (after its hello), not this "
            "connection's");
      }
      PS_ASSIGN_OR_RETURN(double pause, Cut(r.step(), true));
      reply.set_cut_pause_ms(pause);
      return reply;
    }
    case proto::CheckpointRequest::PART: {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = parts_.find(r.step());
      reply.set_part(it == parts_.end() ? Reply::NOT_CUT : it->second.state);
      if (it != parts_.end()) reply.set_part_error(it->second.error);
      return reply;
    }
    case proto::CheckpointRequest::RESTORE: {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = verdicts_.find(r.step());
      // Heard: the asker got this shard's verdict, not "still loading".
      if (it != verdicts_.end() && r.from_shard() < shard_->num_shards() &&
          r.from_shard() != shard_->shard_id() &&
          askers_.size() < kMaxPendingSteps) {
        askers_.insert({r.from_shard(), r.step()});
        cv_.notify_all();
      }
      if (it != verdicts_.end()) {
        reply.set_verdict(it->second.verdict());
        reply.set_verdict_error(it->second.verdict_error());
      }
      return reply;
    }
    case proto::CheckpointRequest::EVALUATED:
      return Evaluated(r, worker_id);
    case proto::CheckpointRequest::STOP_QUERY: {
      std::lock_guard<std::mutex> lock(mu_);
      reply.set_stop(stop_step_ != 0 && r.step() >= stop_step_);
      return reply;
    }
    default:
      return InvalidArgument("unknown checkpoint action " +
                             std::to_string(r.action()));
  }
}

}  // namespace ps::server
