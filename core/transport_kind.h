// TransportKind: which transport carries an Endpoint's operations
// (Endpoint::transport()), and its name for logs and flags. Plain values;
// thread-safe.
#pragma once

#include <string_view>

namespace ps::xfer {

// One enumerator per transport provider (core/internal/transport_registry.cc
// lists the providers).
enum class TransportKind { kShm, kTcp, kVerbs };

// "shm", "tcp", "verbs".
std::string_view TransportName(TransportKind kind);

}  // namespace ps::xfer
