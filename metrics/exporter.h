// Exporter: serves a Registry as GET /metrics (the Prometheus text format)
// over HTTP/1.1 to whoever can reach host:port, which nothing
// authenticates: bind loopback (the default of every program's
// --metrics_host) unless a Prometheus elsewhere must scrape, and then the
// one address it comes to (a pod's own IP), never more.
//
// One thread serves everything: it polls the listener and every connection
// (all non-blocking, metrics/http_connection.h), so that nothing a peer
// does blocks it; a scrape renders a fresh Snapshot on that thread. What
// keeps a scrape answered while others attack the port:
//   - at most `max_connections` are open: a new one beyond closes the
//     connection that has waited longest (for its request, or with an
//     answer it does not read), so nothing is queued and descriptors stay
//     bounded;
//   - pipelined requests are answered one per connection per round, so no
//     connection holds the thread;
//   - a request must arrive whole within `request_deadline` of the accept
//     or of the previous answer however its bytes trickle in (slowloris),
//     and an answer be taken within `response_deadline`;
//   - a new connection is read at once: a scraper whose request came with
//     its connection is answered before any later connection can evict it.
// Peers refused, evicted, timed out or sending garbage are logged at most
// once per 10 s per kind (base/log_limiter.h), with the count.
//
//   auto exporter = metrics::Exporter::Start(&registry, "127.0.0.1", 0);
//   LOG(INFO) << "metrics: " << (*exporter)->url();
//
// Thread-safe: the object is immutable once started. The registry must
// outlive the exporter; destroying the exporter stops its thread promptly
// (a scrape being rendered finishes first) and closes every connection.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/status_or.h"
#include "metrics/registry.h"

namespace ps::metrics {

// The --metrics_host help of every program that serves metrics.
inline constexpr char kMetricsHostHelp[] =
    "Address the --metrics_port endpoint listens on (not --listen_host's). "
    "Default 127.0.0.1: loopback, this host alone. The endpoint has no "
    "authentication: 0.0.0.0, :: or a pod IP expose the metrics to the "
    "network, so for a Prometheus elsewhere bind the one address it comes "
    "to (--metrics_host=$(POD_IP) on Kubernetes), never 0.0.0.0.";

struct ExporterOptions {
  // An address of this host, or a name that resolves to one: 127.0.0.1
  // (the default) or ::1 serve this host alone; 0.0.0.0, :: or a pod IP
  // expose unauthenticated metrics to the network.
  std::string host = "127.0.0.1";
  int port = 0;  // 0: a free port (port() says which)
  // Open connections at most (a Prometheus needs one).
  size_t max_connections = 32;
  std::chrono::milliseconds request_deadline{2000};
  std::chrono::milliseconds response_deadline{5000};
};

class Exporter {
 public:
  // Binds host:port and starts serving. kInvalidArgument for a port out of
  // [0, 65535], a host that is no address (CheckHost) or options out of
  // range; kIOError when the address cannot be bound (port in use, not
  // permitted, not an address of this host), naming it.
  static StatusOr<std::unique_ptr<Exporter>> Start(
      const Registry* registry, const ExporterOptions& options);
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
};

// OK when `host` is an address (or a name that resolves to one) a listener
// could bind, kInvalidArgument naming it otherwise ("$(POD_IP)" left
// unexpanded, a typo): for the programs' --metrics_host checks at start-up,
// before anything else starts. Whether this host has that address shows at
// Start (kIOError).
Status CheckHost(const std::string& host);

}  // namespace ps::metrics
