// Context: one per process. It owns this process's registered memory, listens
// for peers (a TCP address for everyone, a Unix socket for the same host), and
// connects to peers as Endpoints.
//
//   auto ctx = Context::Create({.name = "server-0"}).value();
//   auto rows = ctx->Allocate(1 << 20, kRemoteRead | kRemoteWrite).value();
//   send_to_peer(ctx->address(), rows->descriptor());
//
//   // on the peer:
//   auto ep = peer_ctx->Connect(address).value();
//   RemoteRegion r = ep->Import(descriptor).value();
//   ep->Put(buf, 64, r, 0);
//   ep->Flush();
//   uint64_t old = ep->FetchAdd64(r, 128, 1).value();
//
//   // Completion events: the owner of a kNotifyEvents region sleeps until a
//   // peer's PutWithNotify lands in it.
//   auto inbox = ctx->Allocate(4096, kRemoteWrite | kNotifyEvents).value();
//   Notification n = ctx->WaitNotification(std::chrono::seconds(1)).value();
//
// The transport to each peer is chosen at Connect: shm when the peer runs on
// the same host (memory is mapped and copied directly), verbs (RDMA) when
// both have an RDMA device, tcp otherwise. Options::transport overrides the
// choice (a program's main() may take it from XFER_TRANSPORT:
// core/context_environment.h). Forcing verbs where a side has no device fails
// Connect with kNotSupported.
//
// Peers: with ContextOptions::secret, every connection starts with a
// challenge-response (core/auth.h) in both directions, and a peer that
// cannot prove the secret gets nothing (Connect fails with
// kUnauthenticated; the listener logs the refusal with the peer's address).
// A context without a secret may listen on loopback addresses only. A hello
// has one deadline, peer_timeout_ms, on both sides: a silent or slow peer
// never holds up other connections.
//
// Options: core/context_options.h.
//
// Thread-safety: every method may be called from any number of threads at
// once (the region table takes a shared lock for lookups, the endpoint
// list a mutex; WaitNotification may have many waiters). Endpoints and
// MemoryRegions it hands out are thread-safe too (their headers). The
// destructor must not race any other call: it stops the listener and the
// progress threads and closes every endpoint, so the caller ends its own
// threads' use of the Context first.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "core/access.h"
#include "core/context_options.h"
#include "core/endpoint.h"
#include "core/link_stats.h"
#include "core/memory_region.h"
#include "core/notification.h"

namespace ps::xfer {

namespace internal {
class ContextImpl;
}

class Context {
 public:
  // Starts listening and the progress threads. Fails (kNetwork) if the
  // address cannot be bound, kInvalidArgument for a bad option (also: a
  // non-loopback listen_host without a secret).
  static StatusOr<std::unique_ptr<Context>> Create(ContextOptions options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const std::string& name() const;
  // "host:port" that peers pass to Connect: the advertised host and the
  // bound port.
  std::string address() const;
  uint64_t instance() const;

  // A new page-aligned, zero-filled region of `length` bytes, backed by a
  // memfd so same-host peers can map it.
  StatusOr<std::shared_ptr<MemoryRegion>> Allocate(size_t length,
                                                   uint32_t access);
  // `length` bytes of memory on CUDA device `device` (an ordinal), zeroed,
  // that peers reach like any region: same-host peers over CUDA IPC
  // without this process's CPU, tcp peers (and same-host ones where IPC is
  // not possible) through this process's connection threads, which stage
  // the bytes through page-locked host memory; verbs peers with GPUDirect
  // RDMA where this NIC can register GPU memory, else through this
  // process's CPU too (a registered staging buffer per connection, each
  // operation complete on return: core/verbs/verbs_target.h).
  // A deregistered region's memory is freed once the same-host connections
  // that opened it are gone (CUDA forbids freeing it earlier). Data
  // access only: kRemoteAtomic and kNotifyEvents are kNotSupported (a
  // put-with-notify's word must be in host memory). kNotSupported when the
  // build or the machine has no CUDA device, saying which.
  StatusOr<std::shared_ptr<MemoryRegion>> AllocateDevice(size_t length,
                                                         uint32_t access,
                                                         int device = 0);
  // The same for device memory the caller allocated (cudaMalloc) and keeps
  // until the region is deregistered and released. Not exported over CUDA
  // IPC (the caller's free could not wait for importers): same-host peers
  // reach it through this process's connection threads.
  StatusOr<std::shared_ptr<MemoryRegion>> RegisterDevice(void* device_data,
                                                         size_t length,
                                                         uint32_t access,
                                                         int device = 0);
  // Makes `length` bytes at `data` (owned by the caller, who keeps them
  // alive until Deregister) reachable by peers.
  StatusOr<std::shared_ptr<MemoryRegion>> Register(void* data, size_t length,
                                                   uint32_t access);
  // Peers can no longer reach the region; later operations on it fail with
  // kNotRegistered. kNotRegistered if it was not registered here.
  Status Deregister(const MemoryRegion& region);

  // Connects to the Context listening at `address` ("host:port").
  StatusOr<std::shared_ptr<Endpoint>> Connect(const std::string& address);

  // Flushes every endpoint this context connected.
  Status Fence();

  // Completion events (core/notification.h): every put-with-notify whose
  // notify word lies in a region of this context registered with
  // kNotifyEvents queues one, after the data and the word are in place.
  // Events from one sender's operations that were ordered (by Flush, or by
  // blocking calls) come in that order; others in any order. The event may
  // be read before the sender's operation has returned: a target that
  // exits on it can leave the sender with kPeerLost for a put that landed
  // (have the sender say goodbye, as examples/kv_transfer does).
  //
  // The next notification, waiting up to `timeout` for one: the thread
  // sleeps (a futex, woken by the sender) rather than spins. kTimeout when
  // none came. Any number of threads may wait; each event goes to one.
  StatusOr<Notification> WaitNotification(std::chrono::microseconds timeout);
  // The next notification if one is queued now, else nullopt.
  std::optional<Notification> PollNotification();

  // Reconnects, resumed sessions and lost peers so far (link_stats.h).
  LinkStats link_stats() const;

 private:
  explicit Context(std::unique_ptr<internal::ContextImpl> impl);
  std::unique_ptr<internal::ContextImpl> impl_;
};

}  // namespace ps::xfer
