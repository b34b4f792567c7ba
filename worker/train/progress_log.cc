#include "worker/train/progress_log.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "worker/eval/metrics.h"
#include "worker/train/metrics_out.h"
#include "worker/train/train_stats.h"
#include "worker/train/trainer.h"

namespace ps::train {
namespace {

std::string Duration(double seconds) {
  if (seconds < 0 || seconds > 1e7) return "?";
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, s / 60 % 60,
                s % 60);
  return buf;
}

std::string Count(double n) {
  char buf[32];
  if (n >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.2fM", n / 1e6);
  } else if (n >= 1e4) {
    std::snprintf(buf, sizeof(buf), "%.1fk", n / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f", n);
  }
  return buf;
}

}  // namespace

ProgressLog::ProgressLog(uint32_t epochs, bool in_place, TrainStats* stats)
    : epochs_(epochs),
      in_place_(in_place),
      stats_(stats),
      start_(std::chrono::steady_clock::now()) {}

void ProgressLog::AddBatch(double loss, std::span<const float> probs,
                           std::span<const float> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  loss_sum_ += loss;
  loss_count_ += probs.size();
  if (stats_ != nullptr) {
    stats_->examples.fetch_add(probs.size(), std::memory_order_relaxed);
    stats_->loss_sum.fetch_add(loss, std::memory_order_relaxed);
  }
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs_.size() < kWindow) {
      probs_.push_back(probs[i]);
      labels_.push_back(labels[i]);
    } else {
      probs_[next_] = probs[i];
      labels_[next_] = labels[i];
    }
    next_ = (next_ + 1) % kWindow;
  }
}

void ProgressLog::Line(uint32_t epoch, uint64_t n, uint64_t examples_per_epoch,
                       double fraction_read, bool final_line, bool print) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count();
  double loss, auc;
  {
    std::lock_guard<std::mutex> lock(mu_);
    loss = loss_count_ > 0 ? loss_sum_ / loss_count_ : 0;
    loss_sum_ = 0;
    loss_count_ = 0;
    auc = eval::Auc(probs_, labels_);
  }
  double done = -1;
  if (examples_per_epoch > 0) {
    done = static_cast<double>(n) / (examples_per_epoch * epochs_);
  } else if (fraction_read >= 0) {
    done = (epoch + fraction_read) / epochs_;
  }
  const double eta = done > 0 ? elapsed * (1 - std::min(done, 1.0)) / done : -1;
  if (metrics_ != nullptr) {
    metrics_->Train(elapsed, epoch + 1, n, n / std::max(elapsed, 1e-9), loss,
                    auc);
  }
  if (!print) return;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "epoch %u/%u  %s examples  %s samples/s  loss %.4f  "
                "AUC %.4f  ETA %s",
                epoch + 1, epochs_, Count(n).c_str(),
                Count(n / std::max(elapsed, 1e-9)).c_str(), loss, auc,
                Duration(eta).c_str());
  if (in_place_) {
    std::fprintf(stderr, "\r%-100s%s", buf, final_line ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s\n", buf);
  }
  std::fflush(stderr);
}

void ProgressLog::PublishAuc() {
  if (stats_ == nullptr) return;
  std::vector<float> probs, labels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    probs = probs_;
    labels = labels_;
  }
  if (probs.empty()) return;
  stats_->train_auc.store(eval::Auc(probs, labels), std::memory_order_relaxed);
}

void ProgressLog::EvalLine(const EvalPoint& p, bool final_eval) {
  if (metrics_ != nullptr) {
    metrics_->Eval(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
            .count(),
        p, final_eval);
  }
  if (stats_ != nullptr) {
    constexpr auto kRelaxed = std::memory_order_relaxed;
    stats_->eval_auc.store(p.auc, kRelaxed);
    stats_->eval_logloss.store(p.logloss, kRelaxed);
    stats_->eval_ne.store(p.ne, kRelaxed);
    stats_->eval_examples.store(p.examples, kRelaxed);
    stats_->evaluations.fetch_add(1, kRelaxed);
  }
  if (in_place_) std::fprintf(stderr, "\n");
  const std::string at =
      p.step > 0 ? " (step " + std::to_string(p.step) + ")" : "";
  std::fprintf(stderr, "eval after %s examples%s: %s (%s examples)\n",
               Count(p.trained_examples).c_str(), at.c_str(),
               EvalMetricsText(p).c_str(), Count(p.examples).c_str());
}

}  // namespace ps::train
