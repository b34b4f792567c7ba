// PeerRegistry: how the servers of one cluster find and ask each other.
//
// The servers share one thing, the checkpoint folder; each publishes its
// control address there when it starts (<checkpoint_dir>/servers/shard-<k>,
// a framed ServerRecord, checkpoint/layout.h) and reaches shard j by reading
// j's record and calling it on the control channel, with the cluster secret
// and a deadline. That is how shard 0 learns, within --timeout_ms, that a
// shard whose part of a checkpoint it waits for is lost, failed, or never
// got the cut; and how restoring shards agree on one checkpoint.
//
// A record may be stale (a server from an earlier run): the reply names its
// instance, and a caller that sees the instance change knows the shard
// restarted.
//
// Thread-safe: one call per shard at a time (each shard's link has a lock).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "protocol/control_channel.h"
#include "protocol/ps.pb.h"

namespace ps::server {

class PeerRegistry {
 public:
  PeerRegistry(std::string checkpoint_dir, uint32_t shard_id,
               uint32_t num_shards, protocol::ControlClient::Options client);

  // Writes this server's record (atomically; replaces an older one).
  Status Publish(const std::string& control_address, uint64_t instance);

  // Asks shard `shard` (not this one). kNotFound: it has no record yet (or
  // a stale one); kNetwork / kPeerLost: nobody listens at its address (it
  // is down); kTimeout: it did not answer within the client's timeout (keep
  // it short: callers ask again and add the silence up); otherwise its
  // answer or its error.
  StatusOr<proto::CheckpointReply> Ask(uint32_t shard,
                                       const proto::CheckpointRequest& request);

  uint32_t shard_id() const { return shard_id_; }
  uint32_t num_shards() const { return num_shards_; }

 private:
  struct Link {
    std::mutex mu;
    std::optional<protocol::ControlClient> client;  // mu
  };
  std::string RecordPath(uint32_t shard) const;
  StatusOr<proto::ServerRecord> ReadRecord(uint32_t shard) const;

  const std::string dir_;  // <checkpoint_dir>/servers
  const uint32_t shard_id_;
  const uint32_t num_shards_;
  const protocol::ControlClient::Options client_;
  std::vector<std::unique_ptr<Link>> links_;  // by shard
};

}  // namespace ps::server
