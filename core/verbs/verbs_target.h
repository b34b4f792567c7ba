// internal::VerbsTarget: the target side of one verbs connection. It owns the
// queue pair the origin's NIC talks to (the target's CPU takes no part in the
// transfers) and serves the rare control requests on the bootstrap socket:
// DIAGNOSE (why did the NIC refuse an access: the region table's precise
// answer) and RECONNECT (a new queue pair after the old one went to the error
// state). When the origin closes the socket, the queue pair is destroyed.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/descriptor.pb.h"
#include "core/internal/region_table.h"
#include "core/verbs/queue_pair.h"
#include "core/verbs/verbs.pb.h"
#include "core/verbs/verbs_device.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

class VerbsTarget {
 public:
  // Creates a queue pair connected to the origin's `offer`.
  static StatusOr<std::unique_ptr<VerbsTarget>> Accept(
      std::shared_ptr<VerbsDevice> device, const proto::QueuePairInfo& offer,
      const RegionTable* regions, std::string peer_name);
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
  VerbsTarget(std::shared_ptr<VerbsDevice> device, const RegionTable* regions,
              std::string peer_name)
      : device_(std::move(device)),
        regions_(regions),
        peer_name_(std::move(peer_name)) {}
  void Run();
  proto::VerbsControlReply Handle(const proto::VerbsControl& request);

  const std::shared_ptr<VerbsDevice> device_;
  const RegionTable* const regions_;
  const std::string peer_name_;
  std::unique_ptr<QueuePair> qp_;  // replaced only by the serving thread
  net::UniqueFd fd_;
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

// Queue pair sizes of a target (it never posts).
QueuePairOptions TargetQueuePairOptions();

}  // namespace ps::xfer::internal
