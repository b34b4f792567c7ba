#include "client/server_group.h"

namespace ps::worker {

Status ServerGroup::FlushInboxes() {
  Status first;
  for (auto& link : links_) {
    Status s = link->inbox().Flush();
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

Status ServerGroup::WaitApplied() {
  for (auto& link : links_) {
    PS_RETURN_IF_ERROR(link->inbox().Flush());
    PS_RETURN_IF_ERROR(link->inbox().WaitApplied());
  }
  return Status::OK();
}

}  // namespace ps::worker
