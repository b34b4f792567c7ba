#include "metrics/registry.h"

#include <utility>

namespace ps::metrics {

Family* CollectorSink::FamilyFor(const std::string& name,
                                 const std::string& help, MetricType type) {
  for (Family& f : families_) {
    if (f.name == name) return f.type == type ? &f : nullptr;
  }
  Family f;
  f.name = name;
  f.help = help;
  f.type = type;
  families_.push_back(std::move(f));
  return &families_.back();
}

void CollectorSink::Counter(const std::string& name, const std::string& help,
                            const Labels& labels, double value) {
  Family* f = FamilyFor(name, help, MetricType::kCounter);
  if (f != nullptr) f->samples.push_back({labels, value});
}

void CollectorSink::Gauge(const std::string& name, const std::string& help,
                          const Labels& labels, double value) {
  Family* f = FamilyFor(name, help, MetricType::kGauge);
  if (f != nullptr) f->samples.push_back({labels, value});
}

void CollectorSink::Histogram(const std::string& name, const std::string& help,
                              HistogramSample sample) {
  Family* f = FamilyFor(name, help, MetricType::kHistogram);
  if (f != nullptr) f->histograms.push_back(std::move(sample));
}

StatusOr<Registry::Entry*> Registry::Find(const std::string& name,
                                          const std::string& help,
                                          MetricType type,
                                          const Labels& labels) {
  if (!ValidMetricName(name)) {
    return InvalidArgument("metric name '" + name + "' is not valid");
  }
  for (const auto& [label, value] : labels) {
    if (!ValidLabelName(label)) {
      return InvalidArgument("label name '" + label + "' of metric " + name +
                             " is not valid");
    }
  }
  for (Entry& e : entries_) {
    if (e.name != name) continue;
    if (e.type != type) {
      return InvalidArgument("metric " + name +
                             " is already registered with another type");
    }
    if (e.labels == labels) return &e;
  }
  Entry& e = entries_.emplace_back();
  e.name = name;
  e.help = help;
  e.type = type;
  e.labels = labels;
  return &e;
}

StatusOr<Counter*> Registry::AddCounter(const std::string& name,
                                        const std::string& help,
                                        const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  PS_ASSIGN_OR_RETURN(Entry * e,
                      Find(name, help, MetricType::kCounter, labels));
  if (e->counter == nullptr) e->counter = std::make_unique<metrics::Counter>();
  return e->counter.get();
}

StatusOr<Gauge*> Registry::AddGauge(const std::string& name,
                                    const std::string& help,
                                    const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  PS_ASSIGN_OR_RETURN(Entry * e, Find(name, help, MetricType::kGauge, labels));
  if (e->gauge == nullptr) e->gauge = std::make_unique<metrics::Gauge>();
  return e->gauge.get();
}

StatusOr<Histogram*> Registry::AddHistogram(const std::string& name,
                                            const std::string& help,
                                            std::vector<double> upper_bounds,
                                            const Labels& labels) {
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    if (!(upper_bounds[i] < 1e300) ||
        (i > 0 && !(upper_bounds[i - 1] < upper_bounds[i]))) {
      return InvalidArgument("histogram " + name +
                             ": bounds must be finite and increasing");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  PS_ASSIGN_OR_RETURN(Entry * e,
                      Find(name, help, MetricType::kHistogram, labels));
  if (e->histogram == nullptr) {
    e->histogram =
        std::make_unique<metrics::Histogram>(std::move(upper_bounds));
  } else if (e->histogram->upper_bounds() != upper_bounds) {
    return InvalidArgument("histogram " + name +
                           " is already registered with other bounds");
  }
  return e->histogram.get();
}

void Registry::AddCollector(Collector collector) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back(std::move(collector));
}

std::vector<Family> Registry::Snapshot() const {
  CollectorSink sink;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    Family* f = sink.FamilyFor(e.name, e.help, e.type);
    if (f == nullptr) continue;
    if (e.counter != nullptr) {
      f->samples.push_back({e.labels, static_cast<double>(e.counter->value())});
    } else if (e.gauge != nullptr) {
      f->samples.push_back({e.labels, e.gauge->value()});
    } else if (e.histogram != nullptr) {
      f->histograms.push_back(e.histogram->Snapshot(e.labels));
    }
  }
  for (const Collector& c : collectors_) c(sink);
  return std::move(sink.families_);
}

}  // namespace ps::metrics
