// internal::VerbsTransport: the origin side of a verbs connection. Operations
// become RDMA work requests on one RC queue pair; the target's NIC serves
// them and its CPU does nothing.
//
//   Put / WriteV      RDMA WRITE, one work request per segment (each remote
//                     segment has its own address)
//   Get / ReadV       RDMA READ, one per segment
//   FetchAdd64        ATOMIC_FETCH_AND_ADD;  CompareSwap64: ATOMIC_CMP_AND_SWP
//   PutWithNotify     RDMA WRITE of the data, then an RDMA WRITE of the flag
//                     word on the same queue pair. An RC responder executes
//                     WRITEs in the order they were sent, and the second is
//                     only executed once the first is placed, so a reader who
//                     sees the flag sees the data. No IBV_SEND_FENCE: a fence
//                     only waits for earlier READs and atomics, which the
//                     flag does not depend on. Write-with-immediate would
//                     need a posted receive, i.e. the target's CPU.
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
#include "core/socket.h"
#include "core/transport.h"
#include "core/verbs/queue_pair.h"
#include "core/verbs/verbs_device.h"

namespace ps::xfer::internal {

class VerbsTransport : public Transport {
 public:
  // `qp` was offered in the hello on `fd` and the peer accepted it with
  // `peer_qp`.
  static StatusOr<std::unique_ptr<VerbsTransport>> Create(
      std::shared_ptr<VerbsDevice> device, std::unique_ptr<QueuePair> qp,
      const proto::QueuePairInfo& peer_qp, UniqueFd fd, std::string peer_name,
      std::chrono::milliseconds peer_timeout);
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
