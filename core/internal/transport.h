// internal::Transport: the narrow data-path interface beneath Endpoint. One
// instance per endpoint moves bytes to and from one peer; its provider
// (internal/transport_provider.h) made it at Connect, and unpacked the
// per-region state (RemoteRegionAccess::State) that its operations read.
// Adding a transport means adding a folder that implements both and a line
// in internal/transport_registry.cc.
//
// Thread-safety: Post, PostBatch, Run, Flush, the fences and lost are called
// from any number of threads at once.
#pragma once

#include "base/status.h"
#include "core/internal/op.h"
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
  // Runs `op` to completion on the calling thread (the blocking forms of
  // Endpoint). A transport whose replies come from a socket lets the caller
  // read its own reply while it waits, instead of waking another thread.
  virtual Status Run(const Op& op) { return Post(op).Wait(); }
  // Every operation posted before the call has completed.
  virtual Status Flush() = 0;
  // Endpoint::WriteFence / ReadFence (core/endpoint.h). A transport that
  // cannot do them cheaper flushes.
  virtual Status WriteFence() { return Flush(); }
  virtual Status ReadFence() { return Flush(); }
  // True once the peer was declared lost.
  virtual bool lost() const = 0;
};

}  // namespace ps::xfer::internal
