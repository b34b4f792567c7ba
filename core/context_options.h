// ContextOptions: how a Context (core/context.h) is made: its name, where it
// listens and what it tells peers, the transport, the peer and handshake
// deadlines, the cluster secret, the RDMA device, the notification queue,
// same-host copy threads and device buffers. A plain value type, copied
// into the Context by Context::Create; apart from context.h so that code
// that only describes a context (flags, launch specs, options structs of the
// server and the client) does not include the whole API.
//
// Thread-safety: a plain value type (the link_counters it may point to are
// thread-safe: core/link_stats.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/auth.h"
#include "core/link_stats.h"
#include "net/handshake_gate.h"

namespace ps::xfer {

// kAuto, or the transport to force (one enumerator per transport, as in
// TransportKind: core/internal/transport_registry.h pairs them).
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
  // RDMA device for the verbs transport (empty / 0 / -1: the first active
  // device and port, and on RoCE a RoCE v2 GID with an IPv4 address;
  // ApplyEnvironment fills them from XFER_IB_DEV, XFER_IB_PORT and
  // XFER_IB_GID_INDEX).
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
  // The defaults with another peer timeout (the parameter server's
  // processes default to 30 s).
  static ContextOptions WithPeerTimeout(int peer_timeout_ms) {
    ContextOptions options;
    options.peer_timeout_ms = peer_timeout_ms;
    return options;
  }
  static constexpr int kMaxCopyThreads = 64;
};

}  // namespace ps::xfer
