#include "core/stream/stream_server.h"

#include <glog/logging.h>
#include <sys/socket.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "core/internal/poll_backoff.h"
#include "core/stream/device_staging.h"
#include "net/transfer.h"

namespace ps::xfer::internal {
namespace {

using net::RecvAll;
using net::RecvAllV;
using net::SendAllV;
using net::UniqueFd;

using wire::WireOp;

// Socket buffers large enough that a 1 MiB put streams without the sender
// stalling on every window.
constexpr int kSocketBufferBytes = 4 << 20;

std::string OpName(uint16_t op) {
  switch (static_cast<WireOp>(op)) {
    case WireOp::kPut:
      return "put";
    case WireOp::kGet:
      return "get";
    case WireOp::kWriteV:
      return "writev";
    case WireOp::kReadV:
      return "readv";
    case WireOp::kFetchAdd:
      return "fetch-add";
    case WireOp::kCompareSwap:
      return "compare-swap";
    case WireOp::kPutNotify:
      return "put-notify";
    case WireOp::kMapRegion:
      return "map-region";
  }
  return "op " + std::to_string(op);
}

// Reads are served again when an origin repeats them; everything else is
// answered from the session's record (core/stream/stream_session.h).
bool IsRead(uint16_t op) {
  return static_cast<WireOp>(op) == WireOp::kGet ||
         static_cast<WireOp>(op) == WireOp::kReadV;
}

}  // namespace

// Serves one connection. Each Serve* method returns OK to go on with the
// next request, or the reason the connection must close (broken socket, or
// a request whose rest cannot be skipped safely).
class StreamServer::Connection {
 public:
  Connection(int fd, const RegionTable* regions, const std::string& peer,
             const MapRegionHandler& map_region, StreamSession* session,
             const NotifyTarget& notify)
      : fd_(fd),
        regions_(regions),
        peer_(peer),
        map_region_(map_region),
        session_(session),
        notify_(notify) {}

  void Run() {
    for (;;) {
      wire::RequestHeader h;
      Status s = ReadHeader(&h);
      if (!s.ok()) {
        // A peer going away between requests is the normal end.
        if (!s.Is(StatusCode::kPeerLost)) {
          LOG(WARNING) << "xfer: stream connection from " << peer_
                       << " failed: " << s;
        }
        return;
      }
      if (h.magic != wire::kRequestMagic) {
        LOG(WARNING) << "xfer: closing stream connection from " << peer_
                     << ": bad request magic 0x" << std::hex << h.magic;
        return;
      }
      if (session_ != nullptr) session_->Acknowledge(h.acked_through);
      const bool again = session_ != nullptr &&
                         session_->Executed(h.request_id) && !IsRead(h.op);
      s = again ? AnswerAgain(h) : Serve(h);
      if (!s.ok()) {
        if (!s.Is(StatusCode::kPeerLost)) {
          LOG(WARNING) << "xfer: closing stream connection from " << peer_
                       << " after " << OpName(h.op) << " request "
                       << h.request_id << ": " << s;
        }
        return;
      }
    }
  }

 private:
  // Reads the next request's header, polling the socket briefly before it
  // blocks (core/internal/poll_backoff.h): an origin running one operation
  // after another (an atomic, a get) then finds this thread awake.
  Status ReadHeader(wire::RequestHeader* h) {
    size_t got = 0;
    auto try_read = [&]() -> StatusOr<bool> {
      PS_ASSIGN_OR_RETURN(got, net::RecvSome(fd_, h, sizeof(*h), "request"));
      return got > 0;
    };
    PS_RETURN_IF_ERROR(PollBeforeBlocking(poll_backoff_, try_read).status());
    return RecvAll(fd_, reinterpret_cast<char*>(h) + got, sizeof(*h) - got);
  }

  Status Serve(const wire::RequestHeader& h) {
    switch (static_cast<WireOp>(h.op)) {
      case WireOp::kPut:
      case WireOp::kPutNotify:
        return ServePut(h);
      case WireOp::kGet:
        return ServeGet(h);
      case WireOp::kWriteV:
        return ServeWriteV(h);
      case WireOp::kReadV:
        return ServeReadV(h);
      case WireOp::kFetchAdd:
      case WireOp::kCompareSwap:
        return ServeAtomic(h);
      case WireOp::kMapRegion:
        return ServeMapRegion(h);
    }
    // The peer learns why before the connection closes: what follows an
    // unknown request cannot be skipped safely.
    Status unknown = InvalidArgument("unknown op " + std::to_string(h.op) +
                                     " (a peer of another version?)");
    PS_RETURN_IF_ERROR(Reply(h, unknown));
    return unknown;
  }

  StatusOr<std::shared_ptr<MemoryRegion>> Check(uint64_t id, uint64_t key,
                                                uint64_t instance,
                                                uint64_t offset,
                                                uint64_t length,
                                                uint32_t access) const {
    return regions_->Check(id, key, instance, offset, length, access, peer_);
  }

  // The 8-byte word at `offset` of `region`, or why it cannot be used
  // atomically.
  StatusOr<uint64_t*> Word(const MemoryRegion& region, uint64_t offset) const {
    if (region.kind() != MemoryKind::kHost) {
      return NotSupported("region " + std::to_string(region.id()) + " on " +
                          regions_->owner() +
                          " is device memory, which takes no atomic words");
    }
    char* p = static_cast<char*>(region.data()) + offset;
    if (reinterpret_cast<uintptr_t>(p) % alignof(uint64_t) != 0) {
      return InvalidArgument("region " + std::to_string(region.id()) + " on " +
                             regions_->owner() + " (from " + peer_ +
                             "): offset " + std::to_string(offset) +
                             " is not 8-byte aligned");
    }
    return reinterpret_cast<uint64_t*>(p);
  }

  // A write or atomic the session executed on an earlier connection: its
  // payload is thrown away and the reply it got then goes out again. The
  // payload has the limits of a fresh request's: no request carries more
  // than kMaxPayload, and a refused one had at most kMaxSkippedPayload
  // skipped (Reject). A repeat over them is no repeat of anything this
  // session took: the connection closes before a byte of it is skipped.
  Status AnswerAgain(const wire::RequestHeader& h) {
    uint64_t payload = 0;
    switch (static_cast<WireOp>(h.op)) {
      case WireOp::kPut:
      case WireOp::kPutNotify:
        payload = h.length;
        break;
      case WireOp::kWriteV: {
        std::vector<wire::SegmentEntry> table;
        Status bad;
        PS_RETURN_IF_ERROR(ReadSegmentTable(h, &table, &payload, &bad));
        if (!bad.ok()) return bad.WithContext("repeated writev");
        break;
      }
      default:
        break;
    }
    if (payload > wire::kMaxPayload) {
      return InvalidArgument("repeated " + OpName(h.op) + " of " +
                             std::to_string(payload) +
                             " bytes: more than any request carries (" +
                             std::to_string(wire::kMaxPayload) + ")");
    }
    const StreamSession::StoredReply* stored = session_->Find(h.request_id);
    if (stored == nullptr) {
      return Internal("request " + std::to_string(h.request_id) +
                      " came again, but its reply is no longer kept");
    }
    if (stored->status_code != 0 && payload > wire::kMaxSkippedPayload) {
      // As Reject did the first time: the answer, then the end.
      PS_RETURN_IF_ERROR(SendStored(*stored));
      return InvalidArgument("cannot skip the " + std::to_string(payload) +
                             "-byte payload of a repeated rejected request");
    }
    PS_RETURN_IF_ERROR(net::Skip(fd_, payload));
    return SendStored(*stored);
  }

  // Sends a reply the session recorded (AnswerAgain).
  Status SendStored(const StreamSession::StoredReply& stored) {
    wire::ReplyHeader r;
    r.request_id = stored.request_id;
    r.status_code = stored.status_code;
    r.value = stored.value;
    r.message_length = static_cast<uint16_t>(stored.message.size());
    iovec iov[2] = {
        {&r, sizeof(r)},
        {const_cast<char*>(stored.message.data()), stored.message.size()}};
    return SendAllV(fd_, iov, stored.message.empty() ? 1 : 2);
  }

  // Sends the reply: header, error text, then `payload` (may be null). On a
  // session, first records that the request was executed (and the reply of
  // a write or atomic), so a connection that breaks from here on cannot
  // make it run twice.
  Status Reply(const wire::RequestHeader& h, const Status& status,
               uint64_t value = 0, iovec* payload = nullptr,
               size_t payload_count = 0, uint64_t payload_length = 0) {
    wire::ReplyHeader r;
    r.request_id = h.request_id;
    r.value = value;
    std::string_view message;
    if (!status.ok()) {
      r.status_code = static_cast<uint16_t>(status.code());
      message = status.message();
      message = message.substr(
          0, std::min<size_t>(message.size(),
                              std::numeric_limits<uint16_t>::max()));
      r.message_length = static_cast<uint16_t>(message.size());
    } else {
      r.payload_length = payload_length;
    }
    if (session_ != nullptr) {
      StreamSession::StoredReply stored{h.request_id, r.status_code, value,
                                        std::string(message)};
      session_->Record(h.request_id, IsRead(h.op) ? nullptr : &stored);
    }
    if (payload_count == 0) {
      iovec iov[2] = {{&r, sizeof(r)},
                      {const_cast<char*>(message.data()), message.size()}};
      return SendAllV(fd_, iov, message.empty() ? 1 : 2);
    }
    std::vector<iovec> iov;
    iov.reserve(payload_count + 1);
    iov.push_back({&r, sizeof(r)});
    iov.insert(iov.end(), payload, payload + payload_count);
    return SendAllV(fd_, iov.data(), iov.size());
  }

  // Answers a rejected request, then throws away the `payload` bytes that
  // follow it, or gives up on the connection when there are too many.
  Status Reject(const wire::RequestHeader& h, const Status& why,
                uint64_t payload) {
    PS_RETURN_IF_ERROR(Reply(h, why));
    if (payload > wire::kMaxSkippedPayload) {
      return InvalidArgument("cannot skip the " + std::to_string(payload) +
                             "-byte payload of a rejected request (" +
                             why.ToString() + ")");
    }
    return net::Skip(fd_, payload);
  }

  Status ServePut(const wire::RequestHeader& h) {
    const bool notify = static_cast<WireOp>(h.op) == WireOp::kPutNotify;
    if (h.length > wire::kMaxPayload) {
      return Reject(h, InvalidArgument("payload too large"), h.length);
    }
    auto region =
        Check(h.region_id, h.key, h.instance, h.offset, h.length, kRemoteWrite);
    if (!region.ok()) return Reject(h, region.status(), h.length);
    std::shared_ptr<MemoryRegion> notify_region;
    uint64_t* flag = nullptr;
    if (notify) {
      auto n = Check(h.notify_region_id, h.notify_key, h.instance, h.operand1,
                     sizeof(uint64_t), kRemoteWrite);
      if (!n.ok()) return Reject(h, n.status(), h.length);
      notify_region = std::move(*n);
      auto word = Word(*notify_region, h.operand1);
      if (!word.ok()) return Reject(h, word.status(), h.length);
      flag = *word;
    }
    // A notification's cell is claimed before the data moves: a full queue
    // refuses the put with nothing written.
    std::optional<uint64_t> cell;
    if (notify_region != nullptr && (notify_region->access() & kNotifyEvents)) {
      if (notify_.ring == nullptr) {
        return Reject(h,
                      NotSupported("this connection queues no notifications"),
                      h.length);
      }
      StatusOr<uint64_t> claimed = notify_.ring->Claim(notify_.wait);
      if (!claimed.ok()) return Reject(h, claimed.status(), h.length);
      cell = *claimed;
    }
    char* dst = static_cast<char*>((*region)->data()) + h.offset;
    Status copy_failed;
    Status received =
        (*region)->kind() == MemoryKind::kHost
            ? RecvAll(fd_, dst, h.length)
            : staging_.Receive(fd_, **region, dst, h.length, &copy_failed);
    if (!received.ok() || !copy_failed.ok()) {
      if (cell.has_value()) notify_.ring->Void(*cell);
      if (!received.ok()) return received;
      return Reply(h, copy_failed);
    }
    if (flag != nullptr) __atomic_store_n(flag, h.operand0, __ATOMIC_RELEASE);
    if (cell.has_value()) {
      notify_.ring->Publish(
          *cell, Notification{notify_.peer_instance, notify_region->id(),
                              h.operand1, h.operand0});
    }
    return Reply(h, Status::OK());
  }

  Status ServeGet(const wire::RequestHeader& h) {
    auto region =
        Check(h.region_id, h.key, h.instance, h.offset, h.length, kRemoteRead);
    if (!region.ok()) return Reply(h, region.status());
    iovec data{static_cast<char*>((*region)->data()) + h.offset, h.length};
    if ((*region)->kind() != MemoryKind::kHost) {
      return ReplyFromDevice(h, **region, {&data, 1});
    }
    return Reply(h, Status::OK(), 0, &data, 1, h.length);
  }

  // Reads the segment table of a WriteV/ReadV (fresh or repeated) and adds
  // up its lengths into *total. Sets *bad when the request cannot be parsed
  // on: too many segments (the table is not read), or more than kMaxPayload
  // bytes in all (checked before each addition, so the sum cannot wrap);
  // the rest of the request cannot be skipped then, and the connection must
  // close. Returns an error only when the socket failed.
  Status ReadSegmentTable(const wire::RequestHeader& h,
                          std::vector<wire::SegmentEntry>* table,
                          uint64_t* total, Status* bad) {
    *total = 0;
    if (h.length > wire::kMaxSegments) {
      *bad = InvalidArgument(std::to_string(h.length) +
                             " segments exceed the limit of " +
                             std::to_string(wire::kMaxSegments));
      return Status::OK();
    }
    table->resize(h.length);
    PS_RETURN_IF_ERROR(RecvAll(fd_, table->data(),
                               table->size() * sizeof(wire::SegmentEntry)));
    for (const auto& s : *table) {
      if (s.length > wire::kMaxPayload - *total) {
        *bad = InvalidArgument("segments add up to more than " +
                               std::to_string(wire::kMaxPayload) + " bytes");
        return Status::OK();
      }
      *total += s.length;
    }
    return Status::OK();
  }

  // Reads the segment table of a WriteV/ReadV and checks every segment.
  // Sets *why for a request to reject; returns an error only when the
  // connection must close.
  Status ReadSegments(const wire::RequestHeader& h, uint32_t access,
                      std::vector<iovec>* iov, uint64_t* total,
                      std::shared_ptr<MemoryRegion>* region, Status* why) {
    std::vector<wire::SegmentEntry> table;
    Status bad;
    PS_RETURN_IF_ERROR(ReadSegmentTable(h, &table, total, &bad));
    if (!bad.ok()) {
      // The peer learns why before the connection closes.
      PS_RETURN_IF_ERROR(Reply(h, bad));
      return bad;
    }
    // One table lookup for the region; per-segment bounds are then plain
    // comparisons (the full check runs again only to word an error).
    auto r = Check(h.region_id, h.key, h.instance, 0, 0, access);
    if (!r.ok()) {
      *why = r.status();
      return Status::OK();
    }
    *region = std::move(*r);
    char* base = static_cast<char*>((*region)->data());
    iov->reserve(table.size());
    for (const auto& s : table) {
      if (!InBounds(s.offset, s.length, (*region)->size())) {
        auto bad =
            Check(h.region_id, h.key, h.instance, s.offset, s.length, access);
        *why = bad.ok() ? Internal("segment check disagrees") : bad.status();
        return Status::OK();
      }
      iov->push_back({base + s.offset, s.length});
    }
    return Status::OK();
  }

  Status ServeWriteV(const wire::RequestHeader& h) {
    std::vector<iovec> iov;
    uint64_t total = 0;
    std::shared_ptr<MemoryRegion> region;
    Status why;
    PS_RETURN_IF_ERROR(
        ReadSegments(h, kRemoteWrite, &iov, &total, &region, &why));
    if (!why.ok()) return Reject(h, why, total);
    if (region->kind() == MemoryKind::kHost) {
      PS_RETURN_IF_ERROR(RecvAllV(fd_, iov.data(), iov.size()));
      return Reply(h, Status::OK());
    }
    Status copy_failed;
    for (const iovec& s : iov) {
      PS_RETURN_IF_ERROR(staging_.Receive(fd_, *region,
                                          static_cast<char*>(s.iov_base),
                                          s.iov_len, &copy_failed));
    }
    return Reply(h, copy_failed);
  }

  Status ServeReadV(const wire::RequestHeader& h) {
    std::vector<iovec> iov;
    uint64_t total = 0;
    std::shared_ptr<MemoryRegion> region;
    Status why;
    PS_RETURN_IF_ERROR(
        ReadSegments(h, kRemoteRead, &iov, &total, &region, &why));
    if (!why.ok()) return Reply(h, why);
    if (region->kind() != MemoryKind::kHost) {
      return ReplyFromDevice(h, *region, iov);
    }
    return Reply(h, Status::OK(), 0, iov.data(), iov.size(), total);
  }

  // Answers a read of device memory with its bytes copied out first.
  Status ReplyFromDevice(const wire::RequestHeader& h,
                         const MemoryRegion& region,
                         std::span<const iovec> segments) {
    std::vector<char> host;
    Status copied = staging_.Gather(region, segments, &host);
    if (!copied.ok()) return Reply(h, copied);
    iovec data{host.data(), host.size()};
    return Reply(h, Status::OK(), 0, &data, 1, host.size());
  }

  Status ServeAtomic(const wire::RequestHeader& h) {
    auto region = Check(h.region_id, h.key, h.instance, h.offset,
                        sizeof(uint64_t), kRemoteAtomic);
    if (!region.ok()) return Reply(h, region.status());
    auto word = Word(**region, h.offset);
    if (!word.ok()) return Reply(h, word.status());
    uint64_t previous;
    if (static_cast<WireOp>(h.op) == WireOp::kFetchAdd) {
      previous = __atomic_fetch_add(*word, h.operand0, __ATOMIC_SEQ_CST);
    } else {
      previous = h.operand0;
      __atomic_compare_exchange_n(*word, &previous, h.operand1, false,
                                  __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
    return Reply(h, Status::OK(), previous);
  }

  Status ServeMapRegion(const wire::RequestHeader& h) {
    if (!map_region_) {
      return Reply(h, NotSupported("regions of " + regions_->owner() +
                                   " cannot be mapped over this connection"));
    }
    wire::MapReply map{};
    int memfd = -1;
    Status s = map_region_(h, &map, &memfd);
    if (!s.ok()) return Reply(h, s);
    if (memfd < 0) return Reply(h, Internal("map handler gave no memfd"));
    struct {
      wire::ReplyHeader header;
      wire::MapReply map;
    } reply;
    reply.header.request_id = h.request_id;
    reply.header.payload_length = sizeof(wire::MapReply);
    reply.map = map;
    static_assert(sizeof(reply) ==
                  sizeof(wire::ReplyHeader) + sizeof(wire::MapReply));
    return net::SendWithFd(fd_, &reply, sizeof(reply), memfd);
  }

  const int fd_;
  const RegionTable* const regions_;
  const std::string& peer_;
  const MapRegionHandler& map_region_;
  StreamSession* const session_;  // null: the connection cannot resume
  const NotifyTarget& notify_;
  DeviceStaging staging_;
  PollBackoff poll_backoff_;
};

StreamServer::StreamServer(UniqueFd fd, const RegionTable* regions,
                           std::string peer_name, MapRegionHandler map_region,
                           std::shared_ptr<StreamSession> session,
                           NotifyTarget notify,
                           std::unique_ptr<StreamServer> predecessor)
    : fd_(std::move(fd)),
      regions_(regions),
      peer_name_(std::move(peer_name)),
      map_region_(std::move(map_region)),
      session_(std::move(session)),
      notify_(std::move(notify)),
      predecessor_(std::move(predecessor)) {
  int size = kSocketBufferBytes;
  setsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  setsockopt(fd_.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  thread_ = std::thread([this] { Run(); });
}

StreamServer::~StreamServer() {
  Shutdown();
  thread_.join();
}

void StreamServer::Shutdown() { shutdown(fd_.get(), SHUT_RDWR); }

void StreamServer::Run() {
  predecessor_.reset();  // one connection at a time serves the session
  Connection(fd_.get(), regions_, peer_name_, map_region_, session_.get(),
             notify_)
      .Run();
  // Wakes a peer still waiting for replies: the connection is over.
  shutdown(fd_.get(), SHUT_RDWR);
  finished_.store(true);
}

}  // namespace ps::xfer::internal
