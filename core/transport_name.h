// The names of the xfer transport choices on command lines and in
// XFER_TRANSPORT (core/context_environment.h) ("auto", "shm", "tcp", "verbs"):
// the one parser of them, used by the Context, ps_server, ps_worker, the test
// worker and the benchmarks.
//
// Pure functions: thread-safe.
#pragma once

#include <initializer_list>
#include <string_view>

#include "base/status_or.h"
#include "core/context_options.h"

namespace ps::xfer {

// The choices a server or worker's --transport takes.
inline constexpr std::initializer_list<TransportChoice> kProcessTransports = {
    TransportChoice::kAuto, TransportChoice::kShm, TransportChoice::kTcp};

// `name` as one of `accepted`; kInvalidArgument "must be auto, shm or tcp,
// not 'x'" (the caller prefixes the flag's name).
StatusOr<TransportChoice> TransportChoiceFromName(
    std::string_view name,
    std::initializer_list<TransportChoice> accepted = kProcessTransports);

// "auto", "shm", "tcp" or "verbs".
std::string_view TransportChoiceName(TransportChoice choice);

}  // namespace ps::xfer
