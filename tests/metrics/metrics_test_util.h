// What the metrics tests share: the metrics address a process logged, an
// HTTP GET on loopback, and a sample's value in a /metrics text.
// Thread-compatible helpers (no shared state).
#pragma once

#include <optional>
#include <string>

#include "base/status_or.h"

namespace ps::testing {

// Waits up to `timeout_ms` for the line "metrics: http://HOST:PORT/metrics"
// in the log at `log_path`; returns "HOST:PORT".
StatusOr<std::string> MetricsAddressFromLog(const std::string& log_path,
                                            int timeout_ms);

// GET http://<address><path> (address "host:port"); the body of a 200, else
// an error naming the status. Connecting and reading each give up after
// `timeout_ms`.
StatusOr<std::string> HttpGet(const std::string& address,
                              const std::string& path, int timeout_ms = 10000);

// The value of the sample written exactly `series` (name{labels}) in a
// text-format body, or nullopt.
std::optional<double> SampleValue(const std::string& text,
                                  const std::string& series);

// A TCP port on 127.0.0.1 that was free a moment ago.
StatusOr<int> FreeLoopbackPort();

}  // namespace ps::testing
