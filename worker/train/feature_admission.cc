#include "worker/train/feature_admission.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "worker/data/feature_hash.h"

namespace ps::train {

FeatureAdmission::FeatureAdmission(uint32_t admit_after_examples,
                                   uint32_t num_workers, uint64_t sketch_bytes)
    : admit_after_examples_(admit_after_examples),
      num_workers_(num_workers),
      threshold_((admit_after_examples + num_workers - 1) / num_workers),
      sketch_(CountMinSketch::WidthForBytes(sketch_bytes)) {
  for (uint32_t f = 0; f < kCachedOovFields; ++f) {
    oov_ids_[f] = data::OovFeature(f);
  }
}

std::unique_ptr<FeatureAdmission> FeatureAdmission::Adaptive(
    double reliability, uint32_t num_workers, uint64_t sketch_bytes) {
  // admit_after_examples 1 keeps the fixed rule's members valid; the
  // fields' thresholds replace it at Freeze.
  std::unique_ptr<FeatureAdmission> a(
      new FeatureAdmission(1, num_workers, sketch_bytes));
  a->reliability_ = reliability;
  return a;
}

uint32_t FeatureAdmission::threshold() const {
  if (!adaptive()) return threshold_;
  if (field_thresholds_.empty()) return FieldSignal::kNever;
  return *std::min_element(field_thresholds_.begin(), field_thresholds_.end());
}

void FeatureAdmission::Freeze() {
  if (adaptive() && !frozen()) {
    field_estimates_ = signal_.Estimates();
    field_thresholds_ = FieldSignal::Thresholds(field_estimates_, reliability_,
                                                num_workers_, kMaxThreshold);
    admitted_.store(
        static_cast<uint64_t>(signal_.AdmittedValues(field_thresholds_)),
        std::memory_order_relaxed);
  }
  frozen_.store(true, std::memory_order_relaxed);
}

namespace {

// Features ahead whose counters are prefetched: the sketch is far larger
// than the caches, so each lookup is a miss; a few in flight hide most of
// their latency.
constexpr size_t kAhead = 8;

// Calls visit(j) for every feature j of `ids`, the counters of the feature
// kAhead further on prefetched.
template <typename Visit>
void ForEachPrefetched(const CountMinSketch& sketch,
                       const std::vector<uint64_t>& ids, Visit visit) {
  for (size_t j = 0; j < ids.size(); ++j) {
    if (j + kAhead < ids.size()) sketch.Prefetch(ids[j + kAhead]);
    visit(j);
  }
}

}  // namespace

uint64_t FeatureAdmission::OovId(uint32_t field) const {
  return field < kCachedOovFields ? oov_ids_[field] : data::OovFeature(field);
}

uint32_t FeatureAdmission::Count(uint64_t id, uint64_t* seen,
                                 uint64_t* admitted) {
  const uint32_t estimate = sketch_.Add(id);
  *seen += estimate == 1;
  *admitted += estimate == threshold_;
  return estimate;
}

void FeatureAdmission::CountOnly(const data::ExampleBatch& batch) {
  uint64_t seen = 0, admitted = 0;
  ForEachPrefetched(sketch_, batch.ids,
                    [&](size_t j) { Count(batch.ids[j], &seen, &admitted); });
  seen_.fetch_add(seen, std::memory_order_relaxed);
  // Adaptive: the thresholds are not known yet; Freeze estimates the
  // admitted values from the fields' samples.
  if (adaptive()) {
    signal_.Add(batch);
  } else {
    admitted_.fetch_add(admitted, std::memory_order_relaxed);
  }
}

uint64_t FeatureAdmission::MapFrozen(data::ExampleBatch* batch) const {
  uint64_t oov = 0;
  ForEachPrefetched(sketch_, batch->ids, [&](size_t j) {
    if (sketch_.Estimate(batch->ids[j]) < FieldThreshold(batch->fields[j])) {
      batch->ids[j] = OovId(batch->fields[j]);
      ++oov;
    }
  });
  return oov;
}

void FeatureAdmission::MapTraining(data::ExampleBatch* batch) {
  uint64_t oov = 0;
  if (frozen()) {
    oov = MapFrozen(batch);
  } else {
    uint64_t seen = 0, admitted = 0;
    ForEachPrefetched(sketch_, batch->ids, [&](size_t j) {
      if (Count(batch->ids[j], &seen, &admitted) < threshold_) {
        batch->ids[j] = OovId(batch->fields[j]);
        ++oov;
      }
    });
    seen_.fetch_add(seen, std::memory_order_relaxed);
    admitted_.fetch_add(admitted, std::memory_order_relaxed);
  }
  oov_.fetch_add(oov, std::memory_order_relaxed);
  kept_.fetch_add(batch->ids.size() - oov, std::memory_order_relaxed);
}

void FeatureAdmission::MapForEval(data::ExampleBatch* batch) const {
  MapFrozen(batch);
}

AdmissionCounts FeatureAdmission::counts() const {
  AdmissionCounts c;
  c.occurrences_kept = kept_.load(std::memory_order_relaxed);
  c.occurrences_oov = oov_.load(std::memory_order_relaxed);
  c.distinct_seen = seen_.load(std::memory_order_relaxed);
  c.distinct_admitted = admitted_.load(std::memory_order_relaxed);
  return c;
}

std::string FeatureAdmission::Describe() const {
  char buf[400];
  if (adaptive()) {
    std::snprintf(buf, sizeof(buf),
                  "adaptive: a value gets its own row once its count in this "
                  "worker's share of the training data reaches its field's "
                  "threshold, the count at which its own estimate carries "
                  "weight %.2f against the field's prior (set from a counting "
                  "pass before training; over %u workers); below it, its "
                  "field's OOV row; sketch of %u x %llu counters (%.1f MiB); "
                  "counts are not checkpointed",
                  reliability_, num_workers_, CountMinSketch::kDepth,
                  static_cast<unsigned long long>(sketch_.width()),
                  sketch_.bytes() / 1048576.0);
    return buf;
  }
  std::snprintf(buf, sizeof(buf),
                "a value gets its own row from its occurrence %u in this "
                "worker's share of the training data (admit_after_examples "
                "%u over %u workers), before that its field's OOV row; "
                "counted in the first pass, in a sketch of %u x %llu "
                "counters (%.1f MiB); counts are not checkpointed",
                threshold_, admit_after_examples_, num_workers_,
                CountMinSketch::kDepth,
                static_cast<unsigned long long>(sketch_.width()),
                sketch_.bytes() / 1048576.0);
  return buf;
}

std::string FeatureAdmission::DescribeThresholds() const {
  std::string out =
      "admission thresholds by field (occurrences in this "
      "worker's share; the count n* at which a value's own "
      "estimate equals the field's prior):";
  for (size_t f = 0; f < field_thresholds_.size(); ++f) {
    const FieldEstimate& e = field_estimates_[f];
    if (e.occurrences == 0) continue;
    char buf[96];
    if (std::isfinite(e.prior_count)) {
      std::snprintf(buf, sizeof(buf), " %zu:%u (n* %.3g)", f,
                    field_thresholds_[f], e.prior_count);
    } else {
      std::snprintf(buf, sizeof(buf), " %zu:none (no signal)", f);
    }
    out += buf;
  }
  return out;
}

std::string AdmissionSummary(const FeatureAdmission& admission) {
  const AdmissionCounts c = admission.counts();
  const uint64_t total = c.occurrences_kept + c.occurrences_oov;
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "about %llu distinct values admitted of about %llu seen; "
                "%llu of %llu training occurrences mapped to OOV (%.1f%%)",
                static_cast<unsigned long long>(c.distinct_admitted),
                static_cast<unsigned long long>(c.distinct_seen),
                static_cast<unsigned long long>(c.occurrences_oov),
                static_cast<unsigned long long>(total),
                total > 0 ? 100.0 * c.occurrences_oov / total : 0.0);
  return buf;
}

}  // namespace ps::train
