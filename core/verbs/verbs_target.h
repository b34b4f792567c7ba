// internal::VerbsTarget: the target side of one verbs connection. It owns the
// queue pair the origin's NIC talks to (the target's CPU takes no part in the
// transfers) and serves the rare control requests on the bootstrap socket:
// DIAGNOSE (why did the NIC refuse an access: the region table's precise
// answer) and RECONNECT (a new queue pair after the old one went to the error
// state). It also queues the notification events of puts into kNotifyEvents
// regions, which the NIC cannot: the origin claims a cell before its data
// moves and publishes (or voids) it once the put completed (CLAIM / PUBLISH
// / VOID_NOTIFICATION in verbs.proto). When the origin closes the socket,
// the cells it still holds are voided and the queue pair is destroyed.
//
// Staged regions (device memory the NIC cannot register, i.e. no GPUDirect
// RDMA; VerbsRegionKey.staged): the target's CPU moves their bytes.
// STAGED_PUT carries up to kStagedPieceBytes in the request, STAGED_GET
// returns them in the reply; the target checks each piece against the region
// table exactly as the NIC path's DIAGNOSE would (key, owner instance,
// liveness, bounds, access: the same statuses as for host regions) and
// copies it with DeviceMemory (memcpy for host regions staged for tests)
// before it replies. Atomics on a staged region are checked, then refused
// with kNotSupported, as the tcp server refuses atomics on device memory.
// The bytes travel in the control frames themselves (at most
// kMaxHelloBytes each), not by RDMA into a registered staging buffer: simple
// and correct, but a round trip per 60 KiB and two copies on the target.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/descriptor.pb.h"
#include "core/internal/region_table.h"
#include "core/stream/stream_server.h"
#include "core/verbs/queue_pair.h"
#include "core/verbs/verbs.pb.h"
#include "core/verbs/verbs_device.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

class VerbsTarget {
 public:
  // Creates a queue pair connected to the origin's `offer`; `notify` is
  // where its puts' notification events go.
  static StatusOr<std::unique_ptr<VerbsTarget>> Accept(
      std::shared_ptr<VerbsDevice> device, const proto::QueuePairInfo& offer,
      const RegionTable* regions, std::string peer_name, NotifyTarget notify);
  // Stops serving (shuts the socket down) and joins the thread.
  ~VerbsTarget();
  VerbsTarget(const VerbsTarget&) = delete;
  VerbsTarget& operator=(const VerbsTarget&) = delete;

  // This side's queue pair, for the hello reply.
  proto::QueuePairInfo Info() const;
  // Serves control requests on `fd` (past the hello) on a new thread.
  void Start(net::UniqueFd fd);
  bool finished() const { return finished_.load(); }

 private:
  // A claimed cell: where its event's word is.
  struct Claim {
    uint64_t region_id = 0;
    uint64_t offset = 0;
  };

  VerbsTarget(std::shared_ptr<VerbsDevice> device, const RegionTable* regions,
              std::string peer_name, NotifyTarget notify)
      : device_(std::move(device)),
        regions_(regions),
        peer_name_(std::move(peer_name)),
        notify_(std::move(notify)) {}
  void Run();
  proto::VerbsControlReply Handle(const proto::VerbsControl& request);
  Status ClaimNotification(const proto::VerbsControl& request,
                           proto::VerbsControlReply* reply);
  // Publishes (or voids) the claimed cell the request names.
  Status FinishNotification(const proto::VerbsControl& request, bool publish);
  // STAGED_PUT / STAGED_GET / STAGED_ATOMIC.
  Status StagedPut(const proto::VerbsControl& request);
  Status StagedGet(const proto::VerbsControl& request,
                   proto::VerbsControlReply* reply);
  Status StagedAtomic(const proto::VerbsControl& request);

  const std::shared_ptr<VerbsDevice> device_;
  const RegionTable* const regions_;
  const std::string peer_name_;
  const NotifyTarget notify_;
  // Cells claimed and not yet published or voided; only the serving thread
  // touches it.
  std::map<uint64_t, Claim> claims_;
  std::unique_ptr<QueuePair> qp_;  // replaced only by the serving thread
  net::UniqueFd fd_;
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

// Bytes of a staged region per STAGED_PUT / STAGED_GET: a control frame
// holds at most kMaxHelloBytes (64 KiB), and the rest of the request fits in
// what is left.
inline constexpr size_t kStagedPieceBytes = 60 << 10;

// Queue pair sizes of a target (it never posts).
QueuePairOptions TargetQueuePairOptions();

}  // namespace ps::xfer::internal
