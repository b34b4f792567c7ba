#include "client/inbox_writer.h"

#include <chrono>
#include <cstring>

#include "client/backoff.h"
#include "protocol/inbox_ring.h"
#include "protocol/inbox_slot.h"

namespace ps::worker {

InboxWriter::InboxWriter(Options options) : options_(std::move(options)) {
  staging_.resize(options_.slot_bytes);
}

Status InboxWriter::ReadHead(uint64_t* head) {
  uint64_t word = 0;
  Status s = options_.endpoint->Get(
      &word, sizeof(word), options_.status,
      options_.words.InboxHeadOffset(options_.worker_id));
  if (!s.ok()) return s.WithContext(options_.server + ": inbox head");
  *head = word;
  return Status::OK();
}

Status InboxWriter::Start() {
  uint64_t head = 0;
  PS_RETURN_IF_ERROR(ReadHead(&head));
  std::lock_guard<std::mutex> lock(mu_);
  cached_head_ = head;
  next_ = head + 1;
  posted_through_.store(head, std::memory_order_release);
  flushed_through_.store(head, std::memory_order_release);
  return Status::OK();
}

uint64_t InboxWriter::written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_ - 1;
}

size_t InboxWriter::max_packet_bytes() const {
  return protocol::MaxPacketBytes(options_.slot_bytes);
}

Status InboxWriter::WaitForCredit(uint64_t n) {
  if (n - cached_head_ <= options_.slots) return Status::OK();
  // Counted even when the first read of the head finds credit: a push
  // that had to look is one the server was behind on.
  const auto wait_start = std::chrono::steady_clock::now();
  struct CountWait {
    ShardCounters* c;
    std::chrono::steady_clock::time_point start;
    ~CountWait() {
      if (c == nullptr) return;
      c->credit_waits.fetch_add(1, std::memory_order_relaxed);
      c->credit_wait_ns.fetch_add(
          static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count()),
          std::memory_order_relaxed);
    }
  } count_wait{options_.counters, wait_start};
  Backoff backoff(options_.timeout_ms);
  for (;;) {
    uint64_t head = 0;
    PS_RETURN_IF_ERROR(ReadHead(&head));
    if (head != cached_head_) backoff.Progress();
    cached_head_ = head;
    if (n - cached_head_ <= options_.slots) return Status::OK();
    if (!backoff.Wait()) {
      uint64_t shutdown = 0;
      if (options_.endpoint
              ->Get(&shutdown, 8, options_.status,
                    options_.words.ShutdownOffset())
              .ok() &&
          shutdown != 0) {
        return PeerLost(options_.server + " is shutting down");
      }
      return Timeout(options_.server + " consumed no packet of worker " +
                     std::to_string(options_.worker_id) + " for " +
                     std::to_string(options_.timeout_ms) + " ms (head " +
                     std::to_string(head) + ", packet " + std::to_string(n) +
                     " waits for a slot)");
    }
  }
}

Status InboxWriter::WriteOne(uint8_t* with_header, size_t packet_bytes) {
  const uint64_t n = next_;
  PS_RETURN_IF_ERROR(WaitForCredit(n));
  using Header = protocol::InboxSlotHeader;
  Header::WritePrefix(static_cast<uint32_t>(packet_bytes), with_header);
  const uint64_t slot =
      protocol::SlotOffset(n, options_.slots, options_.slot_bytes);
  // Non-blocking: on tcp the packets stream without a round trip each; the
  // source may be reused once the call returns. Errors surface at Flush.
  xfer::Request r = options_.endpoint->PostPutWithNotify(
      with_header, Header::kPrefixBytes + packet_bytes, options_.inbox,
      slot + Header::kLengthOffset, options_.inbox, slot, n);
  Status s;
  if (r.Test(&s) && !s.ok()) {
    return s.WithContext(options_.server + ": inbox packet " +
                         std::to_string(n));
  }
  next_ = n + 1;
  posted_through_.store(n, std::memory_order_release);
  return Status::OK();
}

Status InboxWriter::WritePackets(
    std::span<uint8_t> buffer,
    std::span<const protocol::EncodedPacket> packets) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const protocol::EncodedPacket& p : packets) {
    if (p.size > max_packet_bytes()) {
      return Internal("packet of " + std::to_string(p.size) +
                      " bytes exceeds the slot of " +
                      std::to_string(options_.slot_bytes));
    }
    constexpr size_t kPrefix = protocol::InboxSlotHeader::kPrefixBytes;
    if (p.offset >= kPrefix) {
      PS_RETURN_IF_ERROR(WriteOne(buffer.data() + p.offset - kPrefix, p.size));
    } else {
      std::memcpy(staging_.data() + kPrefix, buffer.data() + p.offset, p.size);
      PS_RETURN_IF_ERROR(WriteOne(staging_.data(), p.size));
    }
  }
  return Status::OK();
}

Status InboxWriter::Flush() {
  // Nothing written since the last flush that completed: nothing to wait
  // for (a flush of the endpoint is a round trip over tcp).
  // Read without mu_: a writer waiting for credit holds it.
  const uint64_t target = posted_through_.load(std::memory_order_acquire);
  if (flushed_through_.load(std::memory_order_acquire) >= target) {
    return Status::OK();
  }
  Status s = options_.endpoint->Flush();
  if (!s.ok()) return s.WithContext(options_.server);
  uint64_t seen = flushed_through_.load(std::memory_order_relaxed);
  while (seen < target && !flushed_through_.compare_exchange_weak(
                              seen, target, std::memory_order_release,
                              std::memory_order_relaxed)) {
  }
  return s;
}

Status InboxWriter::WaitApplied() {
  const uint64_t target = written();
  Backoff backoff(options_.timeout_ms);
  uint64_t last = 0;
  for (;;) {
    uint64_t head = 0;
    PS_RETURN_IF_ERROR(ReadHead(&head));
    if (head >= target) return Status::OK();
    if (head != last) backoff.Progress();
    last = head;
    if (!backoff.Wait()) {
      return Timeout(options_.server + " applied packets up to " +
                     std::to_string(head) + " of " + std::to_string(target) +
                     " and then none for " +
                     std::to_string(options_.timeout_ms) + " ms");
    }
  }
}

}  // namespace ps::worker
