#include "core/endpoint.h"

#include "core/batch.h"
#include "core/descriptor.pb.h"
#include "core/internal/op.h"
#include "core/internal/region_table.h"
#include "core/internal/transport.h"
#include "core/internal/transport_provider.h"

namespace ps::xfer {

using internal::Op;
using internal::OpType;

Endpoint::Endpoint(std::string peer_name, uint64_t peer_instance,
                   std::shared_ptr<internal::TransportProvider> provider,
                   std::unique_ptr<internal::Transport> transport)
    : peer_name_(std::move(peer_name)),
      peer_instance_(peer_instance),
      kind_(provider->kind()),
      provider_(std::move(provider)),
      transport_(std::move(transport)) {}

Endpoint::~Endpoint() = default;

bool Endpoint::lost() const { return transport_->lost(); }

StatusOr<RemoteRegion> Endpoint::Import(std::string_view descriptor) {
  proto::RegionDescriptor d;
  if (!d.ParseFromArray(descriptor.data(),
                        static_cast<int>(descriptor.size())) ||
      d.region_id() == 0 || d.instance() == 0) {
    return InvalidArgument("not a region descriptor (" +
                           std::to_string(descriptor.size()) + " bytes)");
  }
  const std::string what =
      "region " + std::to_string(d.region_id()) + " of " + d.owner();
  if (d.owner() != peer_name_) {
    return InvalidArgument(what + " does not belong to this endpoint's peer " +
                           peer_name_);
  }
  if (d.instance() != peer_instance_) {
    return StaleDescriptor(what + " comes from an earlier instance of " +
                           peer_name_ + "; ask the peer for a fresh one");
  }
  // The key this endpoint's provider reads, made into its per-region state
  // (absent when the owner's provider has nothing to say about the region).
  const proto::TransportKey* key = nullptr;
  for (const proto::TransportKey& k : d.transports()) {
    if (k.provider() == provider_->id()) key = &k;
  }
  RemoteRegion r;
  PS_ASSIGN_OR_RETURN(
      r.state_,
      provider_->Unpack(key != nullptr ? std::string_view(key->key()) : "",
                        key != nullptr));
  r.endpoint_ = this;
  r.id_ = d.region_id();
  r.key_ = d.key();
  r.size_ = d.size();
  r.access_ = d.access();
  if (d.memory_kind() > static_cast<uint32_t>(MemoryKind::kCudaDevice)) {
    return InvalidArgument(what + " is in memory of kind " +
                           std::to_string(d.memory_kind()) +
                           ", which this build does not know");
  }
  r.memory_kind_ = static_cast<MemoryKind>(d.memory_kind());
  r.device_ = d.device();
  r.instance_ = d.instance();
  r.owner_ = d.owner();
  return r;
}

namespace {

uint32_t NeededAccess(OpType type) {
  switch (type) {
    case OpType::kGet:
    case OpType::kReadV:
      return kRemoteRead;
    case OpType::kFetchAdd:
    case OpType::kCompareSwap:
      return kRemoteAtomic;
    default:
      return kRemoteWrite;
  }
}

// Early checks against what the descriptor claims; cheap, and they spare a
// round trip for the common mistakes. The target checks its own truth again.
Status PreCheck(bool ours, const RemoteRegion& r, OpType type,
                std::span<const Segment> segs) {
  auto where = [&] {
    return "region " + std::to_string(r.id()) + " on " + r.owner();
  };
  if (!ours) {
    return InvalidArgument(where() + " was imported by another endpoint");
  }
  uint32_t need = NeededAccess(type);
  if ((r.access() & need) != need) {
    return AccessDenied(where() + " allows " + AccessToString(r.access()) +
                        ", not " + AccessToString(need));
  }
  for (const Segment& s : segs) {
    if (!internal::InBounds(s.remote_offset, s.length, r.size())) {
      return OutOfRange(where() + ": offset " +
                        std::to_string(s.remote_offset) + " + " +
                        std::to_string(s.length) + " is past its end (" +
                        std::to_string(r.size()) + " bytes)");
    }
  }
  if ((type == OpType::kFetchAdd || type == OpType::kCompareSwap) &&
      segs[0].remote_offset % 8 != 0) {
    return InvalidArgument(where() + ": atomic at offset " +
                           std::to_string(segs[0].remote_offset) +
                           " is not 8-byte aligned");
  }
  return Status::OK();
}

Op PutOp(const void* src, size_t length, const RemoteRegion& dst,
         uint64_t offset) {
  Op op;
  op.type = OpType::kPut;
  op.remote = &dst;
  op.single = Segment{const_cast<void*>(src), offset, length};
  return op;
}

Op GetOp(void* dst, size_t length, const RemoteRegion& src, uint64_t offset) {
  Op op;
  op.type = OpType::kGet;
  op.remote = &src;
  op.single = Segment{dst, offset, length};
  return op;
}

Op VectorOp(OpType type, std::span<const Segment> segments,
            const RemoteRegion& r) {
  Op op;
  op.type = type;
  op.remote = &r;
  op.segments = segments;
  return op;
}

Op FetchAddOp(const RemoteRegion& dst, uint64_t offset, uint64_t value,
              uint64_t* previous) {
  Op op;
  op.type = OpType::kFetchAdd;
  op.remote = &dst;
  op.single = Segment{nullptr, offset, 8};
  op.operand0 = value;
  op.result = previous;
  return op;
}

Op CompareSwapOp(const RemoteRegion& dst, uint64_t offset, uint64_t expected,
                 uint64_t desired, uint64_t* previous) {
  Op op;
  op.type = OpType::kCompareSwap;
  op.remote = &dst;
  op.single = Segment{nullptr, offset, 8};
  op.operand0 = expected;
  op.operand1 = desired;
  op.result = previous;
  return op;
}

Op PutNotifyOp(const void* src, size_t length, const RemoteRegion& dst,
               uint64_t offset, const RemoteRegion& notify_region,
               uint64_t notify_offset, uint64_t notify_value) {
  Op op;
  op.type = OpType::kPutNotify;
  op.remote = &dst;
  op.single = Segment{const_cast<void*>(src), offset, length};
  op.notify_remote = &notify_region;
  op.notify_offset = notify_offset;
  op.notify_value = notify_value;
  return op;
}

}  // namespace

Status Endpoint::PreCheckOp(const Op& op) const {
  // Every check of PreCheck, decided without a call or a message: the
  // common case.
  const RemoteRegion& r = *op.remote;
  const uint32_t need = NeededAccess(op.type);
  bool pass = r.endpoint_ == this && (r.access_ & need) == need;
  if (op.segments.empty()) {
    pass = pass && internal::InBounds(op.single.remote_offset, op.single.length,
                                      r.size_);
  } else {
    for (const Segment& s : op.segments) {
      pass = pass && internal::InBounds(s.remote_offset, s.length, r.size_);
    }
  }
  if (op.type == OpType::kFetchAdd || op.type == OpType::kCompareSwap) {
    pass = pass && op.single.remote_offset % 8 == 0;
  }
  if (op.notify_remote != nullptr) {
    const RemoteRegion& n = *op.notify_remote;
    pass = pass && n.endpoint_ == this &&
           (n.access_ & kRemoteWrite) == kRemoteWrite &&
           internal::InBounds(op.notify_offset, 8, n.size_) &&
           op.notify_offset % 8 == 0;
  }
  if (pass) [[likely]] {
    return Status::OK();
  }
  const bool ours = r.endpoint_ == this;
  Segment flag{nullptr, op.notify_offset, 8};
  // The slow path words the first failure.
  PS_RETURN_IF_ERROR(PreCheck(ours, *op.remote, op.type, op.segs()));
  if (op.notify_remote == nullptr) return Internal("pre-checks disagree");
  PS_RETURN_IF_ERROR(PreCheck(op.notify_remote->endpoint_ == this,
                              *op.notify_remote, OpType::kPut, {&flag, 1}));
  return InvalidArgument("notify word at offset " +
                         std::to_string(op.notify_offset) +
                         " is not 8-byte aligned");
}

Request Endpoint::PostOp(const Op& op) {
  Status s = PreCheckOp(op);
  if (!s.ok()) [[unlikely]] {
    return Request(std::move(s));
  }
  if (device_buffers_ != nullptr) [[unlikely]] {
    return Request(RunStaged(op));
  }
  return transport_->Post(op);
}

Status Endpoint::RunOp(const Op& op) {
  PS_RETURN_IF_ERROR(PreCheckOp(op));
  if (device_buffers_ != nullptr) [[unlikely]] {
    return RunStaged(op);
  }
  return transport_->Run(op);
}

Request Endpoint::PostPut(const void* src, size_t length,
                          const RemoteRegion& dst, uint64_t offset) {
  return PostOp(PutOp(src, length, dst, offset));
}

Request Endpoint::PostGet(void* dst, size_t length, const RemoteRegion& src,
                          uint64_t offset) {
  return PostOp(GetOp(dst, length, src, offset));
}

Request Endpoint::PostWriteV(std::span<const Segment> segments,
                             const RemoteRegion& dst) {
  if (segments.empty()) return Request();
  return PostOp(VectorOp(OpType::kWriteV, segments, dst));
}

Request Endpoint::PostReadV(std::span<const Segment> segments,
                            const RemoteRegion& src) {
  if (segments.empty()) return Request();
  return PostOp(VectorOp(OpType::kReadV, segments, src));
}

Request Endpoint::PostFetchAdd64(const RemoteRegion& dst, uint64_t offset,
                                 uint64_t value, uint64_t* previous) {
  return PostOp(FetchAddOp(dst, offset, value, previous));
}

Request Endpoint::PostCompareSwap64(const RemoteRegion& dst, uint64_t offset,
                                    uint64_t expected, uint64_t desired,
                                    uint64_t* previous) {
  return PostOp(CompareSwapOp(dst, offset, expected, desired, previous));
}

Request Endpoint::PostPutWithNotify(const void* src, size_t length,
                                    const RemoteRegion& dst, uint64_t offset,
                                    const RemoteRegion& notify_region,
                                    uint64_t notify_offset,
                                    uint64_t notify_value) {
  return PostOp(PutNotifyOp(src, length, dst, offset, notify_region,
                            notify_offset, notify_value));
}

Request Endpoint::Post(const Batch& batch) {
  for (const Op& op : batch.ops()) {
    Status s =
        PreCheck(op.remote->endpoint_ == this, *op.remote, op.type, op.segs());
    if (!s.ok()) return Request(std::move(s));
  }
  if (batch.empty()) return Request();
  if (device_buffers_ != nullptr) [[unlikely]] {
    // Each operation staged on its own, in order.
    Status first;
    for (const Op& op : batch.ops()) {
      Status s = RunStaged(op);
      if (first.ok()) first = std::move(s);
    }
    return Request(std::move(first));
  }
  return transport_->PostBatch(batch.ops());
}

Status Endpoint::Put(const void* src, size_t length, const RemoteRegion& dst,
                     uint64_t offset) {
  return RunOp(PutOp(src, length, dst, offset));
}

Status Endpoint::Get(void* dst, size_t length, const RemoteRegion& src,
                     uint64_t offset) {
  return RunOp(GetOp(dst, length, src, offset));
}

Status Endpoint::WriteV(std::span<const Segment> segments,
                        const RemoteRegion& dst) {
  if (segments.empty()) return Status::OK();
  return RunOp(VectorOp(OpType::kWriteV, segments, dst));
}

Status Endpoint::ReadV(std::span<const Segment> segments,
                       const RemoteRegion& src) {
  if (segments.empty()) return Status::OK();
  return RunOp(VectorOp(OpType::kReadV, segments, src));
}

StatusOr<uint64_t> Endpoint::FetchAdd64(const RemoteRegion& dst,
                                        uint64_t offset, uint64_t value) {
  uint64_t previous = 0;
  PS_RETURN_IF_ERROR(RunOp(FetchAddOp(dst, offset, value, &previous)));
  return previous;
}

StatusOr<uint64_t> Endpoint::CompareSwap64(const RemoteRegion& dst,
                                           uint64_t offset, uint64_t expected,
                                           uint64_t desired) {
  uint64_t previous = 0;
  PS_RETURN_IF_ERROR(
      RunOp(CompareSwapOp(dst, offset, expected, desired, &previous)));
  return previous;
}

Status Endpoint::PutWithNotify(const void* src, size_t length,
                               const RemoteRegion& dst, uint64_t offset,
                               const RemoteRegion& notify_region,
                               uint64_t notify_offset, uint64_t notify_value) {
  return RunOp(PutNotifyOp(src, length, dst, offset, notify_region,
                           notify_offset, notify_value));
}

Status Endpoint::Flush() { return transport_->Flush(); }

Status Endpoint::WriteFence() { return transport_->WriteFence(); }

Status Endpoint::ReadFence() { return transport_->ReadFence(); }

}  // namespace ps::xfer
