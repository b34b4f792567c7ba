// The byte layout of the stream transport (tcp, and the Unix socket that
// same-host peers share). Both ends are the same build on the same
// architecture family (little-endian x86-64/arm64), so structs go on the wire
// as they are; the magic word rejects anything else.
//
// A connection carries, after the hello (see core/hello.h), requests from the
// origin and one reply per request from the target, in order. Request ids
// count up from 1 on a session, across the connections that carry it. The
// target checks every request against its RegionTable before touching memory,
// and reads Put payloads straight into the region (no bounce buffer).
#pragma once

#include <cstdint>

namespace ps::xfer::internal::wire {

constexpr uint32_t kRequestMagic = 0x31524658;  // "XFR1"
constexpr uint32_t kReplyMagic = 0x31504658;    // "XFP1"

// Upper bounds that keep a malformed request from costing the target memory
// or time. A request over them is answered kInvalidArgument; one whose
// payload cannot be skipped safely closes the connection.
constexpr uint64_t kMaxSegments = 1 << 16;
constexpr uint64_t kMaxPayload = uint64_t{1} << 34;  // 16 GiB
constexpr uint64_t kMaxSkippedPayload = uint64_t{64} << 20;

enum class WireOp : uint16_t {
  kPut = 1,          // + `length` payload bytes
  kGet = 2,          // reply carries `length` bytes
  kWriteV = 3,       // + `length` SegmentEntry, then each segment's bytes
  kReadV = 4,        // + `length` SegmentEntry; reply carries the bytes
  kFetchAdd = 5,     // operand0 = addend; reply.value = previous
  kCompareSwap = 6,  // operand0 = expected, operand1 = desired
  kPutNotify = 7,    // + payload; then notify word (notify_*) := operand0
  kMapRegion = 8,    // same-host only: reply carries MapReply + the memfd
};

// Whether the reply to `op` carries data the origin waits for: what a
// read fence waits for.
inline bool ReturnsData(uint16_t op) {
  switch (static_cast<WireOp>(op)) {
    case WireOp::kGet:
    case WireOp::kReadV:
    case WireOp::kFetchAdd:
    case WireOp::kCompareSwap:
      return true;
    default:
      return false;
  }
}

struct RequestHeader {
  uint32_t magic = kRequestMagic;
  uint16_t op = 0;
  uint16_t reserved = 0;
  uint64_t request_id = 0;
  uint64_t region_id = 0;
  uint64_t key = 0;
  uint64_t instance = 0;  // the target instance the descriptor came from
  uint64_t offset = 0;
  uint64_t length = 0;  // bytes, or segments for WriteV/ReadV
  uint64_t operand0 = 0;
  uint64_t operand1 = 0;  // CompareSwap: desired; PutNotify: notify offset
  uint64_t notify_region_id = 0;
  uint64_t notify_key = 0;
  // Every reply up to this request id has reached the origin: the target
  // may forget them (core/stream/stream_session.h).
  uint64_t acked_through = 0;
};
static_assert(sizeof(RequestHeader) == 96);

struct SegmentEntry {
  uint64_t offset;
  uint64_t length;
};

struct ReplyHeader {
  uint32_t magic = kReplyMagic;
  uint16_t status_code = 0;     // ps::StatusCode
  uint16_t message_length = 0;  // bytes of error text that follow
  uint64_t request_id = 0;
  uint64_t value = 0;           // atomics: the previous value
  uint64_t payload_length = 0;  // bytes that follow the message
};
static_assert(sizeof(ReplyHeader) == 32);

// kMapRegion's region_id for the target's notification queue
// (core/internal/notification_ring.h), which same-host peers map writable.
constexpr uint64_t kNotificationRingId = ~uint64_t{0};

// Payload of a successful kMapRegion reply; the region's memfd travels with
// it as SCM_RIGHTS ancillary data. region_id 0 asks for the liveness page,
// kNotificationRingId for the notification queue.
struct MapReply {
  uint64_t size;
  uint32_t access;
  uint32_t state_slot;
};

}  // namespace ps::xfer::internal::wire
