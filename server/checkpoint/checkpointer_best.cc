// Checkpointer's part in early stopping (server/checkpoint/checkpointer.h):
// worker 0's verdict at an eval point, and the best checkpoint's mark.
#include <glog/logging.h>

#include <chrono>
#include <mutex>

#include "checkpoint/best_marker.h"
#include "checkpoint/layout.h"
#include "server/checkpoint/checkpointer.h"
#include "server/checkpoint/checkpointer_internal.h"

namespace ps::server {

namespace ck = ps::checkpoint;
using checkpointer_internal::Reply;

StatusOr<proto::CheckpointReply> Checkpointer::Evaluated(
    const proto::CheckpointRequest& r, int64_t worker_id) {
  // Worker 0 drives the cut, so it is the one that evaluates there.
  if (worker_id != 0) {
    return InvalidArgument(
        "EVALUATED is worker 0's request (after its hello), not this "
        "connection's");
  }
  if (shard_->shard_id() != 0) {
    return InvalidArgument("EVALUATED goes to shard 0");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.stop() && (stop_step_ == 0 || r.step() < stop_step_)) {
      stop_step_ = r.step();
    }
    if (r.best() && r.cut() && !options_.dir.empty()) {
      ck::proto::BestMarker& m = pending_best_;
      m.set_step(r.step());
      m.set_eval_logloss(r.eval_logloss());
      m.set_eval_auc(r.eval_auc());
      m.set_eval_ne(r.eval_ne());
    }
  }
  MarkBestIfComplete();
  Reply reply;
  reply.set_server_instance(instance_);
  reply.set_server_shard(shard_->shard_id());
  return reply;
}

void Checkpointer::MarkBestIfComplete(uint64_t abandoned) {
  if (options_.dir.empty()) return;
  std::lock_guard<std::mutex> marking(mark_mu_);
  ck::proto::BestMarker m;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_best_.step() == 0) return;
    if (pending_best_.step() == abandoned) {
      LOG(WARNING) << "the checkpoint of the best eval point (step "
                   << abandoned
                   << ") did not complete: the previous best stays marked";
      pending_best_.Clear();
      return;
    }
    m = pending_best_;
  }
  const std::string dir =
      ck::JoinPath(options_.dir, ck::CheckpointDirName(m.step()));
  // Not committed yet: the commit calls again.
  if (!ck::ReadManifest(dir).ok()) return;
  m.set_marked_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
  Status s = ck::WriteBestMarker(options_.dir, m);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_best_.step() == m.step()) pending_best_.Clear();
  }
  if (!s.ok()) {
    LOG(ERROR) << "marking " << dir << " as the best checkpoint: " << s;
    return;
  }
  LOG(INFO) << "checkpoint " << dir << " is the best so far (eval logloss "
            << m.eval_logloss() << ", AUC " << m.eval_auc()
            << "): kept past retention (--restore_from=best)";
}

}  // namespace ps::server
