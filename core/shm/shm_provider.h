// The same-host transport as a provider (internal/transport_provider.h). It
// listens on an abstract Unix socket, which carries memfds; publishes each
// allocated (memfd-backed) region in its liveness page; answers every hello
// on TCP with the socket's name; and carries a connection when both sides
// share a host: the connector switches to the Unix socket and maps the
// peer's regions (ShmTransport), the listener serves that socket with a
// StreamServer that also hands out memfds.
#pragma once

#include <memory>

#include "core/internal/transport_provider.h"

namespace ps::xfer::internal {

std::shared_ptr<TransportProvider> MakeShmProvider();

}  // namespace ps::xfer::internal
