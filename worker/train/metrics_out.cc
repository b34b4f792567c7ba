#include "worker/train/metrics_out.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace ps::train {
namespace {

// A JSON number, or null for NaN and infinities.
std::string Number(double v, const char* format = "%.6g") {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

}  // namespace

StatusOr<std::shared_ptr<MetricsOut>> MetricsOut::Open(const std::string& path,
                                                       uint32_t worker_id) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return ErrnoStatus(StatusCode::kIOError,
                       "--metrics_out: cannot open " + path, errno);
  }
  return std::shared_ptr<MetricsOut>(new MetricsOut(path, fd, worker_id));
}

MetricsOut::~MetricsOut() { close(fd_); }

void MetricsOut::Write(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  // One write: with O_APPEND the line lands whole at the end, also when
  // other workers append to the same file.
  const ssize_t n = write(fd_, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size()) && !warned_) {
    warned_ = true;
    LOG(WARNING) << "--metrics_out " << path_ << ": write failed ("
                 << (n < 0 ? std::strerror(errno) : "short write")
                 << "); later lines may be missing";
  }
}

void MetricsOut::Train(double time_s, uint32_t epoch, uint64_t examples,
                       double samples_per_sec, double loss, double auc) {
  Write("{\"kind\":\"train\",\"worker\":" + std::to_string(worker_id_) +
        ",\"time_s\":" + Number(time_s, "%.3f") + ",\"epoch\":" +
        std::to_string(epoch) + ",\"examples\":" + std::to_string(examples) +
        ",\"samples_per_sec\":" + Number(samples_per_sec, "%.1f") +
        ",\"train_loss\":" + Number(loss) + ",\"train_auc\":" + Number(auc) +
        "}\n");
}

void MetricsOut::Eval(double time_s, const EvalPoint& p, bool final_eval) {
  Write("{\"kind\":\"eval\",\"worker\":" + std::to_string(worker_id_) +
        ",\"time_s\":" + Number(time_s, "%.3f") +
        ",\"examples\":" + std::to_string(p.trained_examples) + ",\"step\":" +
        std::to_string(p.step) + ",\"eval_auc\":" + Number(p.auc) +
        ",\"eval_logloss\":" + Number(p.logloss) + ",\"eval_ne\":" +
        Number(p.ne) + ",\"eval_examples\":" + std::to_string(p.examples) +
        ",\"final\":" + (final_eval ? "true" : "false") + "}\n");
}

}  // namespace ps::train
