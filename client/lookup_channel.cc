#include "client/lookup_channel.h"

#include <algorithm>
#include <cstring>

#include "client/backoff.h"
#include "protocol/inbox_slot.h"
#include "protocol/lookup_packet.h"

namespace ps::worker {

LookupChannel::LookupChannel(Options options) : options_(std::move(options)) {
  const uint64_t size = options_.reply.size();
  const uint64_t rows_bytes = size > protocol::kLookupReplyHeaderBytes
                                  ? size - protocol::kLookupReplyHeaderBytes
                                  : 0;
  half_bytes_ = rows_bytes / 2 / protocol::kLookupReplyOffsetAlign *
                protocol::kLookupReplyOffsetAlign;
  // A multiple of 16 keys per packet: a full packet's rows (16 x 4 x dim
  // bytes) then end on a 64-byte boundary, so a chunk's rows lie back to
  // back in the reply region and come out with one read.
  keys_per_packet_ =
      protocol::LookupKeysPerPacket(options_.inbox->max_packet_bytes()) / 16 *
      16;
}

Status LookupChannel::ReadHeader(uint8_t* header) {
  return options_.endpoint
      ->Get(header, protocol::kLookupReplyHeaderBytes, options_.reply, 0)
      .WithContext(options_.server + ": lookup replies");
}

Status LookupChannel::Start() {
  if (options_.reply.size() < protocol::kLookupReplyHeaderBytes) {
    return InvalidArgument(options_.server +
                           " announced a lookup reply region of " +
                           std::to_string(options_.reply.size()) + " bytes");
  }
  uint8_t header[protocol::kLookupReplyHeaderBytes];
  PS_RETURN_IF_ERROR(ReadHeader(header));
  std::lock_guard<std::mutex> lock(mu_);
  next_request_ = protocol::LookupReplyHeader::Parse(header).answered + 1;
  return Status::OK();
}

uint64_t LookupChannel::HalfOffset(int half) const {
  return protocol::kLookupReplyHeaderBytes + half * half_bytes_;
}

Status LookupChannel::Post(uint32_t table_id, size_t row_bytes,
                           std::span<const uint64_t> keys, Chunk* chunk) {
  protocol::LookupMeta meta;
  meta.table_id = table_id;
  meta.shard_id = options_.shard;
  meta.sender_id = options_.worker_id;
  PS_RETURN_IF_ERROR(protocol::EncodeLookupPackets(
      meta, keys.subspan(chunk->first, chunk->count), next_request_,
      HalfOffset(chunk->half), row_bytes,
      protocol::kLookupPacketHeaderBytes + keys_per_packet_ * 8,
      protocol::InboxSlotHeader::kPrefixBytes, &bytes_, &packets_));
  chunk->first_request = next_request_;
  chunk->last_request = next_request_ + packets_.size() - 1;
  next_request_ += packets_.size();
  PS_RETURN_IF_ERROR(options_.inbox->WritePackets(bytes_, packets_));
  return options_.inbox->Flush();
}

Status LookupChannel::WaitAnswered(const Chunk& chunk) {
  uint8_t header[protocol::kLookupReplyHeaderBytes];
  // A chunk takes the server from microseconds to tens of milliseconds:
  // sleeps of at most 50 us between looks.
  Backoff backoff(options_.timeout_ms, /*max_sleep_us=*/50);
  for (;;) {
    PS_RETURN_IF_ERROR(ReadHeader(header));
    if (protocol::LookupReplyHeader::Parse(header).answered >=
        chunk.last_request) {
      break;
    }
    if (!backoff.Wait()) {
      return Timeout(options_.server + " did not answer lookup " +
                     std::to_string(chunk.last_request) + " within " +
                     std::to_string(options_.timeout_ms) + " ms");
    }
  }
  // The read that saw the answer is not ordered inside itself: read once
  // more for the refusal a request of this chunk may have left
  // (protocol/lookup_packet.h).
  PS_RETURN_IF_ERROR(ReadHeader(header));
  const protocol::LookupReplyHeader h =
      protocol::LookupReplyHeader::Parse(header);
  if (h.failed_request >= chunk.first_request &&
      h.failed_request <= chunk.last_request) {
    return h.failure.WithContext(options_.server + " refused a lookup");
  }
  return Status::OK();
}

Status LookupChannel::Lookup(uint32_t table_id, uint32_t dim,
                             std::span<const uint64_t> keys,
                             std::span<const uint32_t> positions, float* out) {
  if (keys.empty()) return Status::OK();
  const size_t row_bytes = sizeof(float) * dim;
  // The last packet's rows may end up to 63 bytes short of the next
  // 64-byte boundary.
  const size_t chunk_keys =
      half_bytes_ > protocol::kLookupReplyOffsetAlign
          ? (half_bytes_ - protocol::kLookupReplyOffsetAlign) / row_bytes
          : 0;
  if (chunk_keys == 0 || keys_per_packet_ == 0) {
    return InvalidArgument(options_.server + "'s lookup replies (" +
                           std::to_string(options_.reply.size()) +
                           " bytes, as large as an inbox)"
                           " and inbox slots cannot hold a row of " +
                           std::to_string(row_bytes) +
                           " bytes: start it with more or larger inbox slots");
  }
  std::lock_guard<std::mutex> lock(mu_);
  rows_.resize(std::min(chunk_keys, keys.size()) * dim);
  Chunk chunks[2];
  size_t posted = 0;
  int in_flight = 0;
  auto post_next = [&](int half) -> Status {
    Chunk& c = chunks[half];
    c.first = posted;
    c.count = std::min(chunk_keys, keys.size() - posted);
    c.half = half;
    posted += c.count;
    ++in_flight;
    return Post(table_id, row_bytes, keys, &c);
  };
  PS_RETURN_IF_ERROR(post_next(0));
  if (posted < keys.size()) PS_RETURN_IF_ERROR(post_next(1));
  for (int half = 0; in_flight > 0; half ^= 1) {
    const Chunk& c = chunks[half];
    PS_RETURN_IF_ERROR(WaitAnswered(c));
    PS_RETURN_IF_ERROR(options_.endpoint
                           ->Get(rows_.data(), c.count * row_bytes,
                                 options_.reply, HalfOffset(c.half))
                           .WithContext(options_.server + ": lookup rows"));
    --in_flight;
    const float* src = rows_.data();
    if (dim == 1) {
      for (size_t j = 0; j < c.count; ++j) out[positions[c.first + j]] = src[j];
    } else {
      for (size_t j = 0; j < c.count; ++j) {
        std::memcpy(out + size_t{positions[c.first + j]} * dim, src + j * dim,
                    row_bytes);
      }
    }
    if (posted < keys.size()) PS_RETURN_IF_ERROR(post_next(half));
  }
  return Status::OK();
}

}  // namespace ps::worker
