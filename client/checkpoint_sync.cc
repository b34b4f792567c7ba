#include "client/checkpoint_sync.h"

#include <algorithm>

namespace ps::worker {

StatusOr<std::unique_ptr<CheckpointSync>> CheckpointSync::Create(
    PsClient* client) {
  if (client == nullptr) return InvalidArgument("no PsClient");
  std::unique_ptr<CheckpointSync> s(new CheckpointSync(client));
  PS_ASSIGN_OR_RETURN(proto::CheckpointReply info, s->Info());
  s->every_steps_ = info.every_steps();
  s->every_secs_ = info.every_secs();
  s->servers_checkpoint_ = info.has_dir();
  return s;
}

StatusOr<proto::CheckpointReply> CheckpointSync::Call(
    uint32_t shard, const proto::CheckpointRequest& r) {
  proto::ControlRequest req;
  *req.mutable_checkpoint() = r;
  PS_ASSIGN_OR_RETURN(proto::ControlReply reply,
                      client_->CallServer(shard, req));
  return reply.checkpoint();
}

StatusOr<proto::CheckpointReply> CheckpointSync::Info() {
  proto::CheckpointRequest r;
  r.set_action(proto::CheckpointRequest::INFO);
  r.set_worker_id(client_->worker_id());
  return Call(0, r);
}

StatusOr<bool> CheckpointSync::Due(uint64_t step) {
  if (every_steps_ > 0 && step % every_steps_ == 0) return true;
  if (every_secs_ == 0) return false;
  proto::CheckpointRequest r;
  r.set_action(proto::CheckpointRequest::DUE);
  r.set_step(step);
  r.set_worker_id(client_->worker_id());
  PS_ASSIGN_OR_RETURN(proto::CheckpointReply reply, Call(0, r));
  return reply.due();
}

StatusOr<CheckpointResult> CheckpointSync::Checkpoint(
    uint64_t step, uint64_t epoch, uint64_t examples_consumed) {
  return Pause(step, epoch, examples_consumed, /*cut=*/true, nullptr);
}

StatusOr<bool> CheckpointSync::EvalPoint(
    uint64_t step, uint64_t epoch, uint64_t examples_consumed, bool cut,
    const std::function<StatusOr<EvalOutcome>()>& evaluate,
    CheckpointResult* result) {
  const bool evaluator = client_->worker_id() == 0;
  bool stop = false;
  auto at_cut = [&]() -> Status {
    StatusOr<EvalOutcome> o = evaluate();
    proto::CheckpointRequest r;
    r.set_action(proto::CheckpointRequest::EVALUATED);
    r.set_step(step);
    r.set_worker_id(0);
    r.set_cut(cut);
    // A failed eval still stops the others, which would otherwise wait at
    // the next eval point for a worker 0 that is gone.
    r.set_stop(!o.ok() || o->stop);
    if (o.ok()) {
      r.set_best(o->best);
      r.set_eval_logloss(o->logloss);
      r.set_eval_auc(o->auc);
      r.set_eval_ne(o->ne);
    }
    auto told = Call(0, r);
    PS_RETURN_IF_ERROR(o.status());
    PS_RETURN_IF_ERROR(told.status().WithContext("early stop verdict"));
    stop = o->stop;
    return Status::OK();
  };
  PS_ASSIGN_OR_RETURN(
      CheckpointResult c,
      Pause(step, epoch, examples_consumed, cut,
            evaluator ? std::function<Status()>(at_cut) : nullptr));
  if (result != nullptr) *result = c;
  if (evaluator) return stop;
  proto::CheckpointRequest q;
  q.set_action(proto::CheckpointRequest::STOP_QUERY);
  q.set_step(step);
  q.set_worker_id(client_->worker_id());
  PS_ASSIGN_OR_RETURN(proto::CheckpointReply reply, Call(0, q));
  return reply.stop();
}

StatusOr<CheckpointResult> CheckpointSync::Pause(
    uint64_t step, uint64_t epoch, uint64_t examples_consumed, bool cut,
    const std::function<Status()>& at_cut) {
  PS_RETURN_IF_ERROR(client_->WaitApplied());
  CheckpointResult result;
  if (!cut) {
    PS_RETURN_IF_ERROR(client_->Barrier());
    Status s = at_cut ? at_cut() : Status::OK();
    // Release the others before reporting.
    Status released = client_->Barrier();
    PS_RETURN_IF_ERROR(s);
    PS_RETURN_IF_ERROR(released);
    return result;
  }
  proto::CheckpointRequest pos;
  pos.set_action(proto::CheckpointRequest::POSITION);
  pos.set_step(step);
  pos.set_worker_id(client_->worker_id());
  pos.set_epoch(epoch);
  pos.set_examples_consumed(examples_consumed);
  PS_ASSIGN_OR_RETURN(proto::CheckpointReply at, Call(0, pos));
  result.previous_step = at.previous_step();
  result.previous_failed = at.previous_failed();
  result.previous_error = at.previous_error();
  result.consecutive_failures = at.consecutive_failures();
  result.newest_complete_step = at.newest_complete_step();
  // Nobody pushes between the two barriers: the cut is at this step.
  PS_RETURN_IF_ERROR(client_->Barrier());
  if (client_->worker_id() == 0) {
    proto::CheckpointRequest cut;
    cut.set_action(proto::CheckpointRequest::CUT);
    cut.set_step(step);
    cut.set_worker_id(0);
    const uint32_t shards = client_->num_servers();
    for (uint32_t k = 0; k < shards; ++k) {
      auto r = Call(k, cut);
      if (!r.ok()) {
        // Release the others before reporting.
        (void)client_->Barrier();
        return r.status().WithContext("checkpoint cut on shard " +
                                      std::to_string(k));
      }
      result.copy_ms = std::max(result.copy_ms, r->cut_pause_ms());
    }
  }
  if (at_cut) {
    Status s = at_cut();
    if (!s.ok()) {
      (void)client_->Barrier();
      return s;
    }
  }
  PS_RETURN_IF_ERROR(client_->Barrier());
  return result;
}

}  // namespace ps::worker
