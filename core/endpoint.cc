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

}  // namespace

Request Endpoint::PostOp(const Op& op) {
  Status s =
      PreCheck(op.remote->endpoint_ == this, *op.remote, op.type, op.segs());
  if (s.ok() && op.notify_remote != nullptr) {
    Segment flag{nullptr, op.notify_offset, 8};
    s = PreCheck(op.notify_remote->endpoint_ == this, *op.notify_remote,
                 OpType::kPut, {&flag, 1});
    if (s.ok() && op.notify_offset % 8 != 0) {
      s = InvalidArgument("notify word at offset " +
                          std::to_string(op.notify_offset) +
                          " is not 8-byte aligned");
    }
  }
  if (!s.ok()) return Request(std::move(s));
  return transport_->Post(op);
}

Request Endpoint::PostPut(const void* src, size_t length,
                          const RemoteRegion& dst, uint64_t offset) {
  Op op;
  op.type = OpType::kPut;
  op.remote = &dst;
  op.single = Segment{const_cast<void*>(src), offset, length};
  return PostOp(op);
}

Request Endpoint::PostGet(void* dst, size_t length, const RemoteRegion& src,
                          uint64_t offset) {
  Op op;
  op.type = OpType::kGet;
  op.remote = &src;
  op.single = Segment{dst, offset, length};
  return PostOp(op);
}

Request Endpoint::PostWriteV(std::span<const Segment> segments,
                             const RemoteRegion& dst) {
  if (segments.empty()) return Request();
  Op op;
  op.type = OpType::kWriteV;
  op.remote = &dst;
  op.segments = segments;
  return PostOp(op);
}

Request Endpoint::PostReadV(std::span<const Segment> segments,
                            const RemoteRegion& src) {
  if (segments.empty()) return Request();
  Op op;
  op.type = OpType::kReadV;
  op.remote = &src;
  op.segments = segments;
  return PostOp(op);
}

Request Endpoint::PostFetchAdd64(const RemoteRegion& dst, uint64_t offset,
                                 uint64_t value, uint64_t* previous) {
  Op op;
  op.type = OpType::kFetchAdd;
  op.remote = &dst;
  op.single = Segment{nullptr, offset, 8};
  op.operand0 = value;
  op.result = previous;
  return PostOp(op);
}

Request Endpoint::PostCompareSwap64(const RemoteRegion& dst, uint64_t offset,
                                    uint64_t expected, uint64_t desired,
                                    uint64_t* previous) {
  Op op;
  op.type = OpType::kCompareSwap;
  op.remote = &dst;
  op.single = Segment{nullptr, offset, 8};
  op.operand0 = expected;
  op.operand1 = desired;
  op.result = previous;
  return PostOp(op);
}

Request Endpoint::PostPutWithNotify(const void* src, size_t length,
                                    const RemoteRegion& dst, uint64_t offset,
                                    const RemoteRegion& notify_region,
                                    uint64_t notify_offset,
                                    uint64_t notify_value) {
  Op op;
  op.type = OpType::kPutNotify;
  op.remote = &dst;
  op.single = Segment{const_cast<void*>(src), offset, length};
  op.notify_remote = &notify_region;
  op.notify_offset = notify_offset;
  op.notify_value = notify_value;
  return PostOp(op);
}

Request Endpoint::Post(const Batch& batch) {
  for (const Op& op : batch.ops()) {
    Status s =
        PreCheck(op.remote->endpoint_ == this, *op.remote, op.type, op.segs());
    if (!s.ok()) return Request(std::move(s));
  }
  if (batch.empty()) return Request();
  return transport_->PostBatch(batch.ops());
}

Status Endpoint::Put(const void* src, size_t length, const RemoteRegion& dst,
                     uint64_t offset) {
  return PostPut(src, length, dst, offset).Wait();
}

Status Endpoint::Get(void* dst, size_t length, const RemoteRegion& src,
                     uint64_t offset) {
  return PostGet(dst, length, src, offset).Wait();
}

Status Endpoint::WriteV(std::span<const Segment> segments,
                        const RemoteRegion& dst) {
  return PostWriteV(segments, dst).Wait();
}

Status Endpoint::ReadV(std::span<const Segment> segments,
                       const RemoteRegion& src) {
  return PostReadV(segments, src).Wait();
}

StatusOr<uint64_t> Endpoint::FetchAdd64(const RemoteRegion& dst,
                                        uint64_t offset, uint64_t value) {
  uint64_t previous = 0;
  PS_RETURN_IF_ERROR(PostFetchAdd64(dst, offset, value, &previous).Wait());
  return previous;
}

StatusOr<uint64_t> Endpoint::CompareSwap64(const RemoteRegion& dst,
                                           uint64_t offset, uint64_t expected,
                                           uint64_t desired) {
  uint64_t previous = 0;
  PS_RETURN_IF_ERROR(
      PostCompareSwap64(dst, offset, expected, desired, &previous).Wait());
  return previous;
}

Status Endpoint::PutWithNotify(const void* src, size_t length,
                               const RemoteRegion& dst, uint64_t offset,
                               const RemoteRegion& notify_region,
                               uint64_t notify_offset, uint64_t notify_value) {
  return PostPutWithNotify(src, length, dst, offset, notify_region,
                           notify_offset, notify_value)
      .Wait();
}

Status Endpoint::Flush() { return transport_->Flush(); }

}  // namespace ps::xfer
