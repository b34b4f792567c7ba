#include "core/stream/request_encoder.h"

#include <utility>

namespace ps::xfer::internal {
namespace {

using wire::WireOp;

WireOp ToWire(OpType type) {
  switch (type) {
    case OpType::kPut:
      return WireOp::kPut;
    case OpType::kGet:
      return WireOp::kGet;
    case OpType::kWriteV:
      return WireOp::kWriteV;
    case OpType::kReadV:
      return WireOp::kReadV;
    case OpType::kFetchAdd:
      return WireOp::kFetchAdd;
    case OpType::kCompareSwap:
      return WireOp::kCompareSwap;
    case OpType::kPutNotify:
      return WireOp::kPutNotify;
  }
  return WireOp::kPut;
}

}  // namespace

Status EncodeOp(const Op& op, const std::string& peer,
                const std::shared_ptr<RequestState>& state,
                OutgoingMessage* m) {
  if (op.remote == nullptr) return InvalidArgument("operation without region");
  const RemoteRegion& r = *op.remote;
  wire::RequestHeader h;
  h.op = static_cast<uint16_t>(ToWire(op.type));
  h.region_id = r.id();
  h.key = r.key();
  h.instance = r.instance();
  PendingReply p;
  p.op = static_cast<WireOp>(h.op);
  p.state = state;
  switch (op.type) {
    case OpType::kPut:
    case OpType::kPutNotify:
    case OpType::kGet: {
      h.offset = op.single.remote_offset;
      h.length = op.single.length;
      if (h.length > wire::kMaxPayload) {
        return InvalidArgument("a single transfer is limited to " +
                               std::to_string(wire::kMaxPayload) + " bytes");
      }
      if (op.type == OpType::kPutNotify) {
        if (op.notify_remote == nullptr) {
          return InvalidArgument("put-with-notify without notify region");
        }
        if (op.notify_remote->instance() != r.instance()) {
          return StaleDescriptor(
              "notify region " + std::to_string(op.notify_remote->id()) +
              " and data region " + std::to_string(r.id()) + " of " + peer +
              " come from different instances of it");
        }
        h.operand0 = op.notify_value;
        h.operand1 = op.notify_offset;
        h.notify_region_id = op.notify_remote->id();
        h.notify_key = op.notify_remote->key();
      }
      m->first_iov.push_back(m->iov.size());
      m->headers.push_back(h);
      m->iov.push_back({&m->headers.back(), sizeof(h)});
      if (op.type == OpType::kGet) {
        p.expected_payload = h.length;
        p.destination.push_back({op.single.local, h.length});
      } else if (h.length > 0) {
        m->iov.push_back({op.single.local, h.length});
      }
      break;
    }
    case OpType::kWriteV:
    case OpType::kReadV: {
      auto segs = op.segs();
      if (segs.size() > wire::kMaxSegments) {
        return InvalidArgument(std::to_string(segs.size()) +
                               " segments exceed the limit of " +
                               std::to_string(wire::kMaxSegments));
      }
      std::vector<wire::SegmentEntry> table;
      table.reserve(segs.size());
      uint64_t total = 0;
      for (const Segment& s : segs) {
        if (s.length > wire::kMaxPayload - total) {
          return InvalidArgument("segments add up to more than " +
                                 std::to_string(wire::kMaxPayload) + " bytes");
        }
        total += s.length;
        table.push_back({s.remote_offset, s.length});
      }
      h.length = segs.size();
      m->first_iov.push_back(m->iov.size());
      m->headers.push_back(h);
      m->iov.push_back({&m->headers.back(), sizeof(h)});
      m->tables.push_back(std::move(table));
      m->iov.push_back({m->tables.back().data(),
                        m->tables.back().size() * sizeof(wire::SegmentEntry)});
      if (op.type == OpType::kWriteV) {
        for (const Segment& s : segs) {
          if (s.length > 0) m->iov.push_back({s.local, s.length});
        }
      } else {
        p.expected_payload = total;
        p.destination.reserve(segs.size());
        for (const Segment& s : segs)
          p.destination.push_back({s.local, s.length});
      }
      break;
    }
    case OpType::kFetchAdd:
    case OpType::kCompareSwap:
      h.offset = op.single.remote_offset;
      h.length = sizeof(uint64_t);
      h.operand0 = op.operand0;
      h.operand1 = op.operand1;
      p.result = op.result;
      m->first_iov.push_back(m->iov.size());
      m->headers.push_back(h);
      m->iov.push_back({&m->headers.back(), sizeof(h)});
      break;
  }
  m->pending.push_back(std::move(p));
  return Status::OK();
}

void EncodeMapRegion(uint64_t region_id, uint64_t key, uint64_t instance,
                     wire::MapReply* reply, net::UniqueFd* memfd,
                     const std::shared_ptr<RequestState>& state,
                     OutgoingMessage* m) {
  wire::RequestHeader h;
  h.op = static_cast<uint16_t>(WireOp::kMapRegion);
  h.region_id = region_id;
  h.key = key;
  h.instance = instance;
  m->first_iov.push_back(m->iov.size());
  m->headers.push_back(h);
  m->iov.push_back({&m->headers.back(), sizeof(h)});
  PendingReply p;
  p.op = WireOp::kMapRegion;
  p.state = state;
  p.expected_payload = sizeof(wire::MapReply);
  p.map_reply = reply;
  p.map_fd = memfd;
  m->pending.push_back(std::move(p));
}

}  // namespace ps::xfer::internal
