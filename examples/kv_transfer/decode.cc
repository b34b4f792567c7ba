// The decode role: receive and check the KV cache layer by layer (decode.h).
#include "examples/kv_transfer/decode.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/registered_pool.h"
#include "examples/kv_transfer/control_region.h"
#include "examples/kv_transfer/handoff_file.h"
#include "examples/kv_transfer/kv_pattern.h"
#include "examples/kv_transfer/layer_arrivals.h"
#include "examples/kv_transfer/monotonic_clock.h"

namespace ps::kv {
namespace {

uint64_t* Word(xfer::MemoryRegion& region, uint64_t offset) {
  return reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(region.data()) +
                                     offset);
}

// Removes the hand-off file when decode ends, so that no prefill started
// later connects to a decode that is gone.
class RemoveOnExit {
 public:
  explicit RemoveOnExit(std::string path) : path_(std::move(path)) {}
  ~RemoveOnExit() {
    if (armed_) std::remove(path_.c_str());
  }
  void Arm() { armed_ = true; }

 private:
  std::string path_;
  bool armed_ = false;
};

}  // namespace

StatusOr<DecodeReport> RunDecode(const DecodeOptions& o) {
  PS_RETURN_IF_ERROR(ValidateShape(o.shape));
  PS_RETURN_IF_ERROR(ValidateHeads(o.shape, o.heads));
  if (o.iterations == 0) return InvalidArgument("iterations must be >= 1");
  xfer::ContextOptions co;
  co.name = "kv-decode";
  co.transport = o.transport;
  co.peer_timeout_ms = o.timeout_ms;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<xfer::Context> ctx,
                      xfer::Context::Create(co));
  const uint64_t cache_bytes = CacheBytes(o.shape, o.heads);
  const uint64_t layer_bytes = LayerBytes(o.shape, o.heads);
  PS_ASSIGN_OR_RETURN(
      std::unique_ptr<xfer::RegisteredPool> pool,
      xfer::RegisteredPool::Create(
          ctx.get(), (cache_bytes + 4095) / 4096 * 4096, xfer::kRemoteWrite));
  PS_ASSIGN_OR_RETURN(xfer::PoolBlock cache, pool->Allocate(cache_bytes, 4096));
  // Faults the pages in now, not while layers arrive (a serving decode's
  // pool is warm).
  std::memset(cache.data, 0, cache_bytes);
  PS_ASSIGN_OR_RETURN(std::shared_ptr<xfer::MemoryRegion> control,
                      ctx->Allocate(ControlRegionBytes(o.shape.layers),
                                    xfer::kRemoteRead | xfer::kRemoteWrite |
                                        xfer::kNotifyEvents));
  std::atomic_ref<uint64_t> credits(*Word(*control, kCreditsOffset));
  credits.store(1, std::memory_order_release);  // ready for transfer 0

  LayerArrivals arrivals(ctx.get(), control->id(), o.shape.layers);
  const uint64_t transfers = o.warmup + o.iterations;
  Handoff h{ctx->address(),
            o.shape,
            o.heads,
            transfers,
            cache.offset,
            pool->descriptor(),
            control->descriptor()};
  RemoveOnExit remove_handoff(o.peer_file);
  PS_RETURN_IF_ERROR(WriteHandoff(o.peer_file, h));
  remove_handoff.Arm();
  std::printf(
      "decode: holding %s of %s (%s) at %s; waiting for prefill "
      "(hand-off in %s)\n",
      HeadsString(o.heads).c_str(), ShapeString(o.shape).c_str(),
      BytesString(cache_bytes).c_str(), ctx->address().c_str(),
      o.peer_file.c_str());
  std::fflush(stdout);

  const auto timeout = std::chrono::milliseconds(o.timeout_ms);
  const auto* base = static_cast<const uint8_t*>(cache.data);
  DecodeReport report;
  report.bytes_per_transfer = cache_bytes;
  std::vector<uint64_t> arrived(o.shape.layers);
  for (uint64_t n = 0; n < transfers; ++n) {
    std::vector<bool> got(o.shape.layers, false);
    for (uint64_t k = 0; k < o.shape.layers; ++k) {
      StatusOr<Arrival> a = arrivals.Next(timeout);
      if (!a.ok()) {
        if (!a.status().Is(StatusCode::kTimeout)) return a.status();
        if (n == 0 && k == 0) {
          return Timeout(
              "no layer from prefill within " + std::to_string(o.timeout_ms) +
              " ms: start the prefill role with --peer_file=" + o.peer_file +
              " and the same shape flags");
        }
        return Timeout("prefill sent " + std::to_string(k) + " of " +
                       std::to_string(o.shape.layers) + " layers of transfer " +
                       std::to_string(n + 1) + ", then nothing for " +
                       std::to_string(o.timeout_ms) +
                       " ms: prefill was lost or stalled");
      }
      if (a->kind == Arrival::Kind::kBye) {
        return InvalidArgument("prefill said bye in the middle of transfer " +
                               std::to_string(n + 1));
      }
      if (got[a->layer]) {
        return InvalidArgument("layer " + std::to_string(a->layer) +
                               " arrived twice in transfer " +
                               std::to_string(n + 1));
      }
      got[a->layer] = true;
      arrived[a->layer] = a->arrival_ns;
      if (o.verify) {
        Status s = CheckLayer(
            o.shape, o.heads, a->layer, o.seed,
            reinterpret_cast<const uint16_t*>(base + a->layer * layer_bytes));
        if (!s.ok()) {
          return s.WithContext("transfer " + std::to_string(n + 1) +
                               ": bytes from prefill differ");
        }
      }
    }
    const uint64_t checked_ns = MonotonicNanos();
    const uint64_t stamp =
        std::atomic_ref<uint64_t>(*Word(*control, kStampOffset))
            .load(std::memory_order_acquire);
    uint64_t last = 0;
    for (uint64_t t : arrived) last = std::max(last, t);
    auto since = [&](uint64_t t) {
      return t >= stamp ? (t - stamp) * 1e-9 : 0;
    };
    TransferTimes times{since(arrived[0]), since(last), since(checked_ns)};
    const bool timed = n >= o.warmup;
    if (timed) report.timed.push_back(times);
    std::printf(
        "decode: transfer %llu/%llu%s: %llu layers, %s in %.2f ms "
        "(%.2f GB/s); first layer after %.2f ms (%.1f%%); %s %.2f ms\n",
        static_cast<unsigned long long>(n + 1),
        static_cast<unsigned long long>(transfers), timed ? "" : " (warm-up)",
        static_cast<unsigned long long>(o.shape.layers),
        BytesString(cache_bytes).c_str(), times.all_layers * 1e3,
        times.all_layers > 0 ? cache_bytes / times.all_layers / 1e9 : 0.0,
        times.first_layer * 1e3,
        times.all_layers > 0 ? 100 * times.first_layer / times.all_layers : 0.0,
        o.verify ? "every byte checked after" : "not checked; done after",
        times.checked * 1e3);
    std::fflush(stdout);
    credits.store(n + 2, std::memory_order_release);  // done with transfer n
  }
  // Prefill's bye says it saw every reply; exiting earlier could cut one off.
  StatusOr<Arrival> bye = arrivals.Next(timeout);
  if (!bye.ok() || bye->kind != Arrival::Kind::kBye) {
    std::printf(
        "decode: note: no bye from prefill (%s); every transfer was "
        "complete and checked\n",
        bye.ok() ? "another notification came"
                 : bye.status().ToString().c_str());
  }
  return report;
}

}  // namespace ps::kv
