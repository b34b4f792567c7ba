// The decode role of the kv_transfer example: holds its head range of the
// KV cache in a RegisteredPool block and a control region (control_region.h)
// for notifications, publishes both in the hand-off file, and then, per
// transfer, takes each layer as its notification arrives and checks every
// byte of it (kv_pattern.h) while later layers are still in flight. It
// measures from prefill's start stamp the time to the first layer (layer 0
// complete) and to the whole cache.
//
// Thread-compatible: one call at a time per process (it owns a Context).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "core/context.h"
#include "examples/kv_transfer/kv_shape.h"

namespace ps::kv {

struct DecodeOptions {
  std::string peer_file;  // where to publish the hand-off (handoff_file.h)
  KvShape shape;
  HeadRange heads;
  xfer::TransportChoice transport = xfer::TransportChoice::kAuto;
  uint64_t seed = 1;
  // Transfers asked of prefill: `warmup` untimed ones (the first maps and
  // faults in the pages), then `iterations` timed ones. All are checked.
  uint64_t warmup = 0;
  uint64_t iterations = 1;
  bool verify = true;
  // The longest wait for prefill's next layer (and for its bye).
  int timeout_ms = 30000;
};

// One transfer's times in seconds from prefill's start stamp.
struct TransferTimes {
  double first_layer = 0;  // layer 0 complete at decode
  double all_layers = 0;   // the last layer complete
  double checked = 0;      // every byte checked
};

struct DecodeReport {
  uint64_t bytes_per_transfer = 0;
  std::vector<TransferTimes> timed;  // the `iterations` timed transfers
};

// Runs until every transfer arrived and checked. Prints a line per transfer
// to stdout. kCorruption naming the first wrong value when a byte differs,
// kTimeout when prefill sends nothing for timeout_ms (never started, lost,
// or stalled), kInvalidArgument for bad options or a stray notification.
StatusOr<DecodeReport> RunDecode(const DecodeOptions& options);

}  // namespace ps::kv
