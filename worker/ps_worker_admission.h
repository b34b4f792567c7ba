// ps_worker's side of frequency admission (worker/train/feature_admission.h):
// its flag (--admission_sketch_mb, defined in ps_worker_admission.cc), what
// the start log and the final output say about it, and the counting pass
// --eval_only needs (the counts are not checkpointed). Called from main's
// thread only.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "worker/train/trainer.h"

namespace ps::worker {

// --admission_sketch_mb within its bounds (kInvalidArgument naming it).
Status CheckAdmissionFlags();
// The sketch's memory the flag asks for.
uint64_t AdmissionSketchBytes();
// With admission on `trainer`'s sparse table: logs what it does and, for
// --eval_only (`eval_only`), counts the training data first.
Status StartAdmission(train::Trainer* trainer, bool eval_only);
// "admission (own row from occurrence 5): ..." on stdout; nothing without.
void PrintAdmissionSummary(const train::Trainer& trainer);

}  // namespace ps::worker
