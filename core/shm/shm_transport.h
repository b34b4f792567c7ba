// internal::ShmTransport: the transport to a peer on the same host. Regions
// the peer allocated (memfd-backed) are mapped into this process and reached
// with memcpy and CPU atomics: the peer's CPU does nothing, and every
// operation completes before Post returns. Regions the peer registered from
// its own memory cannot be mapped; those go through the stream transport on
// the Unix socket that also hands out the memfds. A put-with-notify into a
// kNotifyEvents region also queues its notification in the peer's ring,
// mapped like a region (core/internal/notification_ring.h).
//
// Device regions the peer exported over CUDA IPC (core/shm/device_ipc_key.h)
// are opened here on first use (core/shm/device_imports.h) and reached with
// synchronous device copies (DeviceMemory::Copy), checked against the same
// liveness word, access and bounds as mapped memory: one-sided too. Where
// the export cannot be opened (no driver here, the exporter's own process,
// a container without the GPU) such a region is streamed instead, as are
// device regions the peer did not export, after one log line saying why.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "core/device/device_memory.h"
#include "core/internal/notification_ring.h"
#include "core/internal/transport.h"
#include "core/shm/copy_lanes.h"
#include "core/shm/device_imports.h"
#include "core/shm/remote_mapping.h"
#include "core/stream/stream_transport.h"

namespace ps::xfer::internal {

class ShmTransport : public Transport {
 public:
  // Maps the peer's liveness page over `stream` (a Unix socket connection).
  // `self_instance` is this context's, the sender of our notifications;
  // a put-with-notify waits up to half of `peer_timeout_ms` for room in the
  // peer's notification queue.
  // `lanes` (may be null) share out large writes (copy_lanes.h);
  // `device_memory` opens and copies into the peer's exported device
  // regions.
  static StatusOr<std::unique_ptr<ShmTransport>> Create(
      std::unique_ptr<StreamTransport> stream, std::string peer_name,
      uint64_t peer_instance, uint64_t self_instance, int peer_timeout_ms,
      std::shared_ptr<CopyLanes> lanes,
      std::shared_ptr<DeviceMemory> device_memory);
  ~ShmTransport() override;

  Request Post(const Op& op) override;
  Request PostBatch(std::span<const Op> ops) override;
  Status Run(const Op& op) override;
  Status Flush() override;
  // Mapped operations are complete when Post returns; only streamed ones
  // (application memory of the peer) are waited for.
  Status WriteFence() override;
  Status ReadFence() override { return WriteFence(); }
  bool lost() const override { return stream_->lost(); }

 private:
  ShmTransport(std::unique_ptr<StreamTransport> stream, std::string peer_name,
               uint64_t peer_instance, uint64_t self_instance,
               int peer_timeout_ms, std::shared_ptr<CopyLanes> lanes,
               std::shared_ptr<DeviceMemory> device_memory)
      : stream_(std::move(stream)),
        lanes_(std::move(lanes)),
        imports_(std::make_unique<DeviceImports>(std::move(device_memory))),
        peer_name_(std::move(peer_name)),
        peer_instance_(peer_instance),
        self_instance_(self_instance),
        ring_wait_(peer_timeout_ms / 2) {}

  // How an operation reaches the peer's memory: mapped (memcpy and CPU
  // atomics), with device copies into an exported device region, or
  // through the stream transport (a region the peer registered from its
  // own memory cannot be mapped; nor can a notify word outside mapped
  // memory be stored here).
  enum class Route { kMapped, kDevice, kStreamed };
  Route RouteOf(const Op& op) {
    if (MappingOf(*op.remote)->mappable &&
        (op.notify_remote == nullptr || MappingOf(*op.notify_remote)->mappable))
        [[likely]] {
      return Route::kMapped;
    }
    return RouteSlowly(op);
  }
  // The rest of RouteOf; opens a device region's export on first use.
  [[gnu::noinline]] Route RouteSlowly(const Op& op);
  // The mapping of `region`, made on first use; or why there is none.
  StatusOr<RemoteMapping*> Mapped(const RemoteRegion& region);
  // Checks liveness, access and bounds against the owner's truth and returns
  // the address of `offset`, or null with *why set. Inline, without a call
  // or an allocation, when the region is mapped and the checks pass.
  uint8_t* Resolve(const RemoteRegion& region, uint64_t offset, uint64_t length,
                   uint32_t access, Status* why);
  // The rest of Resolve: the first mapping, a lost peer, a refusal worded.
  [[gnu::noinline, gnu::cold]] uint8_t* ResolveSlowly(
      const RemoteRegion& region, uint64_t offset, uint64_t length,
      uint32_t access, Status* why);
  Status Execute(const Op& op);
  // Execute for Route::kDevice: every segment checked, then copied by the
  // device, complete on return.
  Status ExecuteDevice(const Op& op);
  // Copies `n` bytes from `src` to `dst`, either of which may be the
  // region's device memory when `region` is a device region.
  Status CopyData(const RemoteRegion& region, void* dst, const void* src,
                  size_t n);
  // A Put or WriteV: bytes [begin, end) of its segments laid end to end,
  // from segment `first` on, which starts at byte `first_start`. Streams
  // (streaming_copy.h) when `stream`.
  Status WriteRange(const Op& op, size_t first, uint64_t first_start,
                    uint64_t begin, uint64_t end, bool stream);
  // A WriteV of at least kParallelCopyBytes, shared out over lanes_ in
  // chunks; false when the lanes are busy with another thread's write.
  bool WriteInLanes(const Op& op, uint64_t total, Status* status);
  Status PutOne(const Op& op);
  // Copies a put-with-notify's data, stores its word and, when the word's
  // region asks for events, queues one in the peer's notification ring.
  // `kDevice`: the data region is an exported device region (ExecuteDevice);
  // a template so that Execute's host path pays nothing for device data.
  template <bool kDevice>
  Status PutNotify(const Op& op);
  // The peer's notification ring, mapped on first use.
  StatusOr<NotificationRing*> PeerRing();

  std::unique_ptr<StreamTransport> stream_;
  const std::shared_ptr<CopyLanes> lanes_;  // null: the caller copies alone
  // Closed in the destructor, before stream_'s socket (device_imports.h).
  std::unique_ptr<DeviceImports> imports_;
  std::once_flag device_fallback_logged_;
  const std::string peer_name_;
  const uint64_t peer_instance_;
  const uint64_t self_instance_;
  const std::chrono::milliseconds ring_wait_;
  const uint64_t* liveness_ = nullptr;  // the peer's page, read-only
  std::atomic<uint64_t> flushes_{0};
  std::mutex ring_mu_;  // serializes the ring's first mapping
  std::unique_ptr<NotificationRing> peer_ring_;  // guarded by ring_mu_
  std::atomic<NotificationRing*> peer_ring_ready_{nullptr};
};

}  // namespace ps::xfer::internal
