// The transport providers a Context starts, and how ContextOptions::transport
// (or $XFER_TRANSPORT) selects among them. Thread-safe (no state).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/context.h"
#include "core/internal/transport_provider.h"

namespace ps::xfer::internal {

// One of each provider this build has, in order of preference.
std::vector<std::shared_ptr<TransportProvider>> MakeTransportProviders();

// The option, or $XFER_TRANSPORT=tcp|shm|verbs|auto when it is kAuto.
TransportChoice EffectiveChoice(TransportChoice option);
// The transport a choice forces; nullopt for kAuto.
std::optional<TransportKind> ForcedKind(TransportChoice choice);

}  // namespace ps::xfer::internal
