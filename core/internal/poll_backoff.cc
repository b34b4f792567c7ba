#include "core/internal/poll_backoff.h"

#include <algorithm>

namespace ps::xfer::internal {

bool PollBackoff::AfterYield(long long before_ns, long long after_ns) {
  if (after_ns - before_ns <= kStarvedNs) return false;
  paused_until_ns_ = after_ns + pause_ns_;
  pause_ns_ = std::min(pause_ns_ * 2, kMaxPauseNs);
  return true;
}

void PollBackoff::Caught() { pause_ns_ = kFirstPauseNs; }

}  // namespace ps::xfer::internal
