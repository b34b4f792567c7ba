// internal::EncodeOp: turns the operations of one StreamTransport::Post into
// what goes on the wire (request headers, segment tables, and iovecs over
// them and over the caller's payload, nothing copied), and notes for each
// request what its reply must carry and where the reply's bytes go.
//
// Thread safety: an OutgoingMessage belongs to the thread building it; the
// functions share no state.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/internal/op.h"
#include "core/internal/request_state.h"
#include "core/stream/kept_bytes.h"
#include "core/stream/wire.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

// One request on the wire, waiting for its reply.
struct PendingReply {
  uint64_t id = 0;
  wire::WireOp op = wire::WireOp::kPut;
  std::shared_ptr<RequestState> state;
  uint64_t expected_payload = 0;   // reply bytes on success
  std::vector<iovec> destination;  // Get/ReadV: where reply bytes go
  uint64_t* result = nullptr;      // atomics
  // The request's bytes (header, segment table, payload) when the
  // connection may have to send it again (StreamTransport).
  KeptBytes replay;
  wire::MapReply* map_reply = nullptr;
  net::UniqueFd* map_fd = nullptr;
};

// What one Post puts on the wire, built before the send lock is taken.
// `headers` and `tables` are reserved up front (one per op, see Reserve) so
// that the iovecs may point into them.
struct OutgoingMessage {
  std::vector<wire::RequestHeader> headers;
  std::vector<std::vector<wire::SegmentEntry>> tables;
  std::vector<iovec> iov;
  std::vector<size_t> first_iov;  // per request: its first entry in iov
  std::vector<PendingReply> pending;

  void Reserve(size_t ops) {
    headers.reserve(ops);
    tables.reserve(ops);
    pending.reserve(ops);
    first_iov.reserve(ops);
    iov.reserve(ops * 2);
  }
};

// Appends `op` to `m`; its reply completes `state`. An op the wire cannot
// carry (too large, too many segments, a notify region of another instance
// of `peer`) is refused with the reason, and nothing is appended.
Status EncodeOp(const Op& op, const std::string& peer,
                const std::shared_ptr<RequestState>& state, OutgoingMessage* m);

// Appends a kMapRegion request for region `region_id` (0: the target's
// liveness page); the reply fills *reply and *memfd and completes `state`.
void EncodeMapRegion(uint64_t region_id, uint64_t key, uint64_t instance,
                     wire::MapReply* reply, net::UniqueFd* memfd,
                     const std::shared_ptr<RequestState>& state,
                     OutgoingMessage* m);

}  // namespace ps::xfer::internal
