// internal::ContextImpl: what a Context is made of. It owns the region table
// and the listener, and runs the parts of memory registration and of the
// hello that are the same for every transport; each transport provider
// (transport_registry.cc) does its own part. context.cc holds the life cycle
// and the memory, context_connect.cc the connector's hello, context_accept.cc
// the listener's.
//
// Thread-safety: as Context (any thread); AnswerHello runs on the hello
// acceptor's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "core/context.h"
#include "core/descriptor.pb.h"
#include "core/device/device_memory.h"
#include "core/internal/hello.h"
#include "core/internal/hello_acceptor.h"
#include "core/internal/notification_ring.h"
#include "core/internal/region_table.h"
#include "core/internal/transport_provider.h"
#include "net/connect.h"
#include "net/transfer.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

class DeviceMemory;
class CpuLatencyRequest;

// A random non-zero 64-bit number (keys and instance numbers must never be
// 0: 0 marks a free liveness slot and "no instance").
uint64_t RandomNonZero();

class ContextImpl {
 public:
  explicit ContextImpl(ContextOptions options);
  ~ContextImpl();

  // Starts the providers and the listener.
  Status Start();

  // Gives `region` (data, size, access set) its id and key, registers it
  // with every provider and publishes it.
  StatusOr<std::shared_ptr<MemoryRegion>> AddRegion(
      std::unique_ptr<MemoryRegion> region);
  Status RemoveRegion(uint64_t id);
  // A region over `length` bytes of device memory at `data` on `device`,
  // not yet added.
  std::unique_ptr<MemoryRegion> DeviceRegion(void* data, size_t length,
                                             uint32_t access, int device);
  StatusOr<std::shared_ptr<Endpoint>> Connect(const std::string& address);
  Status Fence();

  // The queue of notifications to this context; set by Start.
  NotificationRing* notifications() const { return notifications_.get(); }

  const ContextOptions options_;
  const uint64_t instance_;
  const std::string host_id_;
  std::string address_;

 private:
  // The reply to a peer's completed (and authenticated) hello, and what
  // serves its connection afterwards.
  HelloAcceptor::Answer AnswerHello(const proto::Hello& hello,
                                    bool same_host_socket);
  HelloIdentity Identity() const {
    return {options_.name, instance_, host_id_, options_.secret};
  }
  TransportProvider* FindProvider(uint32_t id) const;

  RegionTable regions_;
  // Shared with the providers' servers, which may outlive the context.
  std::shared_ptr<NotificationRing> notifications_;

 public:
  // Shared with the transports and providers (link_stats.h).
  const std::shared_ptr<LinkCounters> link_counters_ =
      options_.link_counters != nullptr ? options_.link_counters
                                        : std::make_shared<LinkCounters>();
  // Device memory's driver (core/device/device_memory.h), loaded on first
  // use; shared with the device regions.
  const std::shared_ptr<DeviceMemory> device_memory_ = DeviceMemory::Create();

 private:
  std::atomic<uint64_t> next_region_id_{1};
  // In order of preference (transport_registry.cc).
  std::vector<std::shared_ptr<TransportProvider>> providers_;
  std::unique_ptr<HelloAcceptor> acceptor_;
  // Held while the context lives; null without cpu_wakeup_latency_us.
  std::unique_ptr<CpuLatencyRequest> cpu_latency_;
  std::mutex endpoints_mu_;
  std::vector<std::weak_ptr<Endpoint>> endpoints_;  // for Fence
};

}  // namespace ps::xfer::internal
