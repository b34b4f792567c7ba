// FeatureAdmission: frequency admission of rare feature values on a worker.
// A value (feature id) gets its own row in the sparse table only from its
// threshold-th occurrence in this worker's training examples on; before
// that it is replaced, in the batch, by its field's out-of-vocabulary id
// (data::OovFeature), whose row all of the field's rare values share. Rare
// values then cannot fit their few examples' noise in rows of their own
// (most values of a click log's large fields are seen once or twice), and
// what the rare values of a field have in common is learned in one row.
//
// Configured per table by TableSpec.admit_after_examples = N (0: off; see
// protocol/ps.proto). Every worker counts its own share of the data, so its
// threshold is ceil(N / num_workers): with evenly spread values that
// approximates N occurrences in the whole job's data.
//
// Or adaptive (TableSpec.adaptive_admission): each field's threshold
// follows from the data (field_signal.h: a value is admitted once its count
// is large enough to estimate its weight). The counts and the fields'
// signal are then measured in a counting pass before training (Trainer::
// CountAdmissionPass), so a value that reaches its threshold anywhere in
// the data has its own row from its first occurrence on.
//
// Counting: occurrences are counted in a CountMinSketch (never under-counts;
// may over-count when its counters are crowded), once per training example
// read, during the first pass over the data only (Freeze after it): a value
// is admitted by how often it occurs in the data, not by how many epochs
// ran. Mapping with frozen counts (later epochs, evaluation) admits a value
// whose estimate reached the threshold.
//
// The counts are not checkpointed: a resumed run or --eval_only counts its
// share of the training data once before it trains or scores (parsing only;
// Trainer::CountAdmissionPass). The rows of admitted values stay on the
// servers either way.
//
// Thread-safe: the training threads call MapTraining concurrently while the
// evaluating thread calls MapForEval (relaxed atomics; a value admitted by
// a concurrent training batch may still map to OOV in that evaluation).
// Freeze is an atomic flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/data/example_batch.h"
#include "worker/train/count_min_sketch.h"
#include "worker/train/field_signal.h"

namespace ps::train {

// Approximate: the sketch tells first occurrences and admissions by the
// estimate reaching 1 and the threshold, which collisions can skip.
struct AdmissionCounts {
  uint64_t occurrences_kept = 0;   // training occurrences with their own id
  uint64_t occurrences_oov = 0;    // training occurrences mapped to OOV
  uint64_t distinct_seen = 0;      // values counted (about)
  uint64_t distinct_admitted = 0;  // values that reached the threshold
};

class FeatureAdmission {
 public:
  // `admit_after_examples` >= 1 (TableSpec), `num_workers` >= 1; the sketch
  // takes about `sketch_bytes`.
  FeatureAdmission(uint32_t admit_after_examples, uint32_t num_workers,
                   uint64_t sketch_bytes);
  // Adaptive admission; `reliability` in (0, 1) (field_signal.h). Counts
  // only with CountOnly; Freeze sets the fields' thresholds.
  static std::unique_ptr<FeatureAdmission> Adaptive(double reliability,
                                                    uint32_t num_workers,
                                                    uint64_t sketch_bytes);

  // Training: counts each feature of the batch (until Freeze) and replaces
  // the ids whose estimate, including this occurrence, is below the
  // threshold by their field's OOV id.
  void MapTraining(data::ExampleBatch* batch);
  // Evaluation: replaces the ids whose estimate is below the threshold;
  // counts nothing.
  void MapForEval(data::ExampleBatch* batch) const;
  // Counts the batch without mapping it (a counting pass; one thread).
  void CountOnly(const data::ExampleBatch& batch);
  // Stops counting: from now on training maps as evaluation does. Adaptive:
  // sets every field's threshold from what CountOnly measured. Call once
  // no thread maps or counts.
  void Freeze();
  bool frozen() const { return frozen_.load(std::memory_order_relaxed); }
  bool adaptive() const { return reliability_ > 0; }

  // The threshold of a fixed rule; adaptive: the smallest field's
  // (FieldSignal::kNever: no field admits anything).
  uint32_t threshold() const;
  uint32_t admit_after_examples() const { return admit_after_examples_; }
  // Adaptive, once frozen: the threshold of each field (index = field;
  // fields beyond have the largest) and what it was set from.
  const std::vector<uint32_t>& field_thresholds() const {
    return field_thresholds_;
  }
  const std::vector<FieldEstimate>& field_estimates() const {
    return field_estimates_;
  }
  AdmissionCounts counts() const;
  // For the start log: "a value gets its own row from its 5th occurrence
  // in this worker's share (admit_after_examples 10 over 2 workers);
  // sketch 4 x 4194304 counters (32 MiB); counts not checkpointed".
  std::string Describe() const;
  // Adaptive, once frozen: every field's threshold and signal, for the log.
  std::string DescribeThresholds() const;

 private:
  // The OOV ids of the first fields (every Criteo field), so that mapping
  // a feature costs no hash; later fields hash theirs.
  static constexpr uint32_t kCachedOovFields = 64;
  uint64_t OovId(uint32_t field) const;
  // Adds one occurrence of `id`; counts a first occurrence in *seen and
  // one reaching the threshold in *admitted. Returns the new estimate.
  uint32_t Count(uint64_t id, uint64_t* seen, uint64_t* admitted);
  // Maps by the counts as they are; returns how many ids went to OOV.
  uint64_t MapFrozen(data::ExampleBatch* batch) const;
  uint32_t FieldThreshold(uint32_t field) const {
    if (!adaptive()) return threshold_;
    return field < field_thresholds_.size() ? field_thresholds_[field]
                                            : FieldSignal::kNever;
  }

  static constexpr uint32_t kMaxThreshold = 65535;
  const uint32_t admit_after_examples_;
  const uint32_t num_workers_;
  const uint32_t threshold_;
  double reliability_ = 0;  // > 0: adaptive
  FieldSignal signal_;      // adaptive: what CountOnly measured
  std::vector<FieldEstimate> field_estimates_;
  std::vector<uint32_t> field_thresholds_;
  CountMinSketch sketch_;
  uint64_t oov_ids_[kCachedOovFields];
  std::atomic<bool> frozen_{false};
  std::atomic<uint64_t> kept_{0}, oov_{0}, seen_{0}, admitted_{0};
};

// "N (admit_after_examples N over W workers): M distinct values admitted,
// about S seen; K of T training occurrences mapped to OOV (P%)".
std::string AdmissionSummary(const FeatureAdmission& admission);

}  // namespace ps::train
