// What the files of the Checkpointer (server/checkpoint/checkpointer.h) share:
// its limits and how it measures and prints time. Internal to server/.
//
// Thread-safety: constants and pure functions.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "protocol/ps.pb.h"

namespace ps::server::checkpointer_internal {

using Clock = std::chrono::steady_clock;
using Reply = proto::CheckpointReply;

// A cut step this large is refused: the final checkpoint on stop takes the
// next step, and a forged 2^64-1 must not wrap it around.
constexpr uint64_t kMaxCutStep = uint64_t{1} << 62;
// How many steps' part states a shard remembers for PART answers.
constexpr size_t kPartsKept = 16;
// How long a stopping server still waits for another shard that does not
// answer or has not cut yet: the shards' stops are not coordinated, so a
// peer may be a moment behind, but not longer.
constexpr auto kStopGrace = std::chrono::seconds(2);
// Requests and map entries a peer may make us keep, at most.
constexpr size_t kMaxPendingSteps = 1024;
// How often shard 0 looks for missing parts while it waits.
constexpr auto kPartPoll = std::chrono::milliseconds(50);

// "1.25 s".
inline std::string Seconds(std::chrono::nanoseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f s",
                std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace ps::server::checkpointer_internal
