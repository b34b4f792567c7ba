// Checkpointer::AwaitParts: shard 0 waits for every other shard's part of
// a checkpoint, asking each how its part stands (PART), and gives up with
// the reason when a shard is down, silent, failed, restarted, or never got
// the cut.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <vector>

#include "checkpoint/layout.h"
#include "server/checkpoint/checkpointer.h"
#include "server/checkpoint/checkpointer_internal.h"

namespace ps::server {

namespace ck = ps::checkpoint;
using checkpointer_internal::Clock;
using checkpointer_internal::kPartPoll;
using checkpointer_internal::kStopGrace;
using checkpointer_internal::Reply;
using checkpointer_internal::Seconds;

Status Checkpointer::AwaitParts(uint64_t step, const std::string& dir) {
  if (peers_ == nullptr) return Status::OK();
  struct Watch {
    uint64_t instance = 0;
    // Since when it has been silent or without the cut.
    std::optional<Clock::time_point> stalled_since;
  };
  std::vector<Watch> watch(shard_->num_shards());
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  proto::CheckpointRequest ask;
  ask.set_action(proto::CheckpointRequest::PART);
  ask.set_step(step);
  ask.set_from_shard(shard_->shard_id());
  auto done = [&](uint32_t j) {
    std::error_code ec;
    return std::filesystem::exists(ck::JoinPath(dir, ck::ShardDoneName(j)), ec);
  };
  for (;;) {
    bool stopping_now, aborted_now;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_now = stopping_;
      aborted_now = aborted_;
    }
    if (aborted_now) return Cancelled("the server is stopping");
    // Once stopping, a shard that is silent or has not cut yet gets a
    // moment, not timeout_ms: the stop must take seconds.
    const auto patience = stopping_now
                              ? std::min<Clock::duration>(timeout, kStopGrace)
                              : Clock::duration(timeout);
    bool missing = false;
    for (uint32_t j = 1; j < shard_->num_shards(); ++j) {
      if (done(j)) continue;
      missing = true;
      const std::string who = "shard " + std::to_string(j);
      const auto asked = Clock::now();
      auto r = peers_->Ask(j, ask);
      if (done(j)) continue;  // written while we asked (and maybe gone since)
      Watch& w = watch[j];
      const auto now = Clock::now();
      // Silent (or without the cut) since the question that found it so.
      auto stalled = [&] {
        if (!w.stalled_since) w.stalled_since = asked;
        return now - *w.stalled_since >= patience;
      };
      if (!r.ok()) {
        const Status& s = r.status();
        // Nobody listens at its address: it is down (a stopping shard
        // keeps listening until its final part is on disk).
        if (s.Is(StatusCode::kNetwork) || s.Is(StatusCode::kPeerLost)) {
          return PeerLost(who + " is down: " + s.ToString());
        }
        if (stalled()) {
          return PeerLost(who + " did not answer for " +
                          Seconds(now - *w.stalled_since) + ": " +
                          s.ToString());
        }
        continue;
      }
      if (w.instance != 0 && r->server_instance() != w.instance) {
        return PeerLost(who + " restarted while its part was awaited");
      }
      w.instance = r->server_instance();
      switch (r->part()) {
        case Reply::FAILED:
          return IOError(who + "'s part failed: " + r->part_error());
        case Reply::NOT_CUT:
          if (stalled()) {
            return Timeout(
                who + " did not receive the cut for step " +
                std::to_string(step) + " within " +
                Seconds(now - *w.stalled_since) +
                (stopping_now ? " (stopping)" : ": was worker 0 lost?"));
          }
          break;
        default:
          w.stalled_since.reset();  // WRITING, or WRITTEN a moment ago
          break;
      }
    }
    if (!missing) return Status::OK();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kPartPoll, [this] { return aborted_; });
  }
}

}  // namespace ps::server
