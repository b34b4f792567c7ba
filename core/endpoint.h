// Endpoint: this process's connection to one peer Context, through which it
// reads and writes the peer's registered memory without the peer's
// application code taking part.
//
// Semantics (tested in tests/core):
// - No ordering between operations unless separated by Flush or a fence
//   (WriteFence, ReadFence), or tied by PutWithNotify (the notify word is
//   never visible before the data).
// - A completed Put is visible to any later Get, from any origin.
// - Atomics are atomic against other atomics on the same 8-byte aligned word,
//   from any origin and any transport.
// - Every operation is checked against the target region's bounds, access
//   flags, key and owner instance; a violation comes back as a Status
//   (kOutOfRange, kAccessDenied, kInvalidKey, kStaleDescriptor,
//   kNotRegistered) and the target keeps serving.
// - A lost peer (exited, crashed, connection broken, or silent for longer
//   than the context's peer timeout) fails operations with kPeerLost; nothing
//   hangs. Connect again to reach a restarted peer.
//
// Local buffers need no registration. For non-blocking forms, source buffers
// may be reused once the call returns; destination buffers (Get, ReadV,
// atomic results) must stay valid until the request completes.
//
// Thread-safe: any number of threads may issue operations at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "core/remote_region.h"
#include "core/request.h"
#include "core/segment.h"
#include "core/transport_kind.h"

namespace ps::xfer {

namespace internal {
class ContextImpl;
class DeviceMemory;
class Transport;
class TransportProvider;
struct Op;
}  // namespace internal
class Batch;

class Endpoint {
 public:
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  const std::string& peer_name() const { return peer_name_; }
  uint64_t peer_instance() const { return peer_instance_; }
  TransportKind transport() const { return kind_; }
  // True once the peer was declared lost; every later operation fails.
  bool lost() const;

  // Parses a peer's region descriptor. kStaleDescriptor if it was made by
  // another instance (an earlier life) of this endpoint's peer,
  // kInvalidArgument if it is not a descriptor or belongs to another peer.
  StatusOr<RemoteRegion> Import(std::string_view descriptor);

  // Blocking forms: return when the operation completed at the target.
  Status Put(const void* src, size_t length, const RemoteRegion& dst,
             uint64_t offset);
  Status Get(void* dst, size_t length, const RemoteRegion& src,
             uint64_t offset);
  Status WriteV(std::span<const Segment> segments, const RemoteRegion& dst);
  Status ReadV(std::span<const Segment> segments, const RemoteRegion& src);
  // Adds `value` to the 8-byte word at `offset`; returns the previous value.
  StatusOr<uint64_t> FetchAdd64(const RemoteRegion& dst, uint64_t offset,
                                uint64_t value);
  // Stores `desired` if the word equals `expected`; returns the previous
  // value (equal to `expected` when the swap happened).
  StatusOr<uint64_t> CompareSwap64(const RemoteRegion& dst, uint64_t offset,
                                   uint64_t expected, uint64_t desired);
  // Writes the data, then stores `notify_value` into the 8-byte word at
  // `notify_offset` of `notify_region` such that a reader who sees the new
  // word value also sees all of the data.
  Status PutWithNotify(const void* src, size_t length, const RemoteRegion& dst,
                       uint64_t offset, const RemoteRegion& notify_region,
                       uint64_t notify_offset, uint64_t notify_value);

  // Non-blocking forms.
  Request PostPut(const void* src, size_t length, const RemoteRegion& dst,
                  uint64_t offset);
  Request PostGet(void* dst, size_t length, const RemoteRegion& src,
                  uint64_t offset);
  Request PostWriteV(std::span<const Segment> segments,
                     const RemoteRegion& dst);
  Request PostReadV(std::span<const Segment> segments, const RemoteRegion& src);
  Request PostFetchAdd64(const RemoteRegion& dst, uint64_t offset,
                         uint64_t value, uint64_t* previous);
  Request PostCompareSwap64(const RemoteRegion& dst, uint64_t offset,
                            uint64_t expected, uint64_t desired,
                            uint64_t* previous);
  Request PostPutWithNotify(const void* src, size_t length,
                            const RemoteRegion& dst, uint64_t offset,
                            const RemoteRegion& notify_region,
                            uint64_t notify_offset, uint64_t notify_value);
  // Posts every operation of `batch` at once (one system call on tcp); the
  // request completes when all have, with the first failure if any.
  Request Post(const Batch& batch);

  // Waits until every operation posted to this peer before the call has
  // completed and is visible. Returns the first error among them, if any.
  Status Flush();

  // Fences: cheaper than Flush where the transport allows, and weaker.
  // Each returns kPeerLost once the peer is lost; an operation's own error
  // comes from its request and from the next Flush (where a transport
  // falls back to Flush, as verbs does, the fence may return it instead).
  //
  // WriteFence: every Put, WriteV, PutWithNotify and atomic posted before
  // the call takes effect at the target before any operation posted after
  // it. It orders; it does not say that they are done. tcp: free (the
  // target executes one connection's requests in order); shm: free unless
  // operations on the peer's application memory are still in flight.
  Status WriteFence();
  // ReadFence: every Get, ReadV and atomic posted before the call has
  // completed: its data (previous value) is in local memory. tcp: waits
  // for the last read's reply only, not for the writes after it; shm:
  // free unless reads of the peer's application memory are in flight.
  Status ReadFence();

 private:
  friend class internal::ContextImpl;
  Endpoint(std::string peer_name, uint64_t peer_instance,
           std::shared_ptr<internal::TransportProvider> provider,
           std::unique_ptr<internal::Transport> transport);
  Request PostOp(const internal::Op& op);
  // The blocking form of PostOp.
  Status RunOp(const internal::Op& op);
  // The early checks of `op` against its regions' descriptors.
  Status PreCheckOp(const internal::Op& op) const;
  // RunOp with local buffers in device memory staged through host memory
  // (ContextOptions::device_buffers; core/device/device_staged_op.cc).
  Status RunStaged(const internal::Op& op);

  const std::string peer_name_;
  const uint64_t peer_instance_;
  const TransportKind kind_;
  // Unpacks imported regions' keys; kept alive past the Context.
  const std::shared_ptr<internal::TransportProvider> provider_;
  const std::unique_ptr<internal::Transport> transport_;
  // Set when ContextOptions::device_buffers: local buffers are looked up
  // and device ones staged.
  std::shared_ptr<internal::DeviceMemory> device_buffers_;
};

}  // namespace ps::xfer
