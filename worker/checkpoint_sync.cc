#include "worker/checkpoint_sync.h"

#include <algorithm>

namespace ps::worker {

StatusOr<std::unique_ptr<CheckpointSync>> CheckpointSync::Connect(
    const std::vector<std::string>& servers, uint32_t worker_id,
    int timeout_ms) {
  if (servers.empty()) return InvalidArgument("no servers");
  std::unique_ptr<CheckpointSync> s(new CheckpointSync);
  s->worker_id_ = worker_id;
  for (const std::string& a : servers) {
    auto c = protocol::ControlClient::Connect(a, timeout_ms);
    if (!c.ok()) return c.status().WithContext("checkpoint sync to " + a);
    s->servers_.push_back(std::move(*c));
  }
  PS_ASSIGN_OR_RETURN(proto::CheckpointReply info, s->Info());
  s->every_steps_ = info.every_steps();
  s->every_secs_ = info.every_secs();
  return s;
}

StatusOr<proto::CheckpointReply> CheckpointSync::Call(
    size_t shard, const proto::CheckpointRequest& r) {
  proto::ControlRequest req;
  *req.mutable_checkpoint() = r;
  PS_ASSIGN_OR_RETURN(proto::ControlReply reply, servers_[shard].Call(req));
  return reply.checkpoint();
}

StatusOr<proto::CheckpointReply> CheckpointSync::Info() {
  proto::CheckpointRequest r;
  r.set_action(proto::CheckpointRequest::INFO);
  r.set_worker_id(worker_id_);
  return Call(0, r);
}

StatusOr<bool> CheckpointSync::Due(uint64_t step) {
  if (every_steps_ > 0 && step % every_steps_ == 0) return true;
  if (every_secs_ == 0) return false;
  proto::CheckpointRequest r;
  r.set_action(proto::CheckpointRequest::DUE);
  r.set_step(step);
  r.set_worker_id(worker_id_);
  PS_ASSIGN_OR_RETURN(proto::CheckpointReply reply, Call(0, r));
  return reply.due();
}

StatusOr<double> CheckpointSync::Checkpoint(PsClient* client, uint64_t step,
                                            uint64_t epoch,
                                            uint64_t examples_consumed) {
  PS_RETURN_IF_ERROR(client->WaitApplied());
  proto::CheckpointRequest pos;
  pos.set_action(proto::CheckpointRequest::POSITION);
  pos.set_step(step);
  pos.set_worker_id(worker_id_);
  pos.set_epoch(epoch);
  pos.set_examples_consumed(examples_consumed);
  PS_RETURN_IF_ERROR(Call(0, pos).status());
  // Nobody pushes between the two barriers: the cut is at this step.
  PS_RETURN_IF_ERROR(client->Barrier());
  double pause = 0;
  if (worker_id_ == 0) {
    proto::CheckpointRequest cut;
    cut.set_action(proto::CheckpointRequest::CUT);
    cut.set_step(step);
    cut.set_worker_id(worker_id_);
    for (size_t k = 0; k < servers_.size(); ++k) {
      auto r = Call(k, cut);
      if (!r.ok()) {
        // Release the others before reporting.
        (void)client->Barrier();
        return r.status().WithContext("checkpoint cut on shard " +
                                      std::to_string(k));
      }
      pause = std::max(pause, r->cut_pause_ms());
    }
  }
  PS_RETURN_IF_ERROR(client->Barrier());
  return pause;
}

}  // namespace ps::worker
