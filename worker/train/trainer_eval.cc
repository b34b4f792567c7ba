// Trainer::Evaluate: scores the held-out examples with the current
// parameters on `threads` threads and reduces their metrics; and the loud
// warning when an eval is no better than the base rate.
#include <glog/logging.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "worker/eval/metrics.h"
#include "worker/train/batch_runner.h"
#include "worker/train/example_source.h"
#include "worker/train/trainer.h"  // Trainer::Evaluate is declared there

namespace ps::train {

StatusOr<EvalPoint> Trainer::Evaluate(uint32_t threads) {
  SourceOptions so;
  so.format = options_.format;
  so.csv_spec = options_.csv_spec;
  so.strict = options_.strict_data;
  so.seed = options_.seed;
  std::string path = options_.eval_data;
  if (path.empty()) {
    path = options_.train_data;
    so.holdout_every = options_.holdout_every;
    so.holdout = true;
  }
  PS_ASSIGN_OR_RETURN(auto source, ExampleSource::Open(path, so));
  std::vector<eval::MetricAccumulator> acc(threads);
  std::vector<Status> errors(threads);
  auto work = [&](uint32_t index) {
    BatchBuffers st;
    while (true) {
      st.batch.Clear();
      auto got = source->Next(options_.batch_size, &st.batch, &st.scratch);
      if (!got.ok()) {
        errors[index] = got.status();
        return;
      }
      if (*got == 0) return;
      std::string unused;
      auto loss =
          RunBatch(*model_, store_, {sparse_id_, dense_id_, admission_.get()},
                   false, &st, &unused);
      if (!loss.ok()) {
        errors[index] = loss.status();
        return;
      }
      for (size_t i = 0; i < st.batch.size(); ++i) {
        acc[index].Add(st.probs[i], st.batch.labels[i]);
      }
    }
  };
  std::vector<std::thread> pool;
  for (uint32_t i = 1; i < threads; ++i) pool.emplace_back(work, i);
  work(0);
  for (auto& t : pool) t.join();
  for (const Status& s : errors) PS_RETURN_IF_ERROR(s);
  for (uint32_t i = 1; i < threads; ++i) acc[0].Merge(acc[i]);
  if (acc[0].size() == 0) {
    return InvalidArgument("no evaluation examples in " + path);
  }
  if (const size_t bad = acc[0].non_finite(); bad > 0) {
    return InvalidArgument(
        "the model's predictions are not finite for " + std::to_string(bad) +
        " of " + std::to_string(acc[0].size()) +
        " evaluation examples: its parameters diverged; " + DivergenceHint());
  }
  EvalPoint point;
  point.auc = acc[0].auc();
  point.logloss = acc[0].logloss();
  point.positive_rate = acc[0].positive_rate();
  point.ne = eval::NormalizedEntropy(point.logloss, point.positive_rate);
  point.examples = acc[0].size();
  return point;
}

bool Trainer::WarnIfNoBetterThanBaseRate(const EvalPoint& p) const {
  if (!p.no_better_than_base_rate()) return false;
  char figures[160];
  std::snprintf(figures, sizeof(figures),
                "normalized entropy %.4f >= 1 (eval logloss %.4f, always "
                "predicting the base rate %.4f scores %.4f)",
                p.ne, p.logloss, p.positive_rate,
                eval::BaseRateEntropy(p.positive_rate));
  const std::string at =
      p.step > 0 ? " (step " + std::to_string(p.step) + ")" : "";
  LOG(WARNING) << "EVAL NO BETTER THAN THE BASE RATE after "
               << p.trained_examples << " training examples" << at << ": "
               << figures
               << ": the model is no better than predicting the base rate; "
                  "its training diverges or overfits: "
               << DivergenceHint()
               << (model_->sparse_dim() > 1
                       ? " (or raise --l2_v, the L2 on the factors)"
                       : "")
               << (admission_ == nullptr
                       ? "; every value has its own row: values seen too "
                         "rarely to estimate overfit, so give the table "
                         "adaptive_admission { } (they share their field's "
                         "row until their counts say enough)"
                       : "");
  return true;
}

}  // namespace ps::train
