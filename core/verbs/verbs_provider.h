// The RDMA transport as a provider (internal/transport_provider.h). It opens
// this process's RDMA device when the Context starts (none: it offers and
// accepts nothing); registers every region with the device, fixing the region
// key's low 32 bits to the device's rkey so the NIC itself refuses a wrong key,
// and deregisters at Deregister so the NIC refuses the rkey from then on;
// offers a queue pair in the hello, and accepts a peer's offer when it is
// forced or comes from another host (same-host peers do better with shm).
#pragma once

#include <memory>

#include "core/internal/transport_provider.h"

namespace ps::xfer::internal {

std::shared_ptr<TransportProvider> MakeVerbsProvider();

}  // namespace ps::xfer::internal
