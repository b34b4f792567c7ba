// Exporter: serves a Registry as GET /metrics (the Prometheus text format)
// over HTTP, with cpp-httplib (Debian's libcpp-httplib-dev); other paths
// answer 404. One listener thread plus 2 connection threads; a scrape
// renders a fresh Snapshot. Built only when cpp-httplib is found
// (PS_HAVE_HTTPLIB); otherwise Start says so (kNotSupported).
//
//   auto exporter = metrics::Exporter::Start(&registry, "127.0.0.1", 0);
//   LOG(INFO) << "metrics on " << (*exporter)->address();
//
// Thread-safe. The registry must outlive the exporter; destroying the
// exporter stops the listener and waits for scrapes in progress.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "base/status_or.h"
#include "metrics/registry.h"

namespace ps::metrics {

class Exporter {
 public:
  // Binds host:port (0: a free port) and starts serving. kInvalidArgument
  // for a port out of [0, 65535]; kIOError when the port cannot be bound
  // (in use, no permission), naming it; kNotSupported without cpp-httplib.
  static StatusOr<std::unique_ptr<Exporter>> Start(const Registry* registry,
                                                   const std::string& host,
                                                   int port);
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  int port() const { return port_; }
  // "host:port/metrics" as a URL: http://127.0.0.1:PORT/metrics.
  std::string url() const;

 private:
  struct Impl;
  explicit Exporter(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  std::string host_;
  int port_ = 0;
  std::thread thread_;
};

// Whether this build serves metrics (cpp-httplib was found).
bool ExporterAvailable();

}  // namespace ps::metrics
