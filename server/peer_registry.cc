#include "server/peer_registry.h"

#include <chrono>
#include <filesystem>

#include "checkpoint/layout.h"

namespace ps::server {

PeerRegistry::PeerRegistry(std::string checkpoint_dir, uint32_t shard_id,
                           uint32_t num_shards,
                           protocol::ControlClient::Options client)
    : dir_(checkpoint::JoinPath(checkpoint_dir, "servers")),
      shard_id_(shard_id),
      num_shards_(num_shards),
      client_(std::move(client)) {
  for (uint32_t k = 0; k < num_shards; ++k) {
    links_.push_back(std::make_unique<Link>());
  }
}

std::string PeerRegistry::RecordPath(uint32_t shard) const {
  return checkpoint::JoinPath(dir_, "shard-" + std::to_string(shard));
}

Status PeerRegistry::Publish(const std::string& control_address,
                             uint64_t instance) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return IOError("cannot create " + dir_ + ": " + ec.message());
  proto::ServerRecord r;
  r.set_shard_id(shard_id_);
  r.set_num_shards(num_shards_);
  r.set_control_address(control_address);
  r.set_instance(instance);
  r.set_started_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
  return checkpoint::WriteFramedFile(RecordPath(shard_id_),
                                     r.SerializeAsString());
}

StatusOr<proto::ServerRecord> PeerRegistry::ReadRecord(uint32_t shard) const {
  PS_ASSIGN_OR_RETURN(std::string payload,
                      checkpoint::ReadFramedFile(RecordPath(shard)));
  proto::ServerRecord r;
  if (!r.ParseFromString(payload) || r.shard_id() != shard) {
    return Corruption(RecordPath(shard) + " is not shard " +
                      std::to_string(shard) + "'s record");
  }
  if (r.num_shards() != num_shards_) {
    // A server of another cluster layout (an earlier run): not up yet.
    return NotFound(RecordPath(shard) + " is from a cluster of " +
                    std::to_string(r.num_shards()) + " shards");
  }
  return r;
}

StatusOr<proto::CheckpointReply> PeerRegistry::Ask(
    uint32_t shard, const proto::CheckpointRequest& request) {
  if (shard >= num_shards_ || shard == shard_id_) {
    return InvalidArgument("no peer shard " + std::to_string(shard));
  }
  Link& link = *links_[shard];
  std::lock_guard<std::mutex> lock(link.mu);
  if (!link.client) {
    // Re-read every time a link is (re)made: the shard may have restarted
    // at another address.
    PS_ASSIGN_OR_RETURN(proto::ServerRecord r, ReadRecord(shard));
    auto c = protocol::ControlClient::Connect(r.control_address(), client_);
    if (!c.ok()) {
      return c.status().WithContext("shard " + std::to_string(shard));
    }
    link.client.emplace(std::move(*c));
  }
  proto::ControlRequest req;
  *req.mutable_checkpoint() = request;
  const std::string address = link.client->address();
  auto reply = link.client->Call(req);
  if (!reply.ok()) link.client.reset();
  if (!reply.ok()) {
    return reply.status().WithContext("shard " + std::to_string(shard));
  }
  if (reply->checkpoint().server_shard() != shard) {
    // A stale record whose address another server took since.
    link.client.reset();
    return NotFound("shard " + std::to_string(shard) + ": " + address +
                    " is shard " +
                    std::to_string(reply->checkpoint().server_shard()) +
                    " now (a stale record)");
  }
  return reply->checkpoint();
}

}  // namespace ps::server
