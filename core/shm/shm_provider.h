// The same-host transport as a provider (internal/transport_provider.h). It
// listens on an abstract Unix socket, which carries memfds; publishes each
// allocated (memfd-backed) region in its liveness page; answers every hello
// on TCP with the socket's name; and carries a connection when both sides
// share a host: the connector switches to the Unix socket and maps the
// peer's regions (ShmTransport), the listener serves that socket with a
// StreamServer that also hands out memfds.
//
// Device regions from Context::AllocateDevice are exported over CUDA IPC
// (their key: device_ipc_key.h) and published in the liveness page like
// memfds, so same-host peers copy into them with the device, checked
// against the liveness word. Revocation and free: Deregister zeroes the
// word (later operations are refused at once; a copy already past the
// check lands in memory that is still allocated), and each connection keeps
// every device region its peer opened until the connection's server is
// gone: CUDA leaves freeing exported memory before the importer closes it
// undefined, and the peer closes its handles before its socket
// (device_imports.h). So a deregistered region's device memory is freed
// when the last connection that opened it has ended and the next hello or
// Stop forgets its server, not at Deregister. RegisterDevice regions (the
// application frees those) and exports that fail (pool or VMM memory) are
// not exported; peers reach them through this process's CPU.
#pragma once

#include <memory>

#include "core/internal/transport_provider.h"

namespace ps::xfer::internal {

std::shared_ptr<TransportProvider> MakeShmProvider();

}  // namespace ps::xfer::internal
