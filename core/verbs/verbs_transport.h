// internal::VerbsTransport: the origin side of a verbs connection. Operations
// become RDMA work requests on one RC queue pair; the target's NIC serves
// them and its CPU does nothing.
//
//   Put / WriteV      RDMA WRITE, one work request per segment (each remote
//                     segment has its own address)
//   Get / ReadV       RDMA READ, one per segment
//   FetchAdd64        ATOMIC_FETCH_AND_ADD;  CompareSwap64: ATOMIC_CMP_AND_SWP
//   PutWithNotify     RDMA WRITE of the data, then the flag word stored by an
//                     ATOMIC_CMP_AND_SWP on the same queue pair. An RC
//                     responder executes requests in the order they were
//                     sent, the atomic only after the data is placed, so a
//                     reader who sees the flag sees the data. The flag is not
//                     an RDMA WRITE because a WRITE gives no atomicity: the
//                     responder may place an 8-byte word in pieces (soft-RoCE
//                     copies it with memcpy, which under emulation goes byte
//                     by byte), and a reader polling the word then sees torn
//                     values: going from 0x2BDB to 0x2C1B it saw 0x2B1B,
//                     i.e. a flag 256 iterations old. An atomic is one 8-byte
//                     store at the responder. The swap expects the value this
//                     endpoint last stored at that word; when someone else
//                     stored there it finds another, and is posted again
//                     expecting that one. (IBV_SEND_FENCE would not help: it
//                     orders, it does not make a WRITE atomic. Write-with-
//                     immediate would need a posted receive, i.e. the
//                     target's CPU.) So verbs regions writable by peers also
//                     take NIC atomics (VerbsAccessFlags).
//   ... with an event When the word's region queues notification events
//                     (kNotifyEvents), which the NIC cannot: the origin
//                     claims a cell of the target's queue over the bootstrap
//                     socket before the data moves (a full queue refuses the
//                     put with nothing written), posts the put as above and,
//                     once it completed, has the target's CPU publish the
//                     event, or void the cell if the put failed. Three round
//                     trips, complete when Post returns.
//   ... on a staged   Regions the target's NIC cannot reach (device memory
//       region        without GPUDirect RDMA; VerbsRegionKey.staged): the
//                     target's CPU copies them between the region and the
//                     connection's staging buffer (512 KiB, registered with
//                     its NIC when first asked for), which the origin writes
//                     (then STAGED_PUT) or reads (after STAGED_GET) by RDMA,
//                     a piece at a time; the target checks each request
//                     against its region table (verbs_target.h). One piece
//                     per connection is in flight at a time.
//                     Such an operation first waits until everything posted
//                     before it on this endpoint completed (Flush's wait,
//                     leaving the errors to Flush) and is complete when Post
//                     returns, so fences and Flush hold trivially: it is
//                     ordered after all earlier and before all later
//                     operations. A put-with-notify stages the data, then
//                     stores the (host) word with the NIC as above; a word
//                     in a staged region, and atomics there, are refused
//                     (kNotSupported, after the target's access check).
//                     Only Plan's no-address branch looks for this: host
//                     operations pay nothing.
//
// Local buffers need no registration. A buffer inside a region this Context
// registered (Allocate/Register) is used in place (zero copy): then a Put's
// source must not change until its request completes. Any other buffer goes
// through this endpoint's registered bounce slots: Put sources are copied
// before Post returns (reusable at once, as on every transport), Get data is
// copied out when the READ completes. Writes of up to 128 bytes are sent
// inline.
//
// Completions are polled by a progress thread that spins briefly while work
// is outstanding and then sleeps on the completion channel.
//
// Errors: the NIC refuses an access with a wrong rkey, outside the
// registered bounds, or without the access right, all as one "remote access
// error"; the queue pair then goes to the error state. The transport asks
// the target over the bootstrap socket which of its checks failed (wrong key,
// out of range, access denied, not registered: the region table's own
// answer), fails that operation with it, connects a fresh queue pair, and
// posts again the work requests that were flushed without running (those of
// other operations). A retry-exceeded completion, a closed bootstrap socket,
// or no completion for the peer timeout declares the peer lost.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/descriptor.pb.h"
#include "core/internal/transport.h"
#include "core/verbs/queue_pair.h"
#include "core/verbs/verbs.pb.h"
#include "core/verbs/verbs_device.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

class VerbsTransport : public Transport {
 public:
  // `qp` was offered in the hello on `fd` and the peer accepted it with
  // `peer_qp`.
  static StatusOr<std::unique_ptr<VerbsTransport>> Create(
      std::shared_ptr<VerbsDevice> device, std::unique_ptr<QueuePair> qp,
      const proto::QueuePairInfo& peer_qp, net::UniqueFd fd,
      std::string peer_name, std::chrono::milliseconds peer_timeout);
  ~VerbsTransport() override;

  Request Post(const Op& op) override;
  Request PostBatch(std::span<const Op> ops) override;
  Status Flush() override;
  bool lost() const override;

  class Impl;

 private:
  explicit VerbsTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Queue pair sizes of an origin.
QueuePairOptions OriginQueuePairOptions();

}  // namespace ps::xfer::internal
