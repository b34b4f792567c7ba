// The decode side's control region in the kv_transfer example: one small
// region (kRemoteRead | kRemoteWrite | kNotifyEvents) through which prefill
// learns when it may send and decode learns what arrived.
//
//   offset 0    credits: decode stores n + 1 when it is ready for transfer n
//               (0-based), i.e. when it is done with transfer n - 1;
//               prefill reads it (Get) before each transfer, and after the
//               last one to learn that decode checked everything.
//   offset 64   stamp: the CLOCK_MONOTONIC nanoseconds at which prefill
//               started the current transfer (the data of every layer's
//               put-with-notify): decode's times are measured from it, so
//               they hold when both run on one host.
//   offset 128  bye word: prefill's last put-with-notify (value 1) once it
//               saw every layer complete; decode exits after it, so that
//               its exit cannot cut off a reply prefill still waits for.
//   offset 192 + 8 * layer: the notify word of each layer, value layer + 1.
//
// Constants and a pure function: thread-safe.
#pragma once

#include <cstdint>

namespace ps::kv {

inline constexpr uint64_t kCreditsOffset = 0;
inline constexpr uint64_t kStampOffset = 64;
inline constexpr uint64_t kByeOffset = 128;
inline constexpr uint64_t kLayerWordsOffset = 192;

inline uint64_t LayerWordOffset(uint64_t layer) {
  return kLayerWordsOffset + 8 * layer;
}

// The region's size for `layers` layers: whole pages.
inline uint64_t ControlRegionBytes(uint64_t layers) {
  return (LayerWordOffset(layers) + 4095) / 4096 * 4096;
}

}  // namespace ps::kv
