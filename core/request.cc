#include "core/request.h"

#include "core/internal/request_state.h"

namespace ps::xfer {

bool Request::Test(Status* status) {
  if (pending_ == nullptr) {
    if (status != nullptr) *status = done_;
    return true;
  }
  if (!pending_->done()) return false;
  if (status != nullptr) *status = pending_->status();
  return true;
}

Status Request::WaitPending() { return pending_->Wait(); }

}  // namespace ps::xfer
