// LayerArrivals: decode's thread that takes notifications off the Context
// (Context::WaitNotification, which sleeps on a futex) as they come and
// stamps their arrival, so that the times decode reports are when each
// layer landed, not when decode got round to it after checking the layers
// before. The decode thread pops them in arrival order.
//
// Thread-safe: the receiving thread pushes, one consumer pops.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "base/status_or.h"
#include "core/context.h"

namespace ps::kv {

struct Arrival {
  enum class Kind { kLayer, kBye };
  Kind kind = Kind::kLayer;
  uint64_t layer = 0;       // kLayer
  uint64_t arrival_ns = 0;  // CLOCK_MONOTONIC (monotonic_clock.h)
};

class LayerArrivals {
 public:
  // Starts receiving the notifications of `context` for the words of the
  // control region `control_region_id` with `layers` layer words
  // (control_region.h). Both must outlive this object.
  LayerArrivals(xfer::Context* context, uint64_t control_region_id,
                uint64_t layers);
  ~LayerArrivals();  // stops and joins the thread
  LayerArrivals(const LayerArrivals&) = delete;
  LayerArrivals& operator=(const LayerArrivals&) = delete;

  // The next arrival, waiting up to `timeout`: kTimeout when none came;
  // kInvalidArgument for a notification that is not one of the control
  // region's words with its value (a layer word holding other than layer + 1).
  StatusOr<Arrival> Next(std::chrono::milliseconds timeout);

 private:
  void Run();

  xfer::Context* const context_;
  const uint64_t control_region_id_;
  const uint64_t layers_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<StatusOr<Arrival>> queue_;  // guarded by mu_
  bool stop_ = false;                    // guarded by mu_
  std::thread thread_;
};

}  // namespace ps::kv
