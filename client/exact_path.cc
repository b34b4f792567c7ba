#include "client/exact_path.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/append_row.h"
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
  if (keys.size() > UINT32_MAX) {
    return InvalidArgument("push of more than 2^32 keys");
  }
  std::lock_guard<std::mutex> lock(push_mu_);
  const uint32_t shards = servers_.size();
  shards_.resize(shards);
  for (ShardPush& sp : shards_) {
    sp.order.clear();
    sp.keys.clear();  // sums a failed push left unsent
    sp.values.clear();
  }
  // The server would refuse a whole packet with a non-finite sum: a push
  // that would send one fails here, before any of it is sent. When no sum
  // can reach infinity (every |gradient| below FLT_MAX / 2n for n
  // gradients), each shard's keys go out in pieces as they are summed, and
  // the server applies the first while the rest is summed; else every sum
  // is made and checked first.
  const float largest = kernels::LargestMagnitude(grads.data(), grads.size());
  if (!std::isfinite(largest)) return NonFinite();
  const bool stream =
      largest < std::numeric_limits<float>::max() / 2 / (keys.size() + 1);
  protocol::SparsePacketMeta meta;
  meta.table_id = spec_.id();
  meta.sender_id = clock_.worker_id();
  meta.step = clock_.current();
  meta.row_dim = dim;
  meta.value_type = kernels::ValueType::kFp32;
  meta.index_encoding = KeyEncoding();
  if (meta.index_encoding == protocol::IndexEncoding::kKeyDeltaVarint) {
    return PushInKeyOrder(keys, grads, stream, meta);
  }
  if (keys.size() < kPushDistinctKeys) {
    if (pushes_as_given_ == 0) return PushDistinct(keys, grads, stream, meta);
    --pushes_as_given_;
  }
  return PushInHashOrder(keys, grads, stream, meta);
}

Status ExactPath::PushDistinct(std::span<const uint64_t> keys,
                               std::span<const float> grads, bool stream,
                               const protocol::SparsePacketMeta& meta) {
  const size_t n = keys.size();
  const uint32_t dim = spec_.dim();
  DistinctKeys distinct(n, &push_distinct_table_, &push_distinct_keys_);
  // A key's gradients are added in the order given, as PushInHashOrder's
  // stable sort adds them: the sums are the same, bit for bit.
  std::vector<float>& sums = push_distinct_sums_;
  sums.clear();
  for (size_t i = 0; i < n; ++i) {
    const float* g = grads.data() + i * dim;
    float* sum = sums.data() + size_t{distinct.Insert(keys[i])} * dim;
    if (sum == sums.data() + sums.size()) {  // a new key
      AppendRow(g, dim, &sums);
    } else {
      for (uint32_t j = 0; j < dim; ++j) sum[j] += g[j];
    }
  }
  if (push_distinct_keys_.size() > n - n / kFewRepeats) {
    pushes_as_given_ = kCallsAsGiven;
  }
  // `stream` still holds: no sum of the n gradients can reach infinity.
  return PushInHashOrder(push_distinct_keys_, sums, stream, meta);
}

template <class ShardOf>
void ExactPath::AddSums(std::span<const KeyPosition> sorted,
                        std::span<const float> grads, bool carried,
                        ShardOf shard_of) const {
  // Sorted by key, then by position: a key's gradients are summed in the
  // order they were given. Read back in key order, each is a cache miss:
  // those of the pair kPrefetchAhead on are loaded while this one is added,
  // its first and its last line (a row of 16 floats mostly spans two).
  constexpr size_t kPrefetchAhead = 16;
  const uint32_t dim = spec_.dim();
  const float* g = grads.data();
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (!carried && i + kPrefetchAhead < sorted.size()) {
      const float* row = g + size_t{sorted[i + kPrefetchAhead].second} * dim;
      __builtin_prefetch(row);
      if (dim > 1) __builtin_prefetch(row + dim - 1);
    }
    const auto& [key, second] = sorted[i];
    const float value = std::bit_cast<float>(second);
    ShardPush* sp = shard_of(key);
    AddToSortedSums(key, carried ? &value : g + size_t{second} * dim, dim,
                    &sp->keys, &sp->values);
  }
}

Status ExactPath::PushInHashOrder(std::span<const uint64_t> keys,
                                  std::span<const float> grads, bool stream,
                                  protocol::SparsePacketMeta meta) {
  const uint32_t dim = spec_.dim();
  const uint32_t shards = servers_.size();
  // Rows of one float travel through the sort with their keys.
  const bool carried = dim == 1;
  push_order_.Sort(keys, pool_, {}, carried ? grads : std::span<const float>());
  const std::span<const KeyPosition> pairs = push_order_.pairs();
  const auto add = [&](size_t begin, size_t end) {
    AddSums(pairs.subspan(begin, end - begin), grads, carried,
            [&](uint64_t hash) {
              return &shards_[shards == 1 ? 0
                                          : router_.map().ShardOfKey(
                                                protocol::KeyFromHash(hash))];
            });
  };
  if (!stream) {  // every sum is made (and checked) before any is sent
    add(0, pairs.size());
    return SendAll(false, meta);
  }
  // Streamed, the sums go out in rounds of one piece from each lane (a
  // range of the hashes: kLanes of them, ascending), so that a round, sent
  // as about one packet per shard, spans kLanes of the server's partitions
  // while its hashes still ascend. A packet of one stretch of hashes would
  // fall in one partition, and the server's threads could not share it.
  size_t cursor[kLanes], end[kLanes];
  for (size_t lane = 0; lane < kLanes; ++lane) {
    cursor[lane] = lane == 0 ? 0 : end[lane - 1];
    const uint64_t next = uint64_t{lane + 1} << (64 - kLaneBits);
    end[lane] =
        lane + 1 == kLanes
            ? pairs.size()
            : std::partition_point(
                  pairs.begin() + cursor[lane], pairs.end(),
                  [&](const KeyPosition& p) { return p.first < next; }) -
                  pairs.begin();
  }
  // Pairs a lane gives a round: a packet's worth over the lanes, for each
  // shard, with room to spare (a key's delta takes 6-7 bytes in a large
  // push; 9 are counted, so that a round seldom spills into a second packet).
  const size_t per_lane =
      shards *
      std::max<size_t>(1, servers_[0].inbox().max_packet_bytes() /
                              (kLanes * (9 + sizeof(float) * size_t{dim})));
  for (bool more = true; more;) {
    more = false;
    for (size_t lane = 0; lane < kLanes; ++lane) {
      size_t stop = std::min(end[lane], cursor[lane] + per_lane);
      // A piece ends between keys: a key's sum goes whole, once.
      while (stop < end[lane] && pairs[stop].first == pairs[stop - 1].first) {
        ++stop;
      }
      add(cursor[lane], stop);
      cursor[lane] = stop;
      more = more || stop < end[lane];
    }
    PS_RETURN_IF_ERROR(SendAll(true, meta));
  }
  return Status::OK();
}

Status ExactPath::PushInKeyOrder(std::span<const uint64_t> keys,
                                 std::span<const float> grads, bool stream,
                                 protocol::SparsePacketMeta meta) {
  const uint32_t shards = servers_.size();
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint32_t s = router_.map().ShardOfKey(keys[i]);
    shards_[s].order.emplace_back(keys[i], static_cast<uint32_t>(i));
  }
  for (uint32_t s = 0; s < shards; ++s) {
    ShardPush& sp = shards_[s];
    if (sp.order.empty()) continue;
    meta.shard_id = s;
    if (!stream) {
      SortByKey(&sp.order, &sort_scratch_);
      AddSums(sp.order, grads, false, [&](uint64_t) { return &sp; });
      continue;
    }
    // Each shard's keys go out run by run as they are sorted.
    PS_RETURN_IF_ERROR(SortByKey(
        &sp.order, &sort_scratch_, [&](std::span<const KeyPosition> run) {
          AddSums(run, grads, false, [&](uint64_t) { return &sp; });
          return sp.keys.size() < kStreamKeys ? Status::OK()
                                              : Send(meta, s, &sp);
        }));
  }
  return SendAll(stream, meta);
}

Status ExactPath::SendAll(bool stream, protocol::SparsePacketMeta meta) {
  if (!stream) {  // nothing sent yet: every sum is checked first
    for (const ShardPush& sp : shards_) {
      if (!kernels::AllFinite(sp.values.data(), sp.values.size())) {
        return NonFinite();
      }
    }
  }
  for (uint32_t s = 0; s < shards_.size(); ++s) {
    meta.shard_id = s;
    PS_RETURN_IF_ERROR(Send(meta, s, &shards_[s]));
  }
  return Status::OK();
}

Status ExactPath::NonFinite() const {
  return InvalidArgument("push to table " + spec_.name() +
                         " carries a non-finite gradient (or sum)");
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

protocol::IndexEncoding ExactPath::KeyEncoding() const {
  auto encoding = protocol::IndexEncoding::kKeyHashFixedDeltas;
  for (uint32_t s = 0; s < servers_.size(); ++s) {
    const auto& info = servers_[s].info();
    if (!info.keys_in_hash_order()) {
      return protocol::IndexEncoding::kKeyDeltaVarint;
    }
    if (!info.fixed_hash_deltas()) {
      encoding = protocol::IndexEncoding::kKeyHashDeltaVarint;
    }
  }
  return encoding;
}

bool ExactPath::AllTakeHashOrder() const {
  return KeyEncoding() != protocol::IndexEncoding::kKeyDeltaVarint;
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
  // A large pull goes in hash order when every server files keys so; a
  // second large pull of the table at the same time goes as given rather
  // than wait for the first's buffers. So does a small pull that finds
  // the buffers of PullDistinct taken, or whose keys have not repeated.
  if (keys.size() >= kPullInHashOrderKeys) {
    if (AllTakeHashOrder()) {
      std::unique_lock<std::mutex> ordering(pull_mu_, std::try_to_lock);
      if (ordering.owns_lock()) return PullInHashOrder(keys, out);
    }
  } else {
    std::unique_lock<std::mutex> distinct(distinct_mu_, std::try_to_lock);
    if (distinct.owns_lock()) {
      if (pulls_as_given_ == 0) return PullDistinct(keys, out);
      --pulls_as_given_;
    }
  }
  return PullAsGiven(keys, out);
}

Status ExactPath::PullAsGiven(std::span<const uint64_t> keys,
                              std::span<float> out) {
  const uint32_t shards = servers_.size();
  if (shards == 1) {
    // Every key is the one server's (it checks): no split, and its rows
    // arrive in the keys' order.
    PS_ASSIGN_OR_RETURN(LookupChannel * channel, LookupsOf(0));
    PS_ASSIGN_OR_RETURN(auto lookup, channel->Begin(spec_.id(), spec_.dim(),
                                                    keys, {}, out.data()));
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
    AddToSplit(keys[i], static_cast<uint32_t>(i), &split);
  }
  return LookUp(split, out);
}

void ExactPath::AddToSplit(uint64_t key, uint32_t position,
                           std::vector<ShardPull>* split) const {
  ShardPull& sp = (*split)[router_.map().ShardOfKey(key)];
  sp.keys.push_back(key);
  sp.positions.push_back(position);
}

Status ExactPath::PullInHashOrder(std::span<const uint64_t> keys,
                                  std::span<float> out) {
  const uint32_t shards = servers_.size();
  std::vector<ShardPull>& split = pull_split_;
  split.resize(shards);
  if (shards == 1) {
    // Unzipped on the pool's threads as the runs are sorted. A key is
    // KeyFromHash of its hash: a few multiplies, where keys[position]
    // would be a cache miss a key. The server is asked for the first keys
    // while the rest sorts (a 10M-key sort is ~40% of the pull).
    ShardPull& sp = split[0];
    sp.keys.resize(keys.size());
    sp.positions.resize(keys.size());
    PS_ASSIGN_OR_RETURN(LookupChannel * channel, LookupsOf(0));
    PS_ASSIGN_OR_RETURN(std::unique_ptr<LookupChannel::Ongoing> lookup,
                        channel->Begin(spec_.id(), spec_.dim(), sp.keys,
                                       sp.positions, out.data(), /*ready=*/0));
    Status failed;
    int runs = 0;
    pull_order_.Sort(
        keys, pool_,
        [&](size_t b, size_t e) {
          const std::span<const KeyPosition> pairs = pull_order_.pairs();
          for (size_t i = b; i < e; ++i) {
            sp.keys[i] = protocol::KeyFromHash(pairs[i].first);
            sp.positions[i] = pairs[i].second;
          }
        },
        {},
        [&](size_t ready) {
          if (!failed.ok()) return;
          lookup->SetReady(ready);
          failed = ++runs % kRunsPerAdvance == 0 ? lookup->Advance().status()
                                                 : lookup->PostReady();
        });
    PS_RETURN_IF_ERROR(failed);
    lookup->SetReady(keys.size());
    return LookupChannel::Drive({&lookup, 1});
  }
  pull_order_.Sort(keys, pool_);
  for (ShardPull& sp : split) {
    sp.keys.clear();
    sp.positions.clear();
  }
  for (const auto& [hash, position] : pull_order_.pairs()) {
    AddToSplit(protocol::KeyFromHash(hash), position, &split);
  }
  return LookUp(split, out);
}

Status ExactPath::PullDistinct(std::span<const uint64_t> keys,
                               std::span<float> out) {
  const size_t n = keys.size();
  const size_t dim = spec_.dim();
  distinct_of_.resize(n);
  DistinctKeys distinct(n, &distinct_table_, &distinct_keys_);
  for (size_t i = 0; i < n; ++i) distinct_of_[i] = distinct.Insert(keys[i]);
  distinct_rows_.resize(distinct_keys_.size() * dim);
  PS_RETURN_IF_ERROR(PullAsGiven(distinct_keys_, distinct_rows_));
  if (distinct_keys_.size() > n - n / kFewRepeats) {
    pulls_as_given_ = kCallsAsGiven;
  }
  const float* rows = distinct_rows_.data();
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(out.data() + i * dim, rows + distinct_of_[i] * dim,
                sizeof(float) * dim);
  }
  return Status::OK();
}

Status ExactPath::LookUp(std::span<const ShardPull> split,
                         std::span<float> out) {
  // Every shard's lookup in flight at once, begun in shard order (the
  // channels' rule, client/lookup_channel.h): the servers answer theirs in
  // parallel while this thread places whichever rows arrive.
  std::vector<std::unique_ptr<LookupChannel::Ongoing>> lookups;
  for (uint32_t s = 0; s < split.size(); ++s) {
    if (split[s].keys.empty()) continue;
    PS_ASSIGN_OR_RETURN(LookupChannel * channel, LookupsOf(s));
    PS_ASSIGN_OR_RETURN(auto lookup,
                        channel->Begin(spec_.id(), spec_.dim(), split[s].keys,
                                       split[s].positions, out.data()));
    lookups.push_back(std::move(lookup));
  }
  return LookupChannel::Drive(lookups);
}

}  // namespace ps::worker
