// internal::QueuePair: one reliable-connected (RC) queue pair with its own
// completion queue, on a VerbsDevice. The origin of a connection posts RDMA
// WRITE/READ/ATOMIC work requests on it; the target keeps the matching queue
// pair alive and never posts: its NIC serves the requests.
//
// Setup: Create (RESET -> INIT), exchange Info() with the peer over the
// bootstrap socket, then Connect(peer info) (-> RTR -> RTS).
#pragma once

#include <infiniband/verbs.h>

#include <memory>

#include "base/status.h"
#include "base/status_or.h"
#include "core/verbs/verbs.pb.h"
#include "core/verbs/verbs_device.h"

namespace ps::xfer::internal {

struct QueuePairOptions {
  // Work requests the send queue holds (and completions the CQ holds).
  int send_depth = 1024;
  int max_sge = 16;
  // Bytes a work request may carry inline (no local key needed).
  int max_inline = 256;
  // Origins wait for completions on a completion channel; targets do not.
  bool completion_channel = true;
};

class QueuePair {
 public:
  static StatusOr<std::unique_ptr<QueuePair>> Create(
      std::shared_ptr<VerbsDevice> device, const QueuePairOptions& options);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  // What the peer needs to connect to this queue pair.
  proto::QueuePairInfo Info() const;
  // RTR with the peer's details, then RTS.
  Status Connect(const proto::QueuePairInfo& peer);
  // Moves the queue pair to the error state: every outstanding work request
  // completes with IBV_WC_WR_FLUSH_ERR.
  void MoveToError();

  ibv_qp* qp() const { return qp_; }
  ibv_cq* cq() const { return cq_; }
  // Null when made without a completion channel.
  ibv_comp_channel* channel() const { return channel_; }
  int max_inline() const { return max_inline_; }
  int max_sge() const { return max_sge_; }
  int send_depth() const { return send_depth_; }

 private:
  QueuePair() = default;

  std::shared_ptr<VerbsDevice> device_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  int max_inline_ = 0;
  int max_sge_ = 1;
  int send_depth_ = 1;
};

}  // namespace ps::xfer::internal
