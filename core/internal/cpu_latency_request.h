// internal::CpuLatencyRequest: a Linux PM QoS request that keeps every
// CPU's wake-up latency at or below a bound while it is held
// (ContextOptions::cpu_wakeup_latency_us).
//
// Why a transfer library asks for this: over tcp the target's CPU serves
// every operation. When the target process is otherwise idle its CPU halts,
// and on a virtual machine waking a halted vCPU takes 15 to 30 us, more
// than the rest of an atomic's round trip (measured on a 2-vCPU VM: tcp
// fetch-add 27.5 us, 10.8 us with the request held at 0, against a put
// ping-pong of 10.5 us, where both sides spin and no CPU halts). A bound of
// 0 makes idle CPUs poll instead of halting (the cpuidle governor's poll
// state), at the cost of keeping them busy; tuned's latency-performance
// profile holds the same request. Spinning the serving threads instead
// would take the CPU from runnable threads; idle polling gives way to them.
//
// The kernel holds the request while the file stays open and combines the
// requests of all processes (the lowest wins), so dropping this object
// restores the machine as it was.
//
// Thread-compatible: created and destroyed by one owner.
#pragma once

#include <memory>
#include <string>

#include "base/status_or.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

class CpuLatencyRequest {
 public:
  static constexpr const char* kDevicePath = "/dev/cpu_dma_latency";

  // Holds a request for wake-ups within `max_us` microseconds (>= 0) at
  // `path` (the kernel's file; a test may name another). kNotSupported,
  // naming the file and why (no such file, not root), when it cannot be
  // made; kInvalidArgument for a negative bound.
  static StatusOr<std::unique_ptr<CpuLatencyRequest>> Hold(
      int max_us, const std::string& path = kDevicePath);

  int max_us() const { return max_us_; }

 private:
  CpuLatencyRequest(net::UniqueFd fd, int max_us)
      : fd_(std::move(fd)), max_us_(max_us) {}

  net::UniqueFd fd_;  // the request lives as long as this stays open
  int max_us_;
};

}  // namespace ps::xfer::internal
