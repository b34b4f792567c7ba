// LookupService: a serving replica's network side. Clients say hello on
// its control port (server/control_service.h: the cluster secret guards it
// as it guards training servers) and attach a reply region; then each
// lookup is one put-with-notify of a lookup packet into the client's
// request region here and one put-with-notify of the rows back into the
// client's reply region, over the one-sided core (shm on the same host,
// tcp or verbs otherwise). protocol/serving_lookup.h is the wire contract.
//
//   auto service = LookupService::Start(options,
//                                       [&] { return follower.tables(); });
//   ... (*service)->control_address() is what clients dial ...
//
// Lookup threads (Options::threads) sleep on the context's notifications,
// copy the packet out of the request region, check it
// (protocol/lookup_packet.h: checksum, sizes) and answer from the tables
// the source gives at that moment: a reply's rows come from one checkpoint,
// which it names. A malformed packet or an unknown table is answered with
// the reason (and counted), never trusted; a client that vanishes loses its
// session when its control connection closes.
//
// Thread-safety: the public methods may be called from any thread; Stop
// (also the destructor) joins the lookup threads and the control service.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status_or.h"
#include "core/context.h"
#include "metrics/histogram.h"
#include "metrics/registry.h"
#include "server/control_service.h"
#include "serving/served_tables.h"

namespace ps::serving {

class LookupService {
 public:
  struct Options {
    server::ControlService::Options control;  // host, port, secret, ...
    xfer::ContextOptions xfer;                // the replica's context
    uint32_t max_keys = 65536;                // keys one lookup may hold
    int threads = 1;                          // lookup threads
    // How long a lookup thread polls for the next lookup before it sleeps
    // (0: it sleeps at once); one thread polls at a time.
    std::chrono::microseconds spin{200};
  };
  using TablesSource = std::function<std::shared_ptr<const ServedTables>()>;

  // Listens (control and xfer) and starts the lookup threads. `latency`
  // (may be null) observes each answered lookup's seconds on the replica.
  static StatusOr<std::unique_ptr<LookupService>> Start(
      Options options, TablesSource tables, metrics::Histogram* latency);
  ~LookupService();

  const std::string& control_address() const;
  std::string xfer_address() const;
  // Per table: lookups answered, keys, EXACT keys without a row; refusals
  // (any table) as ps_serve_lookups_refused_total.
  void ReportMetrics(metrics::CollectorSink& sink) const;
  void Stop();

 private:
  struct Session;
  struct TableCounts {
    uint64_t lookups = 0, keys = 0, missing = 0;
  };

  LookupService(Options options, TablesSource tables,
                metrics::Histogram* latency);
  proto::ControlReply Handle(const proto::ControlRequest& request,
                             server::ControlPeer* peer);
  StatusOr<proto::ServeInfo> Hello(const proto::ServeHello& hello,
                                   server::ControlPeer* peer);
  void Closed(const server::ControlPeer& peer);
  void LookupLoop();
  // Answers the session's lookup; the reply's put goes to *sent.
  void Answer(Session& session, std::vector<uint64_t>* packet,
              std::vector<char>* reply, xfer::Request* sent,
              std::string* sent_to);
  // Logs a reply whose put failed (rate-limited).
  static void ReportFailed(xfer::Request* sent, const std::string& sent_to);

  const Options options_;
  const TablesSource tables_;
  metrics::Histogram* const latency_;
  std::unique_ptr<xfer::Context> context_;
  std::unique_ptr<server::ControlService> control_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> spinning_{false};  // a lookup thread polls
  std::vector<std::thread> threads_;

  mutable std::mutex mu_;
  uint64_t next_session_ = 1;
  // By session id (the control connection's) and by request region id.
  std::unordered_map<uint64_t, std::shared_ptr<Session>> sessions_;
  std::unordered_map<uint64_t, std::shared_ptr<Session>> by_region_;
  std::map<std::string, TableCounts> counts_;  // by table name
  uint64_t refused_ = 0;
};

}  // namespace ps::serving
