// Trainer::Evaluate: scores the held-out examples with the current
// parameters on `threads` threads and reduces their metrics.
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
  point.examples = acc[0].size();
  return point;
}

}  // namespace ps::train
