// internal::Transport: the narrow interface beneath Endpoint. One instance per
// endpoint moves bytes to and from one peer. Adding a transport means adding
// a folder that implements this and a line in Context::Connect.
#pragma once

#include "base/status.h"
#include "core/op.h"
#include "core/request.h"

namespace ps::xfer::internal {

class Transport {
 public:
  virtual ~Transport() = default;

  // Starts `op` and returns its request: complete already (Request(status))
  // when the transport finished it on the calling thread, pending otherwise.
  // Ops have been checked against the RemoteRegion's claims by the Endpoint
  // (cheap early errors); the transport or the target enforces the truth.
  virtual Request Post(const Op& op) = 0;
  // Posts several operations at once; one request for all of them.
  virtual Request PostBatch(std::span<const Op> ops) = 0;
  // Every operation posted before the call has completed.
  virtual Status Flush() = 0;
  // True once the peer was declared lost.
  virtual bool lost() const = 0;
  // Maps or otherwise prepares a freshly imported region (may do nothing).
  virtual void Prepare(RemoteRegion& region) { (void)region; }
};

}  // namespace ps::xfer::internal
