// MetricsOut: ps_worker --metrics_out=FILE, the training curves as JSON
// lines, appended while training runs (one line per progress point and per
// eval point, each written with one write(2) and so on disk as it happens):
//
//   {"kind":"train","worker":0,"time_s":3.02,"epoch":1,"examples":60000,
//    "samples_per_sec":19867.5,"train_loss":0.5012,"train_auc":0.6811}
//   {"kind":"eval","worker":0,"time_s":4.51,"examples":100000,"step":0,
//    "eval_auc":0.7012,"eval_logloss":0.4978,"eval_ne":0.9021,
//    "eval_examples":20000,"final":false}
//
// time_s counts from the start of training; examples are this worker's
// training examples so far; eval_ne is null when undefined. The file is
// opened for appending, so workers may share one (each line names its
// worker; lines of a few hundred bytes are not interleaved) and a resumed
// run continues its curve. scripts/plot_metrics.sh draws it.
//
// Thread-safety: Train and Eval may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/status_or.h"
#include "worker/train/eval_point.h"

namespace ps::train {

class MetricsOut {
 public:
  // Opens (creates) `path` for appending; kIOError naming it if it cannot.
  static StatusOr<std::shared_ptr<MetricsOut>> Open(const std::string& path,
                                                    uint32_t worker_id);
  ~MetricsOut();
  MetricsOut(const MetricsOut&) = delete;
  MetricsOut& operator=(const MetricsOut&) = delete;

  void Train(double time_s, uint32_t epoch, uint64_t examples,
             double samples_per_sec, double loss, double auc);
  void Eval(double time_s, const EvalPoint& point, bool final_eval);

  const std::string& path() const { return path_; }

 private:
  MetricsOut(std::string path, int fd, uint32_t worker_id)
      : path_(std::move(path)), fd_(fd), worker_id_(worker_id) {}
  void Write(const std::string& line);

  const std::string path_;
  const int fd_;
  const uint32_t worker_id_;
  std::mutex mu_;        // one line at a time
  bool warned_ = false;  // guarded by mu_: a failed write was logged
};

}  // namespace ps::train
