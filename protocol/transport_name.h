// The names of the xfer transports on command lines and in environment
// variables ("auto", "shm", "tcp", "verbs"): the one parser of them, used by
// ps_server, ps_worker, the test worker and the benchmarks.
//
// Pure functions: thread-safe.
#pragma once

#include <initializer_list>
#include <string_view>

#include "base/status_or.h"
#include "core/context.h"

namespace ps::protocol {

// The choices a server or worker's --transport takes.
inline constexpr std::initializer_list<xfer::TransportChoice>
    kProcessTransports = {xfer::TransportChoice::kAuto,
                          xfer::TransportChoice::kShm,
                          xfer::TransportChoice::kTcp};

// `name` as one of `accepted`; kInvalidArgument "must be auto, shm or tcp,
// not 'x'" (the caller prefixes the flag's name).
StatusOr<xfer::TransportChoice> TransportChoiceFromName(
    std::string_view name,
    std::initializer_list<xfer::TransportChoice> accepted = kProcessTransports);

// "auto", "shm", "tcp" or "verbs".
std::string_view TransportChoiceName(xfer::TransportChoice choice);

}  // namespace ps::protocol
