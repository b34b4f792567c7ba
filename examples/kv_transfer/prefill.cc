// The prefill role: lay out, fill and send the KV cache (prefill.h).
#include "examples/kv_transfer/prefill.h"

#include <chrono>
#include <cstdio>
#include <deque>
#include <thread>
#include <vector>

#include "core/endpoint.h"
#include "core/registered_pool.h"
#include "core/transport_kind.h"
#include "examples/kv_transfer/control_region.h"
#include "examples/kv_transfer/handoff_file.h"
#include "examples/kv_transfer/kv_pattern.h"
#include "examples/kv_transfer/layer_segments.h"
#include "examples/kv_transfer/monotonic_clock.h"

namespace ps::kv {
namespace {

using Clock = std::chrono::steady_clock;

// Waits until decode's credits word reaches `wanted` (decode is ready for
// transfer wanted - 1, or done with every transfer), reading it with Get.
Status WaitForCredits(xfer::Endpoint& ep, const xfer::RemoteRegion& control,
                      uint64_t wanted, int timeout_ms, const char* what) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (int polls = 0;; ++polls) {
    uint64_t credits = 0;
    PS_RETURN_IF_ERROR(
        ep.Get(&credits, sizeof(credits), control, kCreditsOffset)
            .WithContext("reading decode's credits"));
    if (credits >= wanted) return Status::OK();
    if (Clock::now() > deadline) {
      return Timeout("decode was not " + std::string(what) + " within " +
                     std::to_string(timeout_ms) + " ms");
    }
    if (polls > 100)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace

StatusOr<PrefillReport> RunPrefill(const PrefillOptions& o) {
  PS_RETURN_IF_ERROR(ValidateShape(o.shape));
  xfer::ContextOptions co;
  co.name = "kv-prefill";
  co.transport = o.transport;
  co.peer_timeout_ms = o.timeout_ms;
  co.copy_threads = o.copy_threads;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<xfer::Context> ctx,
                      xfer::Context::Create(co));
  const HeadRange all = AllHeads(o.shape);
  const uint64_t cache_bytes = CacheBytes(o.shape, all);
  const uint64_t layer_bytes = LayerBytes(o.shape, all);
  PS_ASSIGN_OR_RETURN(
      std::unique_ptr<xfer::RegisteredPool> pool,
      xfer::RegisteredPool::Create(ctx.get(), cache_bytes, xfer::kLocalOnly));
  PS_ASSIGN_OR_RETURN(xfer::PoolBlock cache, pool->Allocate(cache_bytes, 4096));
  auto* base = static_cast<uint8_t*>(cache.data);
  auto fill = [&](uint64_t layer) {
    FillLayer(o.shape, all, layer, o.seed,
              reinterpret_cast<uint16_t*>(base + layer * layer_bytes));
  };
  if (!o.fill_per_layer) {
    const auto start = Clock::now();
    for (uint64_t l = 0; l < o.shape.layers; ++l) fill(l);
    std::printf("prefill: wrote the cache (%s, %s) in %.0f ms\n",
                ShapeString(o.shape).c_str(), BytesString(cache_bytes).c_str(),
                std::chrono::duration<double, std::milli>(Clock::now() - start)
                    .count());
  }

  PS_ASSIGN_OR_RETURN(
      Handoff h,
      WaitForHandoff(o.peer_file, std::chrono::milliseconds(o.timeout_ms)));
  if (!(h.shape == o.shape)) {
    return InvalidArgument(
        "decode at " + h.address + " holds a cache of " + ShapeString(h.shape) +
        ", but this prefill's is " + ShapeString(o.shape) +
        ": give both roles the same --layers, --tokens, --heads and "
        "--head_dim");
  }
  const uint64_t decode_bytes = CacheBytes(h.shape, h.heads);
  auto connected = ctx->Connect(h.address);
  if (!connected.ok()) {
    return connected.status().WithContext("connecting to decode at " +
                                          h.address + " (from " + o.peer_file +
                                          "; is that decode still running?)");
  }
  std::shared_ptr<xfer::Endpoint> ep = std::move(connected).value();
  PS_ASSIGN_OR_RETURN(xfer::RemoteRegion remote_pool,
                      ep->Import(h.pool_descriptor));
  PS_ASSIGN_OR_RETURN(xfer::RemoteRegion control,
                      ep->Import(h.control_descriptor));
  if (h.pool_block > remote_pool.size() ||
      decode_bytes > remote_pool.size() - h.pool_block) {
    return OutOfRange("decode's pool (" + std::to_string(remote_pool.size()) +
                      " bytes) cannot hold its cache of " +
                      std::to_string(decode_bytes) + " bytes at offset " +
                      std::to_string(h.pool_block));
  }
  if (control.size() < ControlRegionBytes(h.shape.layers)) {
    return OutOfRange("decode's control region is too small for " +
                      std::to_string(h.shape.layers) + " layers");
  }
  PrefillReport report;
  report.transfers = h.transfers;
  report.bytes_per_transfer = decode_bytes;
  report.transport = std::string(xfer::TransportName(ep->transport()));
  std::printf(
      "prefill: sending %s of %s (%s of %s) to decode at %s over %s, "
      "%llu time(s)\n",
      HeadsString(h.heads).c_str(), ShapeString(o.shape).c_str(),
      BytesString(decode_bytes).c_str(), BytesString(cache_bytes).c_str(),
      h.address.c_str(), report.transport.c_str(),
      static_cast<unsigned long long>(h.transfers));
  std::fflush(stdout);

  std::vector<xfer::Segment> segments;
  uint64_t stamp = 0;
  for (uint64_t n = 0; n < h.transfers; ++n) {
    PS_RETURN_IF_ERROR(WaitForCredits(*ep, control, n + 1, o.timeout_ms,
                                      "ready for the next transfer"));
    // Requests of the layers still in flight, oldest first.
    std::deque<std::vector<xfer::Request>> in_flight;
    for (uint64_t layer = 0; layer < o.shape.layers; ++layer) {
      if (o.fill_per_layer) fill(layer);
      if (layer == 0) stamp = MonotonicNanos();
      LayerSegments(o.shape, h.heads, layer, base, h.pool_block, &segments);
      std::vector<xfer::Request> requests;
      for (auto piece : SplitSegments(segments, o.segments_per_op)) {
        requests.push_back(ep->PostWriteV(piece, remote_pool));
      }
      // The layer's WriteVs land before its notify word (PutWithNotify
      // orders only its own data).
      PS_RETURN_IF_ERROR(ep->WriteFence());
      requests.push_back(
          ep->PostPutWithNotify(&stamp, sizeof(stamp), control, kStampOffset,
                                control, LayerWordOffset(layer), layer + 1));
      in_flight.push_back(std::move(requests));
      while (in_flight.size() > o.in_flight_layers) {
        for (xfer::Request& r : in_flight.front()) PS_RETURN_IF_ERROR(r.Wait());
        in_flight.pop_front();
      }
    }
    for (auto& layer : in_flight) {
      for (xfer::Request& r : layer) PS_RETURN_IF_ERROR(r.Wait());
    }
    PS_RETURN_IF_ERROR(ep->Flush());
  }
  PS_RETURN_IF_ERROR(WaitForCredits(*ep, control, h.transfers + 1, o.timeout_ms,
                                    "done checking"));
  // Decode exits after this word; its reply may be cut off by that exit,
  // which changes nothing here (every layer is complete and checked).
  Status bye = ep->PutWithNotify(&stamp, sizeof(stamp), control, kStampOffset,
                                 control, kByeOffset, 1);
  if (!bye.ok() && !bye.Is(StatusCode::kPeerLost)) return bye;
  std::printf(
      "prefill: %llu transfer(s) of %s complete; decode checked "
      "them\n",
      static_cast<unsigned long long>(h.transfers),
      BytesString(decode_bytes).c_str());
  return report;
}

}  // namespace ps::kv
