// What a scrape collects: metric families (name, HELP, TYPE) and their
// samples, before they are rendered (text_format.h). Plain values, no
// synchronization: each scrape builds its own.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ps::metrics {

// Label name -> value, in the order they are rendered. Names follow
// Prometheus' rules ([a-zA-Z_][a-zA-Z0-9_]*); values may hold anything
// (they are escaped when rendered).
using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

struct Sample {
  Labels labels;
  double value = 0;
};

// A histogram's state: bucket_counts[i] observations <= upper_bounds[i]
// (not cumulative; the renderer sums them), plus the +Inf bucket (count).
struct HistogramSample {
  Labels labels;
  std::vector<double> upper_bounds;
  std::vector<uint64_t> bucket_counts;  // one per upper bound
  uint64_t count = 0;                   // every observation (the +Inf bucket)
  double sum = 0;
};

struct Family {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<Sample> samples;              // counters and gauges
  std::vector<HistogramSample> histograms;  // histograms
};

// Whether `name` is a valid metric or label name.
bool ValidMetricName(const std::string& name);
bool ValidLabelName(const std::string& name);

}  // namespace ps::metrics
