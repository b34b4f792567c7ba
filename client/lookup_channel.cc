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
                           std::span<const uint64_t> keys, int half,
                           Ongoing::Chunk* chunk) {
  protocol::LookupMeta meta;
  meta.table_id = table_id;
  meta.shard_id = options_.shard;
  meta.sender_id = options_.worker_id;
  PS_RETURN_IF_ERROR(protocol::EncodeLookupPackets(
      meta, keys.subspan(chunk->first, chunk->count), next_request_,
      HalfOffset(half), row_bytes,
      protocol::kLookupPacketHeaderBytes + keys_per_packet_ * 8,
      protocol::InboxSlotHeader::kPrefixBytes, &bytes_, &packets_));
  chunk->first_request = next_request_;
  chunk->last_request = next_request_ + packets_.size() - 1;
  next_request_ += packets_.size();
  PS_RETURN_IF_ERROR(options_.inbox->WritePackets(bytes_, packets_));
  return options_.inbox->Flush();
}

StatusOr<std::unique_ptr<LookupChannel::Ongoing>> LookupChannel::Begin(
    uint32_t table_id, uint32_t dim, std::span<const uint64_t> keys,
    std::span<const uint32_t> positions, float* out, size_t ready) {
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
  if (keys.empty() || (!positions.empty() && positions.size() != keys.size())) {
    return InvalidArgument("a lookup of " + std::to_string(keys.size()) +
                           " keys with " + std::to_string(positions.size()) +
                           " positions");
  }
  std::unique_ptr<Ongoing> lookup(
      new Ongoing(this, std::unique_lock<std::mutex>(mu_), table_id, dim, keys,
                  positions, out, chunk_keys));
  if (!positions.empty()) rows_.resize(std::min(chunk_keys, keys.size()) * dim);
  lookup->SetReady(ready);
  PS_RETURN_IF_ERROR(lookup->PostReady());
  return lookup;
}

LookupChannel::Ongoing::Ongoing(LookupChannel* channel,
                                std::unique_lock<std::mutex> lock,
                                uint32_t table_id, uint32_t dim,
                                std::span<const uint64_t> keys,
                                std::span<const uint32_t> positions, float* out,
                                size_t chunk_keys)
    : channel_(channel),
      lock_(std::move(lock)),
      table_id_(table_id),
      dim_(dim),
      keys_(keys),
      positions_(positions),
      out_(out),
      chunk_keys_(chunk_keys) {}

// Chunks still in flight when a lookup is abandoned are harmless: the
// server answers a worker's requests in order, so the next lookup's rows,
// in the same halves, are written after theirs and read only once its own
// requests are answered.
LookupChannel::Ongoing::~Ongoing() = default;

void LookupChannel::Ongoing::RestartDeadline() {
  deadline_ = std::chrono::steady_clock::now() +
              std::chrono::milliseconds(channel_->options_.timeout_ms);
}

Status LookupChannel::Ongoing::PostReady() {
  while (in_flight_ < 2 && posted_ < ready_) {
    // A part of a chunk only to a server that would idle, or at the end.
    if (in_flight_ > 0 && ready_ - posted_ < chunk_keys_ &&
        ready_ < keys_.size()) {
      break;
    }
    // The oldest chunk's answer is due timeout_ms after it is asked for.
    if (in_flight_ == 0) RestartDeadline();
    PS_RETURN_IF_ERROR(PostNext(in_flight_ == 0 ? oldest_ : oldest_ ^ 1));
  }
  return Status::OK();
}

Status LookupChannel::Ongoing::PostNext(int half) {
  Chunk& c = chunks_[half];
  c.first = posted_;
  c.count = std::min(chunk_keys_, ready_ - posted_);
  posted_ += c.count;
  ++in_flight_;
  return channel_->Post(table_id_, sizeof(float) * dim_, keys_, half, &c);
}

StatusOr<bool> LookupChannel::Ongoing::Advance() {
  const size_t posted = posted_;
  PS_RETURN_IF_ERROR(PostReady());
  if (in_flight_ == 0) return posted_ != posted;
  const Options& o = channel_->options_;
  const Chunk& c = chunks_[oldest_];
  uint8_t header[protocol::kLookupReplyHeaderBytes];
  PS_RETURN_IF_ERROR(channel_->ReadHeader(header));
  if (protocol::LookupReplyHeader::Parse(header).answered < c.last_request) {
    if (std::chrono::steady_clock::now() < deadline_) return posted_ != posted;
    return Timeout(o.server + " did not answer lookup " +
                   std::to_string(c.last_request) + " within " +
                   std::to_string(o.timeout_ms) + " ms");
  }
  // The read that saw the answer is not ordered inside itself: read once
  // more for the refusal a request of this chunk may have left
  // (protocol/lookup_packet.h).
  PS_RETURN_IF_ERROR(channel_->ReadHeader(header));
  const protocol::LookupReplyHeader h =
      protocol::LookupReplyHeader::Parse(header);
  if (h.failed_request >= c.first_request &&
      h.failed_request <= c.last_request) {
    return h.failure.WithContext(o.server + " refused a lookup");
  }
  const size_t row_bytes = sizeof(float) * dim_;
  // Rows in the keys' order go straight where they belong.
  float* const rows =
      positions_.empty() ? out_ + c.first * dim_ : channel_->rows_.data();
  PS_RETURN_IF_ERROR(o.endpoint
                         ->Get(rows, c.count * row_bytes, o.reply,
                               channel_->HalfOffset(oldest_))
                         .WithContext(o.server + ": lookup rows"));
  if (!positions_.empty()) {
    const uint32_t* at = positions_.data() + c.first;
    // Positions of a pull in hash order lie at random: each store misses,
    // so the lines of the row kAhead on are fetched meanwhile (its first
    // and last: a row of 16 floats mostly spans two). Pulls of 10M keys of
    // one float: 49.7 against 48.2 M keys/s without, medians of 3.
    constexpr size_t kAhead = 16;
    for (size_t j = 0; j < c.count; ++j) {
      if (j + kAhead < c.count) {
        float* const ahead = out_ + size_t{at[j + kAhead]} * dim_;
        __builtin_prefetch(ahead, 1);
        if (dim_ > 1) __builtin_prefetch(ahead + dim_ - 1, 1);
      }
      if (dim_ == 1) {
        out_[at[j]] = rows[j];
      } else {
        std::memcpy(out_ + size_t{at[j]} * dim_, rows + j * dim_, row_bytes);
      }
    }
  }
  --in_flight_;
  RestartDeadline();
  oldest_ ^= 1;
  PS_RETURN_IF_ERROR(PostReady());
  return true;
}

Status LookupChannel::Drive(std::span<const std::unique_ptr<Ongoing>> lookups) {
  // A chunk takes a server from microseconds to tens of milliseconds:
  // sleeps of at most 50 us between looks. Each lookup keeps its own
  // deadline; the backoff's is not used.
  Backoff backoff(/*timeout_ms=*/0, /*max_sleep_us=*/50);
  for (;;) {
    bool all_done = true, progress = false;
    for (const auto& lookup : lookups) {
      if (lookup->done()) continue;
      PS_ASSIGN_OR_RETURN(const bool advanced, lookup->Advance());
      progress = progress || advanced;
      all_done = all_done && lookup->done();
    }
    if (all_done) return Status::OK();
    if (progress) {
      backoff.Progress();
    } else {
      backoff.Wait();
    }
  }
}

}  // namespace ps::worker
