#include "core/verbs/queue_pair.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace ps::xfer::internal {
namespace {

Status VerbsError(const std::string& what, int err) {
  return ErrnoStatus(StatusCode::kNetwork, what, err);
}

}  // namespace

StatusOr<std::unique_ptr<QueuePair>> QueuePair::Create(
    std::shared_ptr<VerbsDevice> device, const QueuePairOptions& options) {
  std::unique_ptr<QueuePair> q(new QueuePair());
  q->device_ = device;
  ibv_context* ctx = device->context();
  ibv_pd* pd = device->pd();
  if (options.completion_channel) {
    q->channel_ = ibv_create_comp_channel(ctx);
    if (q->channel_ == nullptr) {
      return VerbsError("ibv_create_comp_channel", errno);
    }
    // The progress thread polls the channel's fd; reads must not block.
    int flags = fcntl(q->channel_->fd, F_GETFL);
    fcntl(q->channel_->fd, F_SETFL, flags | O_NONBLOCK);
  }
  q->cq_ = ibv_create_cq(ctx, options.send_depth + 1, nullptr, q->channel_, 0);
  if (q->cq_ == nullptr) return VerbsError("ibv_create_cq", errno);

  ibv_qp_init_attr init{};
  init.send_cq = q->cq_;
  init.recv_cq = q->cq_;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = static_cast<uint32_t>(options.send_depth);
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = static_cast<uint32_t>(options.max_sge);
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = static_cast<uint32_t>(options.max_inline);
  q->qp_ = ibv_create_qp(pd, &init);
  if (q->qp_ == nullptr && options.max_inline > 0) {
    init.cap.max_inline_data = 0;  // a device without inline data
    q->qp_ = ibv_create_qp(pd, &init);
  }
  if (q->qp_ == nullptr) return VerbsError("ibv_create_qp", errno);
  q->max_inline_ = static_cast<int>(init.cap.max_inline_data);
  q->max_sge_ = static_cast<int>(init.cap.max_send_sge);
  q->send_depth_ = static_cast<int>(init.cap.max_send_wr);

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = q->device_->port();
  attr.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
                         IBV_ACCESS_REMOTE_ATOMIC;
  if (ibv_modify_qp(q->qp_, &attr,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                        IBV_QP_ACCESS_FLAGS) != 0) {
    return VerbsError("ibv_modify_qp to INIT", errno);
  }
  std::random_device rd;
  q->psn_ = rd() & 0xffffff;
  return q;
}

QueuePair::~QueuePair() {
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
}

proto::QueuePairInfo QueuePair::Info() const {
  proto::QueuePairInfo info;
  info.set_qpn(qp_->qp_num);
  info.set_psn(psn_);
  info.set_gid(std::string(reinterpret_cast<const char*>(device_->gid().raw),
                           sizeof(device_->gid().raw)));
  info.set_lid(device_->lid());
  info.set_mtu(static_cast<uint32_t>(device_->mtu()));
  return info;
}

Status QueuePair::Connect(const proto::QueuePairInfo& peer) {
  if (peer.gid().size() != 16 || peer.mtu() < IBV_MTU_256 ||
      peer.mtu() > IBV_MTU_4096) {
    return InvalidArgument("malformed queue pair details from the peer");
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  // Both sides use the smaller of the two ports' MTUs.
  attr.path_mtu = static_cast<ibv_mtu>(
      std::min<uint32_t>(peer.mtu(), static_cast<uint32_t>(device_->mtu())));
  attr.dest_qp_num = peer.qpn();
  attr.rq_psn = peer.psn();
  attr.max_dest_rd_atomic =
      static_cast<uint8_t>(std::min(device_->max_qp_rd_atom(), 16));
  attr.min_rnr_timer = 12;
  attr.ah_attr.port_num = device_->port();
  attr.ah_attr.dlid = static_cast<uint16_t>(peer.lid());
  if (device_->roce() || peer.lid() == 0) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, peer.gid().data(), 16);
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_->gid_index());
    attr.ah_attr.grh.hop_limit = 64;
  }
  if (ibv_modify_qp(qp_, &attr,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                        IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) !=
      0) {
    return VerbsError("ibv_modify_qp to RTR", errno);
  }
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = psn_;
  // 4.096 us * 2^14 = 67 ms per try, 7 tries: a peer that vanished without
  // closing its socket fails the queue pair in about half a second.
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.max_rd_atomic =
      static_cast<uint8_t>(std::min(device_->max_qp_rd_atom(), 16));
  if (ibv_modify_qp(qp_, &attr,
                    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                        IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
    return VerbsError("ibv_modify_qp to RTS", errno);
  }
  return Status::OK();
}

void QueuePair::MoveToError() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
}

}  // namespace ps::xfer::internal
