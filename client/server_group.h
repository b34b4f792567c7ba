// ServerGroup: the links to all servers of the cluster, by shard, and what
// is done to all of them at once (flush the inboxes, wait until applied).
//
// Thread-safe: the links are fixed after construction and thread-safe
// themselves.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "base/status.h"
#include "client/server_link.h"

namespace ps::worker {

class ServerGroup {
 public:
  explicit ServerGroup(std::vector<std::unique_ptr<ServerLink>> links)
      : links_(std::move(links)) {}

  uint32_t size() const { return static_cast<uint32_t>(links_.size()); }
  ServerLink& operator[](uint32_t shard) const { return *links_[shard]; }

  // Returns once every packet posted to any inbox so far is in place in
  // that inbox (visible to the server, not yet applied); the first error.
  // Waits only on the inboxes written since their last flush
  // (InboxWriter::Flush).
  Status FlushInboxes();
  // Returns once every server consumed (applied) every packet this worker
  // wrote into its inbox.
  Status WaitApplied();

 private:
  std::vector<std::unique_ptr<ServerLink>> links_;
};

}  // namespace ps::worker
