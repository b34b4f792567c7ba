#include "client/exact_path.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "client/key_order.h"
#include "client/push_shape.h"
#include "client/sorted_sums.h"
#include "kernels/value_section.h"
#include "protocol/inbox_slot.h"
#include "protocol/key_hash.h"

namespace ps::worker {

Status ExactPath::Push(std::span<const uint64_t> keys,
                       std::span<const float> grads) {
  const uint32_t dim = spec_.dim();
  PS_RETURN_IF_ERROR(CheckPushShape(spec_, keys.size(), grads.size()));
  std::lock_guard<std::mutex> lock(push_mu_);
  const uint32_t shards = servers_.size();
  shards_.resize(shards);
  for (ShardPush& sp : shards_) {
    sp.order.clear();
    sp.keys.clear();  // sums a failed push left unsent
    sp.values.clear();
  }
  // Keys in the order their server files them (by KeyHash) where it takes
  // them so, and sent as their hashes; else by key.
  hash_order_.resize(shards);
  for (uint32_t s = 0; s < shards; ++s) {
    hash_order_[s] = servers_[s].info().keys_in_hash_order();
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint32_t s = router_.map().ShardOfKey(keys[i]);
    shards_[s].order.emplace_back(
        hash_order_[s] ? protocol::KeyHash(keys[i]) : keys[i],
        static_cast<uint32_t>(i));
  }
  protocol::SparsePacketMeta meta;
  meta.table_id = spec_.id();
  meta.sender_id = clock_.worker_id();
  meta.step = clock_.current();
  meta.row_dim = dim;
  meta.value_type = kernels::ValueType::kFp32;
  // The server would refuse a whole packet with a non-finite sum: a push
  // that would send one fails here, before any of it is sent. When no sum
  // can reach infinity (every |gradient| below FLT_MAX / 2n for n
  // gradients), each shard's keys go out run by run as they are sorted, and
  // the server applies the first runs while the rest sorts; else every sum
  // is made and checked first.
  float largest = 0;
  for (const float g : grads) {
    const float a = std::fabs(g);
    if (!(a <= largest)) {  // larger, or NaN
      if (!std::isfinite(a)) return NonFinite();
      largest = a;
    }
  }
  const bool stream =
      largest < std::numeric_limits<float>::max() / 2 / (keys.size() + 1);
  if (!stream) {
    for (ShardPush& sp : shards_) {
      SortByKey(&sp.order, &sort_scratch_);
      AddSums(sp.order, grads, &sp);
      if (!kernels::AllFinite(sp.values.data(), sp.values.size())) {
        return NonFinite();
      }
    }
  }
  for (uint32_t s = 0; s < shards; ++s) {
    ShardPush& sp = shards_[s];
    if (sp.order.empty()) continue;
    meta.shard_id = s;
    meta.index_encoding = hash_order_[s]
                              ? protocol::IndexEncoding::kKeyHashDeltaVarint
                              : protocol::IndexEncoding::kKeyDeltaVarint;
    if (stream) {
      PS_RETURN_IF_ERROR(SortByKey(
          &sp.order, &sort_scratch_, [&](std::span<const KeyPosition> run) {
            AddSums(run, grads, &sp);
            return sp.keys.size() < kStreamKeys ? Status::OK()
                                                : Send(meta, s, &sp);
          }));
    }
    PS_RETURN_IF_ERROR(Send(meta, s, &sp));
  }
  return Status::OK();
}

Status ExactPath::NonFinite() const {
  return InvalidArgument("push to table " + spec_.name() +
                         " carries a non-finite gradient (or sum)");
}

void ExactPath::AddSums(std::span<const KeyPosition> sorted,
                        std::span<const float> grads, ShardPush* sp) const {
  // Sorted by key, then by position: a key's gradients are summed in the
  // order they were given. Read in key order, each is a cache miss: those
  // of the pair kPrefetchAhead on are loaded while this one is added.
  constexpr size_t kPrefetchAhead = 16;
  const uint32_t dim = spec_.dim();
  const float* g = grads.data();
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i + kPrefetchAhead < sorted.size()) {
      __builtin_prefetch(g + size_t{sorted[i + kPrefetchAhead].second} * dim);
    }
    const auto& [key, position] = sorted[i];
    AddToSortedSums(key, g + size_t{position} * dim, dim, &sp->keys,
                    &sp->values);
  }
}

Status ExactPath::Send(const protocol::SparsePacketMeta& meta, uint32_t shard,
                       ShardPush* sp) {
  if (sp->keys.empty()) return Status::OK();
  InboxWriter& inbox = servers_[shard].inbox();
  // Headroom for the slot header's prefix (InboxWriter::WritePackets).
  PS_RETURN_IF_ERROR(protocol::EncodeKeyedPackets(
      meta, sp->keys, sp->values, inbox.max_packet_bytes(), &bytes_, &packets_,
      protocol::InboxSlotHeader::kPrefixBytes));
  PS_RETURN_IF_ERROR(inbox.WritePackets(bytes_, packets_));
  sp->keys.clear();
  sp->values.clear();
  return Status::OK();
}

StatusOr<LookupChannel*> ExactPath::LookupsOf(uint32_t shard) {
  LookupChannel* channel = servers_[shard].lookups();
  if (channel == nullptr) {
    return NotSupported(servers_[shard].name() + " holds EXACT table " +
                        spec_.name() +
                        " but answers no lookups (a server built before "
                        "them: pulls need a server of this build)");
  }
  return channel;
}

Status ExactPath::Pull(std::span<const uint64_t> keys, std::span<float> out) {
  const uint32_t dim = spec_.dim();
  if (out.size() != keys.size() * dim) {
    return InvalidArgument("pull from table " + spec_.name() + ": room for " +
                           std::to_string(out.size()) + " values, need " +
                           std::to_string(keys.size() * dim));
  }
  if (keys.size() > UINT32_MAX) {
    return InvalidArgument("pull of more than 2^32 keys");
  }
  if (keys.empty()) return Status::OK();
  const uint32_t shards = servers_.size();
  if (shards == 1) {
    // Every key is the one server's (it checks): no split, and its rows
    // arrive in the keys' order.
    PS_ASSIGN_OR_RETURN(LookupChannel * channel, LookupsOf(0));
    PS_ASSIGN_OR_RETURN(auto lookup,
                        channel->Begin(spec_.id(), dim, keys, {}, out.data()));
    return LookupChannel::Drive({&lookup, 1});
  }
  std::vector<ShardPull> split(shards);
  for (ShardPull& sp : split) {
    // About a shard's share, so that one pull of many keys grows no vector
    // over and over.
    sp.keys.reserve(keys.size() / shards + keys.size() / (8 * shards) + 16);
    sp.positions.reserve(sp.keys.capacity());
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    ShardPull& sp = split[router_.map().ShardOfKey(keys[i])];
    sp.keys.push_back(keys[i]);
    sp.positions.push_back(static_cast<uint32_t>(i));
  }
  // Every shard's lookup in flight at once, begun in shard order (the
  // channels' rule, client/lookup_channel.h): the servers answer theirs in
  // parallel while this thread places whichever rows arrive.
  std::vector<std::unique_ptr<LookupChannel::Ongoing>> lookups;
  for (uint32_t s = 0; s < shards; ++s) {
    if (split[s].keys.empty()) continue;
    PS_ASSIGN_OR_RETURN(LookupChannel * channel, LookupsOf(s));
    PS_ASSIGN_OR_RETURN(auto lookup,
                        channel->Begin(spec_.id(), dim, split[s].keys,
                                       split[s].positions, out.data()));
    lookups.push_back(std::move(lookup));
  }
  return LookupChannel::Drive(lookups);
}

}  // namespace ps::worker
