#include "core/shm/shm_transport.h"

#include <glog/logging.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/internal/region_table.h"
#include "core/internal/sealed_memfd.h"
#include "core/shm/liveness_page.h"
#include "core/shm/streaming_copy.h"

namespace ps::xfer::internal {
namespace {

// memcpy, with the 8-byte case (a word, the common small put) inline.
inline void Copy(void* dst, const void* src, size_t n) {
  if (n == sizeof(uint64_t)) {
    uint64_t word;
    std::memcpy(&word, src, sizeof(word));
    std::memcpy(dst, &word, sizeof(word));
  } else {
    std::memcpy(dst, src, n);
  }
}

// Writable only where the owner lets peers write: the owner sends a
// read-only descriptor, sealed against writes, for the other regions, on
// which a writable shared mapping fails.
int Protection(uint32_t access) {
  int prot = PROT_NONE;
  if (access & kRemoteRead) prot |= PROT_READ;
  if (PeersMayWrite(access)) prot |= PROT_READ | PROT_WRITE;
  return prot;
}

}  // namespace

StatusOr<std::unique_ptr<ShmTransport>> ShmTransport::Create(
    std::unique_ptr<StreamTransport> stream, std::string peer_name,
    uint64_t peer_instance, uint64_t self_instance, int peer_timeout_ms,
    std::shared_ptr<CopyLanes> lanes,
    std::shared_ptr<DeviceMemory> device_memory) {
  wire::MapReply reply{};
  net::UniqueFd fd;
  PS_RETURN_IF_ERROR(stream->MapRegion(0, 0, peer_instance, &reply, &fd));
  if (reply.size != LivenessPage::kBytes) {
    return Internal("liveness page of " + peer_name + " has size " +
                    std::to_string(reply.size));
  }
  void* p = mmap(nullptr, reply.size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) {
    return ErrnoStatus(StatusCode::kIOError,
                       "mmap liveness page of " + peer_name, errno);
  }
  std::unique_ptr<ShmTransport> t(new ShmTransport(
      std::move(stream), std::move(peer_name), peer_instance, self_instance,
      peer_timeout_ms, std::move(lanes), std::move(device_memory)));
  t->liveness_ = static_cast<const uint64_t*>(p);
  return t;
}

ShmTransport::~ShmTransport() {
  imports_.reset();  // the peer frees exported memory once the socket closes
  if (liveness_ != nullptr) {
    munmap(const_cast<uint64_t*>(liveness_), LivenessPage::kBytes);
  }
}

StatusOr<RemoteMapping*> ShmTransport::Mapped(const RemoteRegion& region) {
  RemoteMapping* m = MappingOf(region);
  if (m->ready.load(std::memory_order_acquire)) return m;
  std::lock_guard<std::mutex> lock(m->mu);
  if (m->ready.load(std::memory_order_relaxed)) return m;
  wire::MapReply reply{};
  net::UniqueFd fd;
  PS_RETURN_IF_ERROR(stream_->MapRegion(region.id(), region.key(),
                                        region.instance(), &reply, &fd));
  if (m->device_export.has_value()) {
    // Device memory: nothing to mmap (the descriptor that came along is
    // the owner's liveness page again, dropped); the export is opened.
    StatusOr<OpenedExport> opened =
        imports_->Open(region.id(), region.key(), *m->device_export);
    const uint64_t offset = m->device_export->offset;
    if (opened.ok() &&
        (offset > opened->bytes || opened->bytes - offset < reply.size)) {
      opened = InvalidArgument(
          "the CUDA IPC key of region " + std::to_string(region.id()) + " of " +
          peer_name_ + " places it past the end of its allocation");
    }
    if (!opened.ok()) {
      m->device_refused.store(true, std::memory_order_release);
      std::call_once(device_fallback_logged_, [&] {
        LOG(WARNING) << "device regions of " << peer_name_
                     << " are staged by its CPU: the CUDA IPC export of "
                        "region "
                     << region.id()
                     << " cannot be opened here: " << opened.status();
      });
      return opened.status();
    }
    m->base = static_cast<uint8_t*>(opened->base) + offset;
    m->device = opened->device;
    m->size = reply.size;
    m->access = reply.access;
    m->slot = reply.state_slot;
    m->ready.store(true, std::memory_order_release);
    return m;
  }
  void* p = mmap(nullptr, reply.size, Protection(reply.access), MAP_SHARED,
                 fd.get(), 0);
  if (p == MAP_FAILED) {
    return ErrnoStatus(
        StatusCode::kIOError,
        "mmap region " + std::to_string(region.id()) + " of " + peer_name_,
        errno);
  }
  m->base = static_cast<uint8_t*>(p);
  m->size = reply.size;
  m->access = reply.access;
  m->slot = reply.state_slot;
  if (m->keep_owner_fd) m->owner_fd = std::move(fd);
  m->ready.store(true, std::memory_order_release);
  return m;
}

// The hot path: a few loads and compares, no call, no allocation.
[[gnu::always_inline]] inline uint8_t* ShmTransport::Resolve(
    const RemoteRegion& region, uint64_t offset, uint64_t length,
    uint32_t access, Status* why) {
  const RemoteMapping* m = MappingOf(region);
  if (!stream_->lost() && m->ready.load(std::memory_order_acquire) &&
      m->slot < LivenessPage::kSlots &&
      __atomic_load_n(&liveness_[m->slot], __ATOMIC_ACQUIRE) == region.key() &&
      (m->access & access) == access && InBounds(offset, length, m->size))
      [[likely]] {
    return m->base + offset;
  }
  return ResolveSlowly(region, offset, length, access, why);
}

uint8_t* ShmTransport::ResolveSlowly(const RemoteRegion& region,
                                     uint64_t offset, uint64_t length,
                                     uint32_t access, Status* why) {
  if (stream_->lost()) {
    *why = PeerLost("peer " + peer_name_ + " lost");
    return nullptr;
  }
  auto mapped = Mapped(region);
  if (!mapped.ok()) {
    *why = mapped.status();
    return nullptr;
  }
  const RemoteMapping& m = **mapped;
  const bool live =
      m.slot < LivenessPage::kSlots &&
      __atomic_load_n(&liveness_[m.slot], __ATOMIC_ACQUIRE) == region.key();
  if (live && (m.access & access) == access &&
      InBounds(offset, length, m.size)) {
    return m.base + offset;  // mapped just now
  }
  const std::string where =
      "region " + std::to_string(region.id()) + " on " + peer_name_;
  if (!live) {
    *why = NotRegistered(where + " is not registered");
  } else if ((m.access & access) != access) {
    *why = AccessDenied(where + " allows " + AccessToString(m.access) +
                        ", not " + AccessToString(access));
  } else {
    *why = OutOfRange(where + ": offset " + std::to_string(offset) + " + " +
                      std::to_string(length) + " is past its end (" +
                      std::to_string(m.size) + " bytes)");
  }
  return nullptr;
}

Status ShmTransport::Execute(const Op& op) {
  const RemoteRegion& r = *op.remote;
  Status why;
  switch (op.type) {
    case OpType::kPut:
    case OpType::kWriteV: {
      // Many segments of a large operation stream (streaming_copy.h), and
      // share them out over the lanes when there are any; one segment is
      // memcpy's to decide.
      uint64_t total = 0;
      for (const Segment& s : op.segs()) total += s.length;
      if (lanes_ != nullptr && total >= kParallelCopyBytes &&
          WriteInLanes(op, total, &why)) {
        return why;
      }
      return WriteRange(op, 0, 0, 0, total, total >= kStreamingCopyBytes);
    }
    case OpType::kGet:
    case OpType::kReadV:
      for (const Segment& s : op.segs()) {
        uint8_t* p = Resolve(r, s.remote_offset, s.length, kRemoteRead, &why);
        if (p == nullptr) return why;
        Copy(s.local, p, s.length);
      }
      return Status::OK();
    case OpType::kFetchAdd: {
      uint8_t* p = Resolve(r, op.single.remote_offset, 8, kRemoteAtomic, &why);
      if (p == nullptr) return why;
      *op.result = __atomic_fetch_add(reinterpret_cast<uint64_t*>(p),
                                      op.operand0, __ATOMIC_SEQ_CST);
      return Status::OK();
    }
    case OpType::kCompareSwap: {
      uint8_t* p = Resolve(r, op.single.remote_offset, 8, kRemoteAtomic, &why);
      if (p == nullptr) return why;
      uint64_t expected = op.operand0;
      __atomic_compare_exchange_n(reinterpret_cast<uint64_t*>(p), &expected,
                                  op.operand1, false, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST);
      *op.result = expected;  // the previous value either way
      return Status::OK();
    }
    case OpType::kPutNotify:
      return PutNotify<false>(op);
  }
  return Internal("unknown operation");
}

ShmTransport::Route ShmTransport::RouteSlowly(const Op& op) {
  if (op.notify_remote != nullptr && !MappingOf(*op.notify_remote)->mappable) {
    return Route::kStreamed;  // the peer stores (or refuses) the word
  }
  RemoteMapping* m = MappingOf(*op.remote);
  if (m->mappable) return Route::kMapped;
  if (!m->device_export.has_value() ||
      m->device_refused.load(std::memory_order_acquire)) {
    return Route::kStreamed;
  }
  // Opens the export; a refusal of the owner's (an unknown key) comes back
  // from ExecuteDevice's checks, one to open it streams from now on.
  if (!m->ready.load(std::memory_order_acquire)) (void)Mapped(*op.remote);
  return m->device_refused.load(std::memory_order_acquire) ? Route::kStreamed
                                                           : Route::kDevice;
}

Status ShmTransport::ExecuteDevice(const Op& op) {
  const RemoteRegion& r = *op.remote;
  Status why;
  switch (op.type) {
    case OpType::kPut:
    case OpType::kWriteV:
    case OpType::kGet:
    case OpType::kReadV: {
      const bool reads = op.type == OpType::kGet || op.type == OpType::kReadV;
      // All checked first: a refused segment leaves nothing written.
      const std::span<const Segment> segs = op.segs();
      std::vector<CopyPiece> pieces;
      pieces.reserve(segs.size());
      for (const Segment& s : segs) {
        uint8_t* p = Resolve(r, s.remote_offset, s.length,
                             reads ? kRemoteRead : kRemoteWrite, &why);
        if (p == nullptr) return why;
        pieces.push_back(reads ? CopyPiece{s.local, p, s.length}
                               : CopyPiece{p, s.local, s.length});
      }
      return imports_->memory().Copy(MappingOf(r)->device, pieces);
    }
    case OpType::kFetchAdd:
    case OpType::kCompareSwap:
      // Device regions never allow atomics: this is the owner's refusal.
      if (Resolve(r, op.single.remote_offset, 8, kRemoteAtomic, &why) ==
          nullptr) {
        return why;
      }
      return NotSupported("device memory takes no atomics");
    case OpType::kPutNotify:
      return PutNotify<true>(op);
  }
  return Internal("unknown operation");
}

Status ShmTransport::CopyData(const RemoteRegion& region, void* dst,
                              const void* src, size_t n) {
  const RemoteMapping* m = MappingOf(region);
  if (!m->device_export.has_value()) {
    Copy(dst, src, n);
    return Status::OK();
  }
  const CopyPiece piece{dst, src, n};
  return imports_->memory().Copy(m->device, {&piece, 1});
}

Status ShmTransport::WriteRange(const Op& op, size_t first,
                                uint64_t first_start, uint64_t begin,
                                uint64_t end, bool stream) {
  const std::span<const Segment> segs = op.segs();
  Status why;
  uint64_t at = first_start;  // where segs[i] starts
  for (size_t i = first; i < segs.size() && at < end; ++i) {
    const Segment& s = segs[i];
    const uint64_t from = std::max(begin, at) - at;
    const uint64_t length = std::min<uint64_t>(s.length, end - at) - from;
    at += s.length;
    if (length == 0) continue;
    uint8_t* p =
        Resolve(*op.remote, s.remote_offset + from, length, kRemoteWrite, &why);
    if (p == nullptr) {
      if (stream) StreamingFence();
      return why;
    }
    const auto* src = static_cast<const uint8_t*>(s.local) + from;
    if (stream) {
      if (i + kStreamingPrefetchAhead < segs.size()) {
        const Segment& later = segs[i + kStreamingPrefetchAhead];
        StreamingPrefetch(later.local, later.length);
      }
      StreamingCopy(p, src, length);
    } else {
      Copy(p, src, length);
    }
  }
  if (stream) StreamingFence();
  return Status::OK();
}

bool ShmTransport::WriteInLanes(const Op& op, uint64_t total, Status* status) {
  const std::span<const Segment> segs = op.segs();
  // starts[i]: where segment i begins in the operation's bytes.
  std::vector<uint64_t> starts(segs.size());
  uint64_t at = 0;
  for (size_t i = 0; i < segs.size(); ++i) {
    starts[i] = at;
    at += segs[i].length;
  }
  const size_t chunks = std::min<uint64_t>(
      (total + kCopyChunkBytes - 1) / kCopyChunkBytes, CopyLanes::kMaxChunks);
  const uint64_t chunk_bytes = (total + chunks - 1) / chunks;
  const CopyLanes::ChunkFn copy = [&](size_t index) {
    const uint64_t begin = index * chunk_bytes;
    const uint64_t end = std::min(total, begin + chunk_bytes);
    // The last segment starting at or before `begin`.
    const size_t first = std::upper_bound(starts.begin(), starts.end(), begin) -
                         starts.begin() - 1;
    return WriteRange(op, first, starts[first], begin, end, true);
  };
  return lanes_->Run(chunks, copy, status);
}

template <bool kDevice>
Status ShmTransport::PutNotify(const Op& op) {
  Status why;
  uint8_t* flag =
      Resolve(*op.notify_remote, op.notify_offset, 8, kRemoteWrite, &why);
  if (flag == nullptr) return why;
  uint8_t* p = Resolve(*op.remote, op.single.remote_offset, op.single.length,
                       kRemoteWrite, &why);
  if (p == nullptr) return why;
  // The owner's truth, mapped by Resolve: whether it wants an event. Its
  // cell is claimed before the data moves, so a full queue refuses the put
  // with nothing written.
  NotificationRing* ring = nullptr;
  uint64_t cell = 0;
  if (MappingOf(*op.notify_remote)->access & kNotifyEvents) {
    PS_ASSIGN_OR_RETURN(ring, PeerRing());
    PS_ASSIGN_OR_RETURN(cell, ring->Claim(ring_wait_));
  }
  if constexpr (kDevice) {
    // Device data is in place when the copy returns (DeviceMemory::Copy is
    // synchronous), before the word says so.
    Status copied = CopyData(*op.remote, p, op.single.local, op.single.length);
    if (!copied.ok()) {
      if (ring != nullptr) ring->Void(cell);
      return copied;
    }
  } else {
    Copy(p, op.single.local, op.single.length);
  }
  // Release: a reader that acquires the new word sees all of the data.
  __atomic_store_n(reinterpret_cast<uint64_t*>(flag), op.notify_value,
                   __ATOMIC_RELEASE);
  if (ring != nullptr) {
    ring->Publish(cell, Notification{self_instance_, op.notify_remote->id(),
                                     op.notify_offset, op.notify_value});
  }
  return Status::OK();
}

StatusOr<NotificationRing*> ShmTransport::PeerRing() {
  if (NotificationRing* ring =
          peer_ring_ready_.load(std::memory_order_acquire)) {
    return ring;
  }
  std::lock_guard<std::mutex> lock(ring_mu_);
  if (peer_ring_ != nullptr) return peer_ring_.get();
  wire::MapReply reply{};
  net::UniqueFd fd;
  PS_RETURN_IF_ERROR(stream_->MapRegion(wire::kNotificationRingId, 0,
                                        peer_instance_, &reply, &fd));
  void* p = mmap(nullptr, reply.size, PROT_READ | PROT_WRITE, MAP_SHARED,
                 fd.get(), 0);
  if (p == MAP_FAILED) {
    return ErrnoStatus(StatusCode::kIOError,
                       "mmap the notification queue of " + peer_name_, errno);
  }
  PS_ASSIGN_OR_RETURN(peer_ring_, NotificationRing::Attach(p, reply.size));
  peer_ring_ready_.store(peer_ring_.get(), std::memory_order_release);
  return peer_ring_.get();
}

// A put of one segment, the latency-bound case, without Execute's switch.
inline Status ShmTransport::PutOne(const Op& op) {
  Status why;
  uint8_t* p = Resolve(*op.remote, op.single.remote_offset, op.single.length,
                       kRemoteWrite, &why);
  if (p == nullptr) return why;
  Copy(p, op.single.local, op.single.length);
  return Status::OK();
}

Request ShmTransport::Post(const Op& op) {
  switch (RouteOf(op)) {
    case Route::kMapped:
      break;
    case Route::kDevice:
      return Request(ExecuteDevice(op));
    case Route::kStreamed:
      return stream_->Post(op);
  }
  if (op.type == OpType::kPut && op.segments.empty()) {
    return Request(PutOne(op));
  }
  return Request(Execute(op));
}

Status ShmTransport::Run(const Op& op) {
  switch (RouteOf(op)) {
    case Route::kMapped:
      break;
    case Route::kDevice:
      return ExecuteDevice(op);
    case Route::kStreamed:
      return stream_->Run(op);
  }
  if (op.type == OpType::kPut && op.segments.empty()) return PutOne(op);
  return Execute(op);
}

Request ShmTransport::PostBatch(std::span<const Op> ops) {
  std::vector<Op> streamed;
  Status first_error;
  for (const Op& op : ops) {
    const Route route = RouteOf(op);
    if (route == Route::kStreamed) {
      streamed.push_back(op);
      continue;
    }
    Status s = route == Route::kDevice ? ExecuteDevice(op) : Execute(op);
    if (!s.ok() && first_error.ok()) first_error = std::move(s);
  }
  if (streamed.empty()) return Request(std::move(first_error));
  Request pending = stream_->PostBatch(streamed);
  if (!first_error.ok()) return Request(std::move(first_error));
  return pending;
}

Status ShmTransport::Flush() {
  // Mapped copies completed on the calling thread; a locked read-modify-write
  // drains this core's store buffer so they are visible before whatever the
  // caller does next (a full fence that TSan, unlike atomic_thread_fence,
  // understands). Then wait for the streamed ones.
  flushes_.fetch_add(1, std::memory_order_seq_cst);
  return stream_->Flush();
}

Status ShmTransport::WriteFence() {
  flushes_.fetch_add(1, std::memory_order_seq_cst);  // as in Flush
  return stream_->Drain();
}

}  // namespace ps::xfer::internal
