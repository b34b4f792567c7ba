#include "worker/ps_worker_admission.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>

#include "cli/flags.h"

DEFINE_uint32(admission_sketch_mb, 32,
              "Memory of the sketch that counts feature values when the "
              "sparse table's spec sets admit_after_examples = N (frequency "
              "admission: a value gets its own row from its Nth occurrence, "
              "before that its field's shared OOV row; each worker counts "
              "its share against ceil(N / --num_workers), in the first pass "
              "over the data), or adaptive_admission (each field's threshold "
              "set from a counting pass before training). In [1, 8192] MiB: "
              "more memory, fewer "
              "over-counted values. The counts are not checkpointed: a "
              "resumed run or --eval_only first counts this worker's share "
              "of --train_data again (parsing only).");

namespace ps::worker {

Status CheckAdmissionFlags() {
  return cli::CheckUintFlag("admission_sketch_mb", FLAGS_admission_sketch_mb, 1,
                            8192);
}

uint64_t AdmissionSketchBytes() {
  return uint64_t{FLAGS_admission_sketch_mb} << 20;
}

Status StartAdmission(train::Trainer* trainer, bool eval_only) {
  const train::FeatureAdmission* a = trainer->admission();
  if (a == nullptr) return Status::OK();
  LOG(INFO) << "frequency admission on the sparse table: " << a->Describe();
  if (!eval_only) return Status::OK();
  LOG(INFO) << "counting the feature values of the training data for "
               "admission (the counts are not checkpointed)";
  return trainer->CountAdmissionPass().WithContext("counting for admission");
}

void PrintAdmissionSummary(const train::Trainer& trainer) {
  const train::FeatureAdmission* a = trainer.admission();
  if (a == nullptr) return;
  if (a->adaptive()) {
    // The range over the fields that admit anything.
    uint32_t low = UINT32_MAX, high = 0;
    for (uint32_t t : a->field_thresholds()) {
      if (t == train::FieldSignal::kNever) continue;
      low = std::min(low, t);
      high = std::max(high, t);
    }
    if (high == 0) {
      std::printf("admission (adaptive, no field admits a value): %s\n",
                  train::AdmissionSummary(*a).c_str());
    } else {
      std::printf(
          "admission (adaptive, own row from occurrence %u to %u by "
          "field): %s\n",
          low, high, train::AdmissionSummary(*a).c_str());
    }
    return;
  }
  std::printf("admission (own row from occurrence %u): %s\n", a->threshold(),
              train::AdmissionSummary(*a).c_str());
}

}  // namespace ps::worker
