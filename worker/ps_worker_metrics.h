// WorkerMetrics: ps_worker's --metrics_port. Owns the registry, the
// training numbers the trainer writes (train/train_stats.h) and the HTTP
// exporter; the trainer's stats and the process's CPU and RSS are read at
// scrape time, the MeteredParamStore (train/metered_param_store.h) adds its
// push/pull instruments to registry(), and the PsClient counts inbox credit
// waits and the quantization error of its pushes into client_counters().
// Every metric carries the label worker="worker-<id>".
//
// Thread-safe: scrapes run on the exporter's thread while training threads
// update the stats. Self-contained: nothing it reads belongs to anyone else,
// so it may be destroyed at any point.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "client/client_counters.h"
#include "metrics/exporter.h"
#include "metrics/registry.h"
#include "worker/train/param_store.h"
#include "worker/train/train_stats.h"

namespace ps::worker_main {

class WorkerMetrics {
 public:
  // Serves http://host:port/metrics (port 0: a free one) and logs the URL.
  // Errors as metrics::Exporter::Start's.
  static StatusOr<std::unique_ptr<WorkerMetrics>> Start(const std::string& host,
                                                        int port,
                                                        uint32_t worker_id);
  ~WorkerMetrics();

  train::TrainStats* stats() { return &stats_; }
  metrics::Registry* registry() { return &registry_; }
  const metrics::Labels& labels() const { return labels_; }
  const metrics::Exporter& exporter() const { return *exporter_; }
  // Counters for a PsClient of `shards` servers (PsClient::Options::
  // counters), made once; they live as long as this object.
  worker::ClientCounters* MakeClientCounters(uint32_t shards);
  // The names the `table` label gives the ids of these tables of `store`.
  void NameTables(const train::ParamStore& store,
                  const std::vector<std::string>& names);

 private:
  WorkerMetrics() = default;
  void Collect(metrics::CollectorSink& sink);

  metrics::Labels labels_;
  train::TrainStats stats_;
  metrics::Registry registry_;
  std::mutex rate_mu_;  // what follows: the rate since the last scrape
  std::chrono::steady_clock::time_point last_scrape_;
  uint64_t last_examples_ = 0;
  double last_rate_ = 0;
  double last_loss_sum_ = 0;
  double last_loss_ = 0;
  std::unique_ptr<worker::ClientCounters> client_owned_;
  std::atomic<worker::ClientCounters*> client_{nullptr};
  std::mutex names_mu_;
  std::map<uint32_t, std::string> table_names_;  // guarded by names_mu_
  std::unique_ptr<metrics::Exporter> exporter_;  // last: stops first
};

}  // namespace ps::worker_main
