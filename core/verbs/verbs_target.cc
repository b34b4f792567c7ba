#include "core/verbs/verbs_target.h"

#include <glog/logging.h>
#include <sys/socket.h>

#include <cstring>

#include "core/access.h"
#include "core/internal/hello.h"
#include "core/internal/region_state.h"

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
    const RegionTable* regions, std::string peer_name, NotifyTarget notify,
    std::shared_ptr<DeviceMemory> memory) {
  std::unique_ptr<VerbsTarget> t(
      new VerbsTarget(device, regions, std::move(peer_name), std::move(notify),
                      std::move(memory)));
  PS_ASSIGN_OR_RETURN(
      t->qp_, QueuePair::Create(std::move(device), TargetQueuePairOptions()));
  PS_RETURN_IF_ERROR(t->qp_->Connect(offer));
  return t;
}

VerbsTarget::Staging::~Staging() {
  mr.reset();  // the NIC lets go before the memory goes
  if (data != nullptr) memory->FreePinned(data);
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
  // Cells of puts that will never finish: readers skip them.
  for (const auto& [cell, claim] : claims_) notify_.ring->Void(cell);
  claims_.clear();
  qp_.reset();
  staging_.reset();
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
    case proto::VerbsControl::CLAIM_NOTIFICATION:
      s = ClaimNotification(request, &reply);
      break;
    case proto::VerbsControl::PUBLISH_NOTIFICATION:
    case proto::VerbsControl::VOID_NOTIFICATION:
      s = FinishNotification(
          request, request.op() == proto::VerbsControl::PUBLISH_NOTIFICATION);
      break;
    case proto::VerbsControl::STAGING_BUFFER:
      s = OfferStaging(&reply);
      break;
    case proto::VerbsControl::STAGED_PUT:
      s = StagedPut(request);
      break;
    case proto::VerbsControl::STAGED_GET:
      s = StagedGet(request);
      break;
    case proto::VerbsControl::STAGED_ATOMIC:
      s = StagedAtomic(request);
      break;
    default:
      s = InvalidArgument("unknown verbs control request");
  }
  reply.set_code(static_cast<int>(s.code()));
  reply.set_message(s.message());
  return reply;
}

Status VerbsTarget::ClaimNotification(const proto::VerbsControl& request,
                                      proto::VerbsControlReply* reply) {
  PS_ASSIGN_OR_RETURN(
      std::shared_ptr<MemoryRegion> region,
      regions_->Check(request.region_id(), request.key(), request.instance(),
                      request.offset(), sizeof(uint64_t), kRemoteWrite,
                      peer_name_));
  // The owner's truth decides, as on the other transports.
  if (!(region->access() & kNotifyEvents)) {
    return InvalidArgument("region " + std::to_string(region->id()) +
                           " does not queue notification events");
  }
  if (notify_.ring == nullptr) {
    return NotSupported("this connection queues no notifications");
  }
  PS_ASSIGN_OR_RETURN(uint64_t cell, notify_.ring->Claim(notify_.wait));
  claims_[cell] = Claim{region->id(), request.offset()};
  reply->set_cell(cell);
  return Status::OK();
}

Status VerbsTarget::FinishNotification(const proto::VerbsControl& request,
                                       bool publish) {
  auto claim = claims_.find(request.cell());
  if (claim == claims_.end()) {
    return InvalidArgument("notification cell " +
                           std::to_string(request.cell()) +
                           " was not claimed on this connection");
  }
  // The event names the word that was claimed, whatever the request says.
  if (publish) {
    notify_.ring->Publish(
        claim->first,
        Notification{notify_.peer_instance, claim->second.region_id,
                     claim->second.offset, request.value()});
  } else {
    notify_.ring->Void(claim->first);
  }
  claims_.erase(claim);
  return Status::OK();
}

Status VerbsTarget::OfferStaging(proto::VerbsControlReply* reply) {
  if (staging_ == nullptr) {
    auto staging = std::make_unique<Staging>();
    staging->memory = memory_ != nullptr ? memory_ : DeviceMemory::Create();
    staging->data =
        static_cast<char*>(staging->memory->AllocatePinned(kStagingBytes));
    if (staging->data == nullptr) {
      return ResourceExhausted("no staging buffer for " + peer_name_);
    }
    PS_ASSIGN_OR_RETURN(
        staging->mr,
        device_->Register(staging->data, kStagingBytes,
                          kRemoteRead | kRemoteWrite, /*indexed=*/false));
    staging_ = std::move(staging);
  }
  reply->set_staging_address(staging_->mr->address());
  reply->set_staging_rkey(staging_->mr->rkey());
  reply->set_staging_bytes(kStagingBytes);
  return Status::OK();
}

Status VerbsTarget::StagedPut(const proto::VerbsControl& request) {
  // `length` is the rest of the origin's segment from `offset`, checked
  // whole so that a put past the end writes nothing; the piece its start.
  const uint64_t piece = request.piece();
  if (staging_ == nullptr) {
    return InvalidArgument("a staged put before STAGING_BUFFER");
  }
  if (piece > kStagingBytes || piece > request.length()) {
    return InvalidArgument("a staged put of a " + std::to_string(piece) +
                           "-byte piece of " +
                           std::to_string(request.length()) + " bytes");
  }
  PS_ASSIGN_OR_RETURN(
      std::shared_ptr<MemoryRegion> region,
      regions_->Check(request.region_id(), request.key(), request.instance(),
                      request.offset(), request.length(), kRemoteWrite,
                      peer_name_));
  char* dst = static_cast<char*>(region->data()) + request.offset();
  if (region->kind() == MemoryKind::kHost) {
    std::memcpy(dst, staging_->data, piece);
    return Status::OK();
  }
  // Synchronous: the bytes are in the device when the origin hears OK, so
  // a notify word it stores next never shows ahead of them.
  return MemoryRegionAccess::device_memory(*region)->ToDevice(
      region->device(), dst, staging_->data, piece);
}

Status VerbsTarget::StagedGet(const proto::VerbsControl& request) {
  if (staging_ == nullptr) {
    return InvalidArgument("a staged get before STAGING_BUFFER");
  }
  if (request.length() > kStagingBytes) {
    return InvalidArgument("a staged get asks for at most " +
                           std::to_string(kStagingBytes) + " bytes, not " +
                           std::to_string(request.length()));
  }
  PS_ASSIGN_OR_RETURN(
      std::shared_ptr<MemoryRegion> region,
      regions_->Check(request.region_id(), request.key(), request.instance(),
                      request.offset(), request.length(), kRemoteRead,
                      peer_name_));
  const char* src = static_cast<const char*>(region->data()) + request.offset();
  if (region->kind() == MemoryKind::kHost) {
    std::memcpy(staging_->data, src, request.length());
    return Status::OK();
  }
  return MemoryRegionAccess::device_memory(*region)->FromDevice(
      region->device(), staging_->data, src, request.length());
}

Status VerbsTarget::StagedAtomic(const proto::VerbsControl& request) {
  PS_ASSIGN_OR_RETURN(
      std::shared_ptr<MemoryRegion> region,
      regions_->Check(request.region_id(), request.key(), request.instance(),
                      request.offset(), sizeof(uint64_t), kRemoteAtomic,
                      peer_name_));
  return NotSupported("region " + std::to_string(region->id()) + " on " +
                      regions_->owner() +
                      " is staged by its CPU (device memory its RDMA device "
                      "cannot reach), which takes no atomic words");
}

}  // namespace ps::xfer::internal
