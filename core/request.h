// Request: the handle of a non-blocking operation. Test() polls, Wait() blocks
// until the operation completed (its data is in place at the target, or in
// local memory for a Get) or failed. A default Request is complete and OK;
// operations that finish at once (same-host copies) return such a request
// without allocating.
//
// Thread-safety: a Request is a handle; copies share one completion state,
// which the progress thread completes. One Request object is used by one
// thread at a time; separate copies may be tested or waited on from
// different threads at once.
#pragma once

#include <memory>

#include "base/status.h"

namespace ps::xfer {

namespace internal {
class RequestState;
}

class Request {
 public:
  Request() = default;
  explicit Request(Status done) : done_(std::move(done)) {}
  explicit Request(std::shared_ptr<internal::RequestState> pending)
      : pending_(std::move(pending)) {}

  // True when the operation has finished; then *status (if given) is its
  // result.
  bool Test(Status* status = nullptr);
  // Blocks until the operation finished or the endpoint's peer timeout
  // passed (then the peer is declared lost and this returns kPeerLost).
  Status Wait() {
    // Inline for what finished at once (same-host copies): no call, and an
    // OK status is not copied.
    if (pending_ == nullptr) [[likely]] {
      return done_.ok() ? Status() : done_;
    }
    return WaitPending();
  }

 private:
  Status WaitPending();

  Status done_;
  std::shared_ptr<internal::RequestState> pending_;
};

}  // namespace ps::xfer
