// Decode's notification receiver (layer_arrivals.h).
#include "examples/kv_transfer/layer_arrivals.h"

#include "examples/kv_transfer/control_region.h"
#include "examples/kv_transfer/monotonic_clock.h"

namespace ps::kv {

LayerArrivals::LayerArrivals(xfer::Context* context, uint64_t control_region_id,
                             uint64_t layers)
    : context_(context),
      control_region_id_(control_region_id),
      layers_(layers),
      thread_([this] { Run(); }) {}

LayerArrivals::~LayerArrivals() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  thread_.join();
}

void LayerArrivals::Run() {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
    }
    // Short waits, so that the destructor is not held up for long.
    StatusOr<xfer::Notification> n =
        context_->WaitNotification(std::chrono::milliseconds(50));
    const uint64_t now = MonotonicNanos();
    if (!n.ok()) {
      if (n.status().Is(StatusCode::kTimeout)) continue;
      std::lock_guard lock(mu_);
      queue_.push_back(n.status());
      ready_.notify_one();
      return;  // the Context is failing: nothing more will come
    }
    StatusOr<Arrival> a = Arrival{};
    const uint64_t off = n->offset;
    if (n->region_id == control_region_id_ && off == kByeOffset &&
        n->value == 1) {
      a = Arrival{Arrival::Kind::kBye, 0, now};
    } else if (n->region_id == control_region_id_ && off >= kLayerWordsOffset &&
               off < LayerWordOffset(layers_) &&
               (off - kLayerWordsOffset) % 8 == 0 &&
               n->value == (off - kLayerWordsOffset) / 8 + 1) {
      a = Arrival{Arrival::Kind::kLayer, (off - kLayerWordsOffset) / 8, now};
    } else {
      a = InvalidArgument("a notification that is no layer's: region " +
                          std::to_string(n->region_id) + " offset " +
                          std::to_string(off) + " value " +
                          std::to_string(n->value) + " from instance " +
                          std::to_string(n->sender));
    }
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(a));
    ready_.notify_one();
  }
}

StatusOr<Arrival> LayerArrivals::Next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!ready_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) {
    return Timeout("no notification within " + std::to_string(timeout.count()) +
                   " ms");
  }
  StatusOr<Arrival> a = std::move(queue_.front());
  queue_.pop_front();
  return a;
}

}  // namespace ps::kv
