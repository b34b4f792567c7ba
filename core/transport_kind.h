// TransportKind: which transport carries an Endpoint's operations
// (Endpoint::transport()), and its name for logs and flags. Plain values;
// thread-safe.
#pragma once

#include <string_view>

namespace ps::xfer {

// One enumerator per transport; core/internal/transport_registry.h lists
// them with their names and providers.
enum class TransportKind { kShm, kTcp, kVerbs };

// "shm", "tcp", "verbs".
std::string_view TransportName(TransportKind kind);

}  // namespace ps::xfer
