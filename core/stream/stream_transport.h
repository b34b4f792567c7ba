// internal::StreamTransport: the origin side of a stream connection (TCP to a
// remote host, or the Unix socket to a same-host peer). Callers' threads send
// requests under a send lock; a reader thread matches replies to requests in
// order and completes them, writing Get data straight into the caller's
// buffer. An operation without a reply within the peer timeout, or a closed
// connection, declares the peer lost: every pending and later operation
// fails with kPeerLost.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/internal/transport.h"
#include "core/stream/wire.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

class StreamTransport : public Transport {
 public:
  // `fd` is connected and past the hello.
  StreamTransport(net::UniqueFd fd, std::string peer_name,
                  std::chrono::milliseconds peer_timeout);
  ~StreamTransport() override;

  Request Post(const Op& op) override;
  Request PostBatch(std::span<const Op> ops) override;
  Status Flush() override;
  bool lost() const override;

  // Same-host connections: asks the target for the memfd of region
  // `region_id` (0: the target's liveness page), checked against key and
  // instance. Blocking.
  Status MapRegion(uint64_t region_id, uint64_t key, uint64_t instance,
                   wire::MapReply* reply, net::UniqueFd* memfd);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ps::xfer::internal
