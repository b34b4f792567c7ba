// internal::VerbsTarget: the target side of one verbs connection. It owns the
// queue pair the origin's NIC talks to (the target's CPU takes no part in the
// transfers, staged regions aside: below) and serves the rare control
// requests on the bootstrap socket:
// DIAGNOSE (why did the NIC refuse an access: the region table's precise
// answer) and RECONNECT (a new queue pair after the old one went to the error
// state). It also queues the notification events of puts into kNotifyEvents
// regions, which the NIC cannot: the origin claims a cell before its data
// moves and publishes (or voids) it once the put completed (CLAIM / PUBLISH
// / VOID_NOTIFICATION in verbs.proto). When the origin closes the socket,
// the cells it still holds are voided and the queue pair is destroyed.
//
// Staged regions (device memory the NIC cannot register, i.e. no GPUDirect
// RDMA; VerbsRegionKey.staged): the target's CPU moves their bytes through
// the connection's staging buffer, kStagingBytes of page-locked memory (where
// the driver gives it) registered with the NIC on the origin's first
// STAGING_BUFFER request. For a put the origin RDMA-writes a piece into it
// and sends STAGED_PUT; for a get it sends STAGED_GET and RDMA-reads the
// piece once the reply came. The target checks each request against the
// region table exactly as DIAGNOSE would for the NIC path (key, owner
// instance, liveness, bounds, access: the same statuses as for host regions)
// and copies with DeviceMemory (memcpy for host regions staged for tests)
// before it replies. Atomics on a staged region are checked, then refused
// with kNotSupported, as the tcp server refuses atomics on device memory.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/descriptor.pb.h"
#include "core/device/device_memory.h"
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
  // `memory` gives the staging buffer's page-locked memory.
  static StatusOr<std::unique_ptr<VerbsTarget>> Accept(
      std::shared_ptr<VerbsDevice> device, const proto::QueuePairInfo& offer,
      const RegionTable* regions, std::string peer_name, NotifyTarget notify,
      std::shared_ptr<DeviceMemory> memory);
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

  // The staging buffer: registered while it lives, freed after.
  struct Staging {
    ~Staging();
    std::shared_ptr<DeviceMemory> memory;
    char* data = nullptr;  // kStagingBytes
    std::unique_ptr<VerbsRegistration> mr;
  };

  VerbsTarget(std::shared_ptr<VerbsDevice> device, const RegionTable* regions,
              std::string peer_name, NotifyTarget notify,
              std::shared_ptr<DeviceMemory> memory)
      : device_(std::move(device)),
        regions_(regions),
        peer_name_(std::move(peer_name)),
        notify_(std::move(notify)),
        memory_(std::move(memory)) {}
  void Run();
  proto::VerbsControlReply Handle(const proto::VerbsControl& request);
  Status ClaimNotification(const proto::VerbsControl& request,
                           proto::VerbsControlReply* reply);
  // Publishes (or voids) the claimed cell the request names.
  Status FinishNotification(const proto::VerbsControl& request, bool publish);
  // STAGING_BUFFER / STAGED_PUT / STAGED_GET / STAGED_ATOMIC.
  Status OfferStaging(proto::VerbsControlReply* reply);
  Status StagedPut(const proto::VerbsControl& request);
  Status StagedGet(const proto::VerbsControl& request);
  Status StagedAtomic(const proto::VerbsControl& request);

  const std::shared_ptr<VerbsDevice> device_;
  const RegionTable* const regions_;
  const std::string peer_name_;
  const NotifyTarget notify_;
  const std::shared_ptr<DeviceMemory> memory_;
  // Made on the first STAGING_BUFFER; only the serving thread touches it.
  std::unique_ptr<Staging> staging_;
  // Cells claimed and not yet published or voided; only the serving thread
  // touches it.
  std::map<uint64_t, Claim> claims_;
  std::unique_ptr<QueuePair> qp_;  // replaced only by the serving thread
  net::UniqueFd fd_;
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

// A connection's staging buffer: the most bytes of a staged region one
// STAGED_PUT / STAGED_GET moves. Large enough that a device copy runs near
// the bus's speed, small enough to cost little per connection that stages.
inline constexpr size_t kStagingBytes = 512 << 10;

// Queue pair sizes of a target (it never posts).
QueuePairOptions TargetQueuePairOptions();

}  // namespace ps::xfer::internal
