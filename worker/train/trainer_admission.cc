// Trainer::CountAdmissionPass: the counting pass of frequency admission
// before training with adaptive admission (whose thresholds it sets), and
// for a run whose counts are not there (resumed from a checkpoint, which
// does not hold them, or --eval_only).
#include <glog/logging.h>

#include "worker/data/line_reader.h"
#include "worker/train/example_source.h"
#include "worker/train/trainer.h"  // Trainer::CountAdmissionPass is there

namespace ps::train {

Status Trainer::CountAdmissionPass() {
  if (admission_ == nullptr || admission_->frozen()) return Status::OK();
  if (!data::IsRegularFile(options_.train_data)) {
    return InvalidArgument(
        options_.train_data +
        " is not a regular file (a pipe?): frequency admission counts the "
        "training data in a pass of its own, which reads it a second time; "
        "write the data to a file");
  }
  // The lines Run trains on: this worker's, without the held-out ones.
  PS_ASSIGN_OR_RETURN(auto source, ExampleSource::Open(options_.train_data,
                                                       TrainSourceOptions()));
  data::ExampleBatch batch;
  ExampleSource::Scratch scratch;
  while (true) {
    batch.Clear();
    PS_ASSIGN_OR_RETURN(size_t got,
                        source->Next(options_.batch_size, &batch, &scratch));
    if (got == 0) break;
    admission_->CountOnly(batch);
  }
  admission_->Freeze();
  if (admission_->adaptive()) LOG(INFO) << admission_->DescribeThresholds();
  return Status::OK();
}

}  // namespace ps::train
