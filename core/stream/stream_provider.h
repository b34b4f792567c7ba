// The tcp transport as a provider (internal/transport_provider.h). It
// carries whatever no other provider takes: the connection of the hello goes
// on as a StreamTransport at the connector and a StreamServer at the
// listener. Regions need nothing from it (the server checks every request
// against the region table).
#pragma once

#include <memory>

#include "core/internal/transport_provider.h"

namespace ps::xfer::internal {

std::shared_ptr<TransportProvider> MakeStreamProvider();

}  // namespace ps::xfer::internal
