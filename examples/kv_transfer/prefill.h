// The prefill role of the kv_transfer example: holds the whole KV cache in a
// RegisteredPool, waits for a decode's hand-off file, and sends decode its
// head range of every layer, layer by layer: one or more WriteVs (per K/V
// and token, the head range's contiguous bytes), a WriteFence, then a
// put-with-notify of the transfer's start stamp whose notify word tells
// decode "layer l is complete" (value l + 1). A layer goes out as soon as it
// is ready; at most `in_flight_layers` layers wait for completion at a time.
//
// Thread-compatible: one call at a time per process (it owns a Context).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/status_or.h"
#include "core/context.h"
#include "examples/kv_transfer/kv_shape.h"

namespace ps::kv {

struct PrefillOptions {
  std::string peer_file;  // decode's hand-off file (handoff_file.h)
  KvShape shape;
  xfer::TransportChoice transport = xfer::TransportChoice::kAuto;
  uint64_t seed = 1;
  // Segments per WriteV (1 .. 65536, the tcp wire's limit). 1024 segments
  // of 1 KiB (4 heads of 128) make 1 MiB operations: small enough that tcp's
  // copy of each request stays in the cache.
  size_t segments_per_op = 1024;
  // true: each layer's values are written just before it is sent (as a
  // model computing layer by layer); false: the whole cache is written
  // first and the transfers move bytes only.
  bool fill_per_layer = true;
  size_t in_flight_layers = 2;
  // Threads copying each same-host WriteV (xfer::ContextOptions).
  int copy_threads = 1;
  // How long to wait for the hand-off file, for decode's credits, and for a
  // silent peer (the Context's peer timeout).
  int timeout_ms = 30000;
};

struct PrefillReport {
  uint64_t transfers = 0;
  uint64_t bytes_per_transfer = 0;  // decode's share of the cache
  std::string transport;            // "shm", "tcp"
};

// Sends the cache as many times as decode asked for, then waits until
// decode has checked the last transfer. Prints progress to stdout.
// kInvalidArgument when decode's shape differs from `options.shape`;
// kTimeout / kPeerLost when decode does not appear or goes away.
StatusOr<PrefillReport> RunPrefill(const PrefillOptions& options);

}  // namespace ps::kv
