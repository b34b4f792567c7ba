#include "worker/ps_worker_checkpoints.h"

#include <glog/logging.h>

#include <chrono>
#include <string>

namespace ps::worker_main {
namespace {

using Clock = std::chrono::steady_clock;

// Logs the cut and how the checkpoint before it ended; an error once
// max_failed of them in a row failed.
Status Report(const worker::CheckpointResult& r, uint64_t step, uint32_t epoch,
              uint64_t consumed, Clock::time_point start, uint32_t max_failed,
              bool* failing) {
  const double ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  LOG(INFO) << "checkpoint at step " << step << " paused training " << ms
            << " ms (servers' copy " << r.copy_ms << " ms); position epoch "
            << epoch + 1 << ", " << consumed << " examples";
  if (!r.previous_failed) return Status::OK();
  const std::string newest =
      r.newest_complete_step == 0
          ? "none yet"
          : "step " + std::to_string(r.newest_complete_step);
  LOG(WARNING) << "the checkpoint at step " << r.previous_step
               << " FAILED: " << r.previous_error << " ("
               << r.consecutive_failures
               << " in a row; the newest complete checkpoint: " << newest
               << ")";
  if (max_failed > 0 && r.consecutive_failures >= max_failed) {
    *failing = true;
    return IOError(
        std::to_string(r.consecutive_failures) +
        " checkpoints in a row failed (--max_failed_checkpoints=" +
        std::to_string(max_failed) + "), the last: " + r.previous_error +
        "; the newest complete checkpoint: " + newest +
        ". Stopping, so that no more training is lost: fix the cause "
        "(see the servers' logs), then restart the servers with "
        "--restore_from=latest and the workers");
  }
  return Status::OK();
}

}  // namespace

std::function<Status(uint64_t step, uint32_t epoch, uint64_t consumed)>
CheckpointCallback(worker::CheckpointSync* sync, uint32_t max_failed,
                   bool* failing) {
  return [=](uint64_t step, uint32_t epoch, uint64_t consumed) -> Status {
    const auto start = Clock::now();
    auto r = sync->Checkpoint(step, epoch, consumed);
    if (!r.ok()) return r.status();
    return Report(*r, step, epoch, consumed, start, max_failed, failing);
  };
}

decltype(train::TrainerOptions::eval_cut) EvalCutCallback(
    worker::CheckpointSync* sync, uint32_t max_failed, bool* failing) {
  return [=](uint64_t step, uint32_t epoch, uint64_t consumed,
             const train::TrainerOptions::EvalFn& evaluate) -> StatusOr<bool> {
    const auto start = Clock::now();
    auto outcome = [&]() -> StatusOr<worker::EvalOutcome> {
      PS_ASSIGN_OR_RETURN(train::TrainerOptions::EvalVerdict v, evaluate());
      worker::EvalOutcome o;
      o.best = v.best;
      o.stop = v.stop;
      o.logloss = v.point.logloss;
      o.auc = v.point.auc;
      o.ne = v.point.ne;
      return o;
    };
    const bool cut = sync->servers_checkpoint();
    worker::CheckpointResult r;
    PS_ASSIGN_OR_RETURN(
        bool stop, sync->EvalPoint(step, epoch, consumed, cut, outcome, &r));
    if (cut) {
      PS_RETURN_IF_ERROR(
          Report(r, step, epoch, consumed, start, max_failed, failing));
    }
    return stop;
  };
}

}  // namespace ps::worker_main
