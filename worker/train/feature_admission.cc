#include "worker/train/feature_admission.h"

#include <cstdio>

#include "worker/data/feature_hash.h"

namespace ps::train {

FeatureAdmission::FeatureAdmission(uint32_t admit_after_examples,
                                   uint32_t num_workers, uint64_t sketch_bytes)
    : admit_after_examples_(admit_after_examples),
      num_workers_(num_workers),
      threshold_((admit_after_examples + num_workers - 1) / num_workers),
      sketch_(CountMinSketch::WidthForBytes(sketch_bytes)) {}

namespace {

// Features ahead whose counters are prefetched: the sketch is far larger
// than the caches, so each lookup is a miss; a few in flight hide most of
// their latency.
constexpr size_t kAhead = 8;

}  // namespace

void FeatureAdmission::CountOnly(const data::ExampleBatch& batch) {
  uint64_t seen = 0, admitted = 0;
  for (size_t j = 0; j < batch.ids.size(); ++j) {
    if (j + kAhead < batch.ids.size()) sketch_.Prefetch(batch.ids[j + kAhead]);
    const uint32_t estimate = sketch_.Add(batch.ids[j]);
    seen += estimate == 1;
    admitted += estimate == threshold_;
  }
  seen_.fetch_add(seen, std::memory_order_relaxed);
  admitted_.fetch_add(admitted, std::memory_order_relaxed);
}

void FeatureAdmission::MapTraining(data::ExampleBatch* batch) {
  const bool counting = !frozen();
  uint64_t seen = 0, admitted = 0, oov = 0;
  for (size_t j = 0; j < batch->ids.size(); ++j) {
    if (j + kAhead < batch->ids.size()) {
      sketch_.Prefetch(batch->ids[j + kAhead]);
    }
    const uint64_t id = batch->ids[j];
    const uint32_t estimate = counting ? sketch_.Add(id) : sketch_.Estimate(id);
    if (counting) {
      seen += estimate == 1;
      admitted += estimate == threshold_;
    }
    if (estimate < threshold_) {
      batch->ids[j] = data::OovFeature(batch->fields[j]);
      ++oov;
    }
  }
  seen_.fetch_add(seen, std::memory_order_relaxed);
  admitted_.fetch_add(admitted, std::memory_order_relaxed);
  oov_.fetch_add(oov, std::memory_order_relaxed);
  kept_.fetch_add(batch->ids.size() - oov, std::memory_order_relaxed);
}

void FeatureAdmission::MapForEval(data::ExampleBatch* batch) const {
  for (size_t j = 0; j < batch->ids.size(); ++j) {
    if (j + kAhead < batch->ids.size()) {
      sketch_.Prefetch(batch->ids[j + kAhead]);
    }
    if (sketch_.Estimate(batch->ids[j]) < threshold_) {
      batch->ids[j] = data::OovFeature(batch->fields[j]);
    }
  }
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
  char buf[320];
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
