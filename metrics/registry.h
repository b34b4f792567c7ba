// Registry: the metrics one process exports, passed to whoever adds to it
// (no global state). Two kinds of source:
//   - instruments (counter.h, histogram.h) the registry owns: code on hot
//     paths updates them lock-free;
//   - collectors: callbacks run at every scrape that read counters kept
//     elsewhere (ServerStats, the trainer's numbers, /proc) and report
//     them through a CollectorSink, so that those paths pay nothing extra.
// Snapshot() gathers both into families (by name, in the order first
// seen) for text_format.h.
//
//   metrics::Registry registry;
//   auto* pushes = registry.AddCounter("ps_push_total", "Pushes.",
//                                      {{"table", "emb"}}).value();
//   registry.AddCollector([&](metrics::CollectorSink& sink) {
//     sink.Gauge("ps_inbox_packets", "Packets waiting.", {}, queued());
//   });
//   std::string text = metrics::RenderText(registry.Snapshot());
//
// Thread-safe: Add* and Snapshot take a lock (collectors run under it, so a
// collector must not call the registry); instruments need none. Collectors
// may read objects that the registry's owner must keep alive until every
// scrape is over (stop the exporter first).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "metrics/counter.h"
#include "metrics/family.h"
#include "metrics/histogram.h"

namespace ps::metrics {

// What a collector reports a sample through. Samples of one name are
// grouped into one family (the first HELP wins); a name reported with
// another type than before is dropped.
class CollectorSink {
 public:
  void Counter(const std::string& name, const std::string& help,
               const Labels& labels, double value);
  void Gauge(const std::string& name, const std::string& help,
             const Labels& labels, double value);
  void Histogram(const std::string& name, const std::string& help,
                 HistogramSample sample);

 private:
  friend class Registry;
  Family* FamilyFor(const std::string& name, const std::string& help,
                    MetricType type);
  std::vector<Family> families_;
};

using Collector = std::function<void(CollectorSink&)>;

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The instrument for (name, labels), created on first use; the pointer
  // lives as long as the registry. kInvalidArgument for a name or label
  // name Prometheus does not accept, or a name registered with another
  // type (or histogram bounds).
  StatusOr<metrics::Counter*> AddCounter(const std::string& name,
                                         const std::string& help,
                                         const Labels& labels = {});
  StatusOr<metrics::Gauge*> AddGauge(const std::string& name,
                                     const std::string& help,
                                     const Labels& labels = {});
  StatusOr<metrics::Histogram*> AddHistogram(const std::string& name,
                                             const std::string& help,
                                             std::vector<double> upper_bounds,
                                             const Labels& labels = {});
  void AddCollector(Collector collector);

  // Every instrument's value and every collector's samples, by family.
  std::vector<Family> Snapshot() const;

 private:
  struct Entry {
    std::string name, help;
    MetricType type;
    Labels labels;
    std::unique_ptr<metrics::Counter> counter;
    std::unique_ptr<metrics::Gauge> gauge;
    std::unique_ptr<metrics::Histogram> histogram;
  };
  StatusOr<Entry*> Find(const std::string& name, const std::string& help,
                        MetricType type, const Labels& labels);

  mutable std::mutex mu_;
  std::deque<Entry> entries_;          // guarded by mu_; stable addresses
  std::vector<Collector> collectors_;  // guarded by mu_
};

}  // namespace ps::metrics
