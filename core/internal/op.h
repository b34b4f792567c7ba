// internal::Op: one remote operation as the endpoint hands it to a transport.
// A plain description with no ownership: the pointers are the caller's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/remote_region.h"
#include "core/segment.h"

namespace ps::xfer::internal {

enum class OpType : uint8_t {
  kPut,
  kGet,
  kWriteV,
  kReadV,
  kFetchAdd,
  kCompareSwap,
  kPutNotify,
};

struct Op {
  OpType type = OpType::kPut;
  const RemoteRegion* remote = nullptr;
  // Put/Get/PutNotify use `single`; WriteV/ReadV use `segments`.
  Segment single{nullptr, 0, 0};
  std::span<const Segment> segments;
  // FetchAdd: operand0 = value. CompareSwap: operand0 = expected,
  // operand1 = desired. Both write the previous value to *result.
  uint64_t operand0 = 0;
  uint64_t operand1 = 0;
  uint64_t* result = nullptr;
  // PutNotify: the word written after the data.
  const RemoteRegion* notify_remote = nullptr;
  uint64_t notify_offset = 0;
  uint64_t notify_value = 0;

  std::span<const Segment> segs() const {
    return segments.empty() ? std::span<const Segment>(&single, 1) : segments;
  }
};

}  // namespace ps::xfer::internal
