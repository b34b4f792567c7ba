// Waiting for a ps_server to be ready: it writes "host:port" of its control
// listener to its --port_file once it accepts connections.
//
// Thread-safety: free functions; AwaitAddress polls one Process, which the
// caller must not use from another thread meanwhile.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/status_or.h"
#include "launch/process.h"

namespace ps::launch {

// "host:port" with a port in [1, 65535], surrounding whitespace dropped.
std::optional<std::string> ParseAddress(std::string text);

// Polls `port_file` until it holds an address that two reads 20 ms apart
// agree on (a reader may catch the file half-written). Fails, with the end
// of the process's log, when the process exits first (kInternal), when
// `timeout_ms` passes (kTimeout; the process is then stopped, SIGKILLed
// after `stop_timeout_ms`) or when
// `cancelled` (if set) returns true (kCancelled).
StatusOr<std::string> AwaitAddress(Process& process,
                                   const std::string& port_file,
                                   int64_t timeout_ms, int stop_timeout_ms,
                                   const std::function<bool()>& cancelled = {});

}  // namespace ps::launch
