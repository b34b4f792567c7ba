// PendingOp: the handle of a client call that was started without waiting
// for it (PsClient::PushAsync / PullAsync). A pull has posted its transfers
// as the core's non-blocking requests (xfer::Request) when the call
// returns; a push is queued for the client's push thread
// (client/push_queue.h). Wait() blocks until the call completed, finishes
// what remains (a pull copies the rows into the caller's buffer) and
// returns the call's Status. No thread is started for a call.
//
// A handle that is destroyed (or assigned to) before Wait was called waits
// first: its transfers may still write into buffers it owns.
//
// Not thread-safe: one thread waits on a handle; different handles may be
// waited on by different threads at once.
#pragma once

#include <memory>
#include <utility>

#include "base/status.h"

namespace ps::worker {

class [[nodiscard]] PendingOp {
 public:
  // What remains of a call once its transfers are posted.
  class Rest {
   public:
    virtual ~Rest() = default;
    // Waits for the transfers and completes the call; called once.
    virtual Status Finish() = 0;
  };

  // A call that is already complete, with `done` as its result.
  PendingOp() = default;
  explicit PendingOp(Status done) : done_(std::move(done)) {}
  explicit PendingOp(std::unique_ptr<Rest> rest) : rest_(std::move(rest)) {}

  PendingOp(PendingOp&& other) noexcept = default;
  PendingOp& operator=(PendingOp&& other) noexcept {
    if (this != &other) {
      (void)Wait();
      done_ = std::move(other.done_);
      rest_ = std::move(other.rest_);
    }
    return *this;
  }
  ~PendingOp() { (void)Wait(); }

  // Blocks until the call completed; its result (the same on every call).
  Status Wait() {
    if (rest_ != nullptr) {
      done_ = rest_->Finish();
      rest_.reset();
    }
    return done_;
  }

 private:
  Status done_;
  std::unique_ptr<Rest> rest_;
};

}  // namespace ps::worker
