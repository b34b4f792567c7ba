// Shared pieces of the multi-process xfer tests: a generic target process
// that owns a few regions and answers questions about them over its line
// channel, the options every test process uses, and byte patterns and hashes
// for checking data end to end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/endpoint.h"
#include "core/remote_region.h"
#include "tests/core/process_harness.h"

namespace ps::testing {

// The regions a target offers, by index in its "ready" line.
enum TargetRegion : int {
  kAllocatedRw = 0,  // Allocate(kTargetRegionSize, kRemoteAll)
  kRegisteredRw =
      1,          // Register(application memory, kTargetRegionSize, kRemoteAll)
  kReadOnly = 2,  // Allocate(kSmallRegionSize, kRemoteRead)
  kDoomed =
      3,      // Allocate(kSmallRegionSize, kRemoteAll), deregistered on request
  kSync = 4,  // Register(4096 bytes, kRemoteAtomic): the sync word at 0
  kTargetRegionCount = 5,
  // Only in a staged target (StartTarget's `staged`), whose context sets
  // ContextOptions::verbs_stage_host_regions_for_testing: regions without
  // atomics, which verbs peers then reach through the target's CPU (the
  // route of device memory without GPUDirect). kReadOnly is staged too.
  kStagedRw = 5,         // Allocate(kTargetRegionSize, read | write)
  kStagedWriteOnly = 6,  // Allocate(kSmallRegionSize, kRemoteWrite)
  kStagedDoomed = 7,     // Allocate(kSmallRegionSize, read | write)
  kStagedTargetRegionCount = 8,
};
inline constexpr size_t kTargetRegionSize = 1 << 20;
inline constexpr size_t kSmallRegionSize = 64 << 10;

// Every test process listens on 127.0.0.1 and forces `transport`.
xfer::ContextOptions TestOptions(const std::string& name,
                                 xfer::TransportChoice transport,
                                 uint16_t port = 0, int peer_timeout_ms = 5000);

std::string TransportLabel(xfer::TransportChoice transport);

// The transports the suites run on: shm and tcp, and verbs where the build
// has it (its tests skip themselves on machines without an RDMA device; run
// them with scripts/verbs_vm.sh).
std::vector<xfer::TransportChoice> TestedTransports();
// Empty when `transport` can run here, else why not.
std::string TransportUnusable(xfer::TransportChoice transport);
// The endpoint kind a forced `transport` yields.
xfer::TransportKind ExpectedKind(xfer::TransportChoice transport);

// In a test body or SetUp: skips the test when its transport cannot run here.
#define PS_SKIP_IF_UNUSABLE(transport)                              \
  do {                                                              \
    std::string why_ = ::ps::testing::TransportUnusable(transport); \
    if (!why_.empty()) GTEST_SKIP() << why_;                        \
  } while (0)

// Body of a target child. Sends
//   "ready ADDRESS HEXDESC0 ... HEXDESC4"
// then serves commands until "exit" or until the parent goes away:
//   "hash R OFF LEN"  -> "hash H"   (Fnv1a of the region's bytes)
//   "load64 R OFF"    -> "value V"  (acquire load of a word)
//   "fill R OFF LEN SEED" -> "ok"   (PatternByte pattern, written locally)
//   "dereg R"         -> "ok" or "error MESSAGE"
//   "exit"            -> exits 0
//
// Memory written by a target's progress thread and read by its main thread
// (or the other way round) is ordered by the pipe, which ThreadSanitizer
// cannot see across processes. So the target's main thread does an atomic
// on the sync word when a command arrives and again before it answers, and
// the origin does one through its endpoint (SyncTarget) before and after
// each question: the atomics order the progress thread's copies with the
// main thread's accesses both ways, as a real application's flag words
// would.
int RunTarget(LineChannel& channel, const std::string& name,
              xfer::TransportChoice transport, uint16_t port,
              bool staged = false);

// The parent's view of a started target.
struct TargetInfo {
  std::string address;
  std::vector<std::string> descriptors;  // binary, by TargetRegion
};
// Reads the target's "ready" line. nullopt if it does not come in time.
std::optional<TargetInfo> AwaitReady(LineChannel& channel,
                                     int timeout_ms = 20000);

// Forks a target child running RunTarget.
ChildProcess StartTarget(const std::string& name,
                         xfer::TransportChoice transport, uint16_t port = 0,
                         bool staged = false);

// A started target as the origin sees it.
struct TargetHandle {
  ChildProcess process;
  TargetInfo info;
  std::shared_ptr<xfer::Endpoint> ep;
  std::vector<xfer::RemoteRegion> regions;  // by TargetRegion

  // Connects `ctx` to the target and imports all its regions.
  Status Connect(xfer::Context& ctx);
  // The target's own view of its bytes, between two syncs (see RunTarget);
  // nullopt if a sync or the channel failed.
  std::optional<uint64_t> Hash(int region, uint64_t offset, uint64_t length);
  std::optional<uint64_t> Load64(int region, uint64_t offset);
  // Asks the target to exit; its exit code, nullopt on timeout.
  std::optional<int> Exit();
};

// Asks a target for the hash of a byte range; nullopt on a broken channel.
std::optional<uint64_t> RemoteHash(LineChannel& channel, int region,
                                   uint64_t offset, uint64_t length);
std::optional<uint64_t> RemoteLoad64(LineChannel& channel, int region,
                                     uint64_t offset);
bool Command(LineChannel& channel, const std::string& command);

// One FetchAdd64 on the target's sync word (see RunTarget).
Status SyncTarget(xfer::Endpoint& endpoint, const xfer::RemoteRegion& sync);

uint64_t Fnv1a(const void* data, size_t length);

// A deterministic byte stream: byte `i` of the stream named `seed`.
inline uint8_t PatternByte(uint64_t seed, uint64_t i) {
  uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<uint8_t>(x * 0x94D049BB133111EBull >> 56);
}
void FillPattern(void* data, size_t length, uint64_t seed);

}  // namespace ps::testing
