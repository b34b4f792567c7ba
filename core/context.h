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
// both have an RDMA device, tcp otherwise. Options::transport or the
// environment variable XFER_TRANSPORT=tcp|shm|verbs|auto overrides the
// choice. Forcing verbs where a side has no device fails Connect with
// kNotSupported.
//
// Peers: with ContextOptions::secret, every connection starts with a
// challenge-response (core/auth.h) in both directions, and a peer that
// cannot prove the secret gets nothing (Connect fails with
// kUnauthenticated; the listener logs the refusal with the peer's address).
// A context without a secret may listen on loopback addresses only. A hello
// has one deadline, peer_timeout_ms, on both sides: a silent or slow peer
// never holds up other connections.
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
#include "core/auth.h"
#include "core/endpoint.h"
#include "core/link_stats.h"
#include "core/memory_region.h"
#include "core/notification.h"
#include "net/handshake_gate.h"

namespace ps::xfer {

enum class TransportChoice { kAuto, kShm, kTcp, kVerbs };

struct ContextOptions {
  // Names this process in logs and error messages ("worker-2").
  std::string name = "xfer";
  // Where peers connect. Port 0 picks a free port; see Context::address().
  // The address the listener binds: one address, or 0.0.0.0 / :: for all.
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;
  // The host peers are told to dial (address()); empty: listen_host, or for
  // a wildcard listen_host this host's first non-loopback address
  // (net/advertise.h).
  std::string advertise_host;
  TransportChoice transport = TransportChoice::kAuto;
  // An operation without an answer for this long declares the peer lost;
  // also how long Connect waits for a whole hello.
  int peer_timeout_ms = 10000;
  // A peer that connects here must complete its hello (with a secret, its
  // proof too) within this long, and at most max_handshakes may be in
  // progress at once (one more drops the one that got least far): short
  // and few, so that connections that stay silent cannot keep the peers
  // that know the secret out (core/internal/hello_acceptor.h).
  int handshake_timeout_ms = net::kDefaultHandshakeTimeoutMs;
  size_t max_handshakes = net::kDefaultMaxHandshakes;
  // The cluster's shared secret; empty: peers are not authenticated (only
  // allowed when listen_host is a loopback address).
  ClusterSecret secret;
  // RDMA device for the verbs transport (empty / 0 / -1: the environment's
  // XFER_IB_DEV, XFER_IB_PORT, XFER_IB_GID_INDEX, else the first active
  // device and port, and on RoCE a RoCE v2 GID with an IPv4 address).
  std::string ib_device;
  int ib_port = 0;
  int ib_gid_index = -1;
  // Tests only: host regions that hold no atomics or notify events (as
  // device regions never do) are not registered with the RDMA device, so
  // verbs peers reach them through the staged route that device regions
  // take without GPUDirect (the target's CPU copies; core/verbs/
  // verbs_target.h). Lets machines without a GPU test that route for real.
  bool verbs_stage_host_regions_for_testing = false;
  // Cells of the notification queue (a power of two, 2 to 2^20): the
  // notifications that may wait unread before a put-with-notify into a
  // kNotifyEvents region waits for room (up to peer_timeout_ms) and then
  // fails with kResourceExhausted. 64 bytes each, shared with same-host
  // peers.
  uint32_t notification_capacity = 4096;
  // Threads that copy one large same-host write (512 KiB or more) together,
  // the caller included (1 .. kMaxCopyThreads): 1 copies on the caller's
  // thread alone. One core moves about 14.5 GB/s of a strided source here
  // and two about 19 (core/shm/copy_lanes.h); the helpers spin for 200 us
  // after each write, so more than 1 pays where cores are spare.
  int copy_threads = 1;
  // Where the context counts reconnects and lost peers (link_stats.h); null:
  // counters of its own. Given, they may be read after the context is gone.
  std::shared_ptr<LinkCounters> link_counters;
  // Local buffers of operations (Put sources, Get destinations) may be
  // device memory (cudaMalloc): every operation then asks the CUDA driver
  // where each local buffer lives (about a microsecond) and stages device
  // ones through host memory, which makes it complete on return. false:
  // local buffers must be host memory, and nothing is asked. Copies out of
  // device memory run on the legacy default stream: synchronize your own
  // non-blocking streams before posting a put from memory they write. The
  // copies make the region's device current on the calling thread.
  bool device_buffers = false;
  // While the context lives, asks the kernel to wake every CPU of this
  // machine within this many microseconds (Linux PM QoS,
  // core/internal/cpu_latency_request.h): 0 keeps idle CPUs polling instead
  // of halting. Over tcp an operation waits for the target's CPU; on a VM
  // waking a halted vCPU costs 15-30 us, which is most of an atomic's round
  // trip to an otherwise idle peer. The price: idle CPUs stay busy. Needs
  // root (write access to /dev/cpu_dma_latency); Create fails with
  // kNotSupported saying why otherwise. -1: leave the machine as it is.
  int cpu_wakeup_latency_us = -1;
  static constexpr uint32_t kMaxNotificationCapacity = 1u << 20;
  static constexpr int kMaxCopyThreads = 64;
};

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
