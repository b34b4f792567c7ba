// Endpoint::RunStaged: an operation whose local buffers may be device memory
// (ContextOptions::device_buffers). Device sources are copied to host
// memory before the operation runs; device destinations get host buffers
// that are copied into the device once it completed. Host buffers pass
// through untouched. The operation runs blocking, so it is complete on
// return whatever form the caller used.
#include <memory>
#include <vector>

#include "core/device/device_memory.h"
#include "core/endpoint.h"
#include "core/internal/op.h"
#include "core/internal/transport.h"

namespace ps::xfer {

using internal::Op;
using internal::OpType;

Status Endpoint::RunStaged(const Op& op) {
  internal::DeviceMemory& memory = *device_buffers_;
  const bool reads = op.type == OpType::kGet || op.type == OpType::kReadV;
  const bool moves_data = reads || op.type == OpType::kPut ||
                          op.type == OpType::kWriteV ||
                          op.type == OpType::kPutNotify;
  if (!moves_data) return transport_->Run(op);  // atomics: host words only

  // The operation's segments, with device buffers swapped for host ones.
  const std::span<const Segment> segs = op.segs();
  std::vector<Segment> staged(segs.begin(), segs.end());
  std::vector<std::unique_ptr<char[]>> host(segs.size());
  std::vector<int> device(segs.size(), -1);
  bool any = false;
  for (size_t i = 0; i < segs.size(); ++i) {
    if (segs[i].length == 0) continue;
    device[i] = memory.DeviceOf(segs[i].local);
    if (device[i] < 0) continue;
    any = true;
    host[i] = std::make_unique<char[]>(segs[i].length);
    staged[i].local = host[i].get();
    if (!reads) {
      PS_RETURN_IF_ERROR(memory.FromDevice(device[i], host[i].get(),
                                           segs[i].local, segs[i].length));
    }
  }
  if (!any) return transport_->Run(op);
  Op copy = op;
  if (op.segments.empty()) {
    copy.single = staged[0];
  } else {
    copy.segments = staged;
  }
  PS_RETURN_IF_ERROR(transport_->Run(copy));
  if (reads) {
    for (size_t i = 0; i < segs.size(); ++i) {
      if (device[i] < 0) continue;
      PS_RETURN_IF_ERROR(memory.ToDevice(device[i], segs[i].local,
                                         host[i].get(), segs[i].length));
    }
  }
  return Status::OK();
}

}  // namespace ps::xfer
