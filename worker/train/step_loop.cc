#include "worker/train/step_loop.h"

namespace ps::train {

StepLoop::StepLoop(const Params& params)
    : p_(params),
      checkpoints_(params.options->checkpoint_due &&
                   params.options->checkpoint),
      steps_begun_(params.options->start_step) {
  if (checkpoints_) {
    gate_ = std::make_unique<CheckpointGate>(p_.options->start_step,
                                             p_.options->checkpoint_due,
                                             p_.options->checkpoint, stop_);
  }
}

void StepLoop::BeginEpoch() {
  std::lock_guard<std::mutex> lock(mu_);
  epoch_loss_sum_ = 0;
  epoch_count_ = 0;
}

double StepLoop::epoch_logloss() {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_count_ > 0 ? epoch_loss_sum_ / epoch_count_ : 0;
}

Status StepLoop::first_error() {
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

void StepLoop::Fail(const Status& s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) first_error_ = s;
    stop_ = true;
  }
  if (gate_ != nullptr) gate_->Wake();
}

void StepLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_early_ = true;
    stop_ = true;
  }
  if (gate_ != nullptr) gate_->Wake();
}

bool StepLoop::Take(BatchBuffers& st, CheckpointGate::Taken* taken) {
  const uint32_t batch_size = p_.options->batch_size;
  auto next = [&]() -> StatusOr<size_t> {
    return p_.source->Next(batch_size, &st.batch, &st.scratch);
  };
  if (gate_ != nullptr) return gate_->Take(next, taken);
  *taken = CheckpointGate::Taken();
  taken->got = next();
  if (taken->got.ok() && *taken->got > 0) taken->step = ++steps_begun_;
  return true;
}

void StepLoop::RunEpoch(uint32_t epoch) {
  BatchBuffers st;
  while (!stop_) {
    st.batch.Clear();
    CheckpointGate::Taken taken;
    if (!Take(st, &taken)) break;
    StatusOr<double> loss = taken.got.status();
    if (taken.got.ok() && *taken.got == 0) break;
    std::string diverged;
    if (taken.got.ok()) {
      loss = RunBatch(*p_.model, p_.store, p_.tables, true, &st, &diverged);
    }
    if (!diverged.empty()) {
      Fail(InvalidArgument("training diverged at step " +
                           std::to_string(taken.step) + ": " + diverged + "; " +
                           p_.divergence_hint()));
      break;
    }
    Status s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      s = loss.ok() ? p_.store->EndStep() : loss.status();
      if (s.ok()) {
        epoch_loss_sum_ += *loss;
        epoch_count_ += st.batch.size();
        examples_ += st.batch.size();
        p_.progress->AddBatch(*loss, st.probs, st.batch.labels);
      }
    }
    if (!s.ok()) {
      Fail(s);
      break;
    }
    if (gate_ == nullptr) continue;
    bool stopped = false;
    s = gate_->End(
        taken, epoch, [&] { return p_.source->consumed(); }, &stopped);
    if (stopped) break;
    if (!s.ok()) {
      Fail(
          s.WithContext("checkpoint after step " + std::to_string(taken.step)));
      break;
    }
  }
}

}  // namespace ps::train
