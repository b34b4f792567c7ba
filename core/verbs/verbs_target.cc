#include "core/verbs/verbs_target.h"

#include <glog/logging.h>
#include <sys/socket.h>

#include "core/internal/hello.h"

namespace ps::xfer::internal {

QueuePairOptions TargetQueuePairOptions() {
  QueuePairOptions o;
  o.send_depth = 1;
  o.max_sge = 1;
  o.max_inline = 0;
  o.completion_channel = false;
  return o;
}

StatusOr<std::unique_ptr<VerbsTarget>> VerbsTarget::Accept(
    std::shared_ptr<VerbsDevice> device, const proto::QueuePairInfo& offer,
    const RegionTable* regions, std::string peer_name) {
  std::unique_ptr<VerbsTarget> t(
      new VerbsTarget(device, regions, std::move(peer_name)));
  PS_ASSIGN_OR_RETURN(
      t->qp_, QueuePair::Create(std::move(device), TargetQueuePairOptions()));
  PS_RETURN_IF_ERROR(t->qp_->Connect(offer));
  return t;
}

VerbsTarget::~VerbsTarget() {
  if (thread_.joinable()) {
    shutdown(fd_.get(), SHUT_RDWR);
    thread_.join();
  }
}

proto::QueuePairInfo VerbsTarget::Info() const { return qp_->Info(); }

void VerbsTarget::Start(net::UniqueFd fd) {
  fd_ = std::move(fd);
  thread_ = std::thread([this] { Run(); });
}

void VerbsTarget::Run() {
  for (;;) {
    proto::VerbsControl request;
    Status s = RecvMessage(fd_.get(), &request);
    if (!s.ok()) break;  // the origin closed the connection (or broke it)
    s = SendMessage(fd_.get(), Handle(request));
    if (!s.ok()) break;
  }
  VLOG(1) << "verbs connection from " << peer_name_ << " closed";
  qp_.reset();
  finished_.store(true);
}

proto::VerbsControlReply VerbsTarget::Handle(
    const proto::VerbsControl& request) {
  proto::VerbsControlReply reply;
  Status s;
  switch (request.op()) {
    case proto::VerbsControl::DIAGNOSE: {
      auto region = regions_->Check(
          request.region_id(), request.key(), request.instance(),
          request.offset(), request.length(), request.access(), peer_name_);
      s = region.status();
      break;
    }
    case proto::VerbsControl::RECONNECT: {
      auto qp = QueuePair::Create(device_, TargetQueuePairOptions());
      if (qp.ok())
        s = (*qp)->Connect(request.qp());
      else
        s = qp.status();
      if (s.ok()) {
        qp_ = std::move(qp).value();
        *reply.mutable_qp() = qp_->Info();
      }
      break;
    }
    default:
      s = InvalidArgument("unknown verbs control request");
  }
  reply.set_code(static_cast<int>(s.code()));
  reply.set_message(s.message());
  return reply;
}

}  // namespace ps::xfer::internal
