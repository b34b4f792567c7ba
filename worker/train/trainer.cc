#include "worker/train/trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <thread>

#include "protocol/spec_choices.h"
#include "worker/eval/metrics.h"
#include "worker/train/example_source.h"

namespace ps::train {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

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

// One thread's buffers, reused batch after batch.
struct ThreadState {
  ExampleSource::Scratch scratch;
  data::ExampleBatch batch;
  BatchKeys keys;
  std::vector<uint32_t> key_table;
  std::vector<float> rows, dense, probs;
  BatchGrads grads;
};

// Recent training predictions, for a running AUC.
class PredictionWindow {
 public:
  explicit PredictionWindow(size_t capacity) : capacity_(capacity) {}
  void Add(std::span<const float> p, std::span<const float> labels) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < p.size(); ++i) {
      if (probs_.size() < capacity_) {
        probs_.push_back(p[i]);
        labels_.push_back(labels[i]);
      } else {
        probs_[next_] = p[i];
        labels_[next_] = labels[i];
      }
      next_ = (next_ + 1) % capacity_;
    }
  }
  double Auc() const {
    std::lock_guard<std::mutex> lock(mu_);
    return eval::Auc(probs_, labels_);
  }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<float> probs_, labels_;
  size_t next_ = 0;
};

}  // namespace

StatusOr<Trainer> Trainer::Create(const TrainerOptions& options,
                                  const Model* model, ParamStore* store) {
  if (options.batch_size == 0 || options.threads == 0 || options.epochs == 0) {
    return InvalidArgument("--batch_size, --threads and --epochs must be >= 1");
  }
  Trainer t(options, model, store);
  const proto::TableSpec* sparse = store->table(options.sparse_table);
  if (sparse == nullptr) {
    return InvalidArgument("the table config has no table '" +
                           options.sparse_table + "' (the " + model->name() +
                           " model's sparse table)");
  }
  if (sparse->kind() == proto::DENSE || sparse->dim() != model->sparse_dim()) {
    return InvalidArgument(
        "table " + sparse->name() + " must be HASHED or EXACT with dim " +
        std::to_string(model->sparse_dim()) + " for model " + model->name() +
        " (it has dim " + std::to_string(sparse->dim()) + ")");
  }
  t.sparse_id_ = sparse->id();
  if (model->dense_size() > 0) {
    const proto::TableSpec* dense = store->table(options.dense_table);
    if (dense == nullptr) {
      return InvalidArgument("the table config has no table '" +
                             options.dense_table + "' (the " + model->name() +
                             " model's MLP weights)");
    }
    const uint64_t floats = dense->capacity() * dense->dim();
    if (dense->kind() != proto::DENSE || floats != model->dense_size()) {
      return InvalidArgument(
          "table " + dense->name() + " must be DENSE with capacity x dim = " +
          std::to_string(model->dense_size()) + " floats for this MLP (has " +
          std::to_string(floats) + ")");
    }
    t.dense_id_ = dense->id();
  }
  return t;
}

namespace {

std::string Number(double x) {
  if (std::isnan(x)) return "nan";  // printf may say "-nan"
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

// What is not finite in a batch's result ("loss is nan", "prediction 3 of
// 200 is nan"), or "" when all is finite. A non-finite loss or prediction
// means the parameters have diverged (or hold NaN already): training on
// would only spread NaN through every row it touches, and no metric of it
// means anything.
std::string NonFinite(double loss, std::span<const float> probs) {
  if (!std::isfinite(loss)) return "loss is " + Number(loss);
  const size_t i = eval::FirstNonFinite(probs);
  if (i < probs.size()) {
    return "prediction " + std::to_string(i + 1) + " of " +
           std::to_string(probs.size()) + " is " + Number(probs[i]);
  }
  return "";
}

// Pulls, computes and (when training) pushes one batch. When training and
// NonFinite finds something, *diverged says what and nothing is pushed (so
// NaN never reaches the servers' rows or a checkpoint); the loss is returned.
StatusOr<double> RunBatch(const Model& model, ParamStore* store,
                          uint32_t sparse_id, uint32_t dense_id, bool train,
                          ThreadState* st, std::string* diverged) {
  GatherBatchKeys(st->batch, &st->keys, &st->key_table);
  st->rows.resize(st->keys.keys.size() * model.sparse_dim());
  PS_RETURN_IF_ERROR(store->Pull(sparse_id, st->keys.keys, st->rows));
  if (model.dense_size() > 0) {
    st->dense.resize(model.dense_size());
    PS_RETURN_IF_ERROR(store->PullDense(dense_id, st->dense));
  }
  st->probs.resize(st->batch.size());
  BatchParams params{st->rows, st->dense};
  double loss = model.Compute(st->batch, st->keys, params, st->probs,
                              train ? &st->grads : nullptr);
  if (train) {
    *diverged = NonFinite(loss, st->probs);
    if (!diverged->empty()) return loss;
    PS_RETURN_IF_ERROR(store->Push(sparse_id, st->keys.keys, st->grads.rows));
    if (model.dense_size() > 0) {
      PS_RETURN_IF_ERROR(store->PushDense(dense_id, st->grads.dense));
    }
  }
  return loss;
}

}  // namespace

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
    ThreadState st;
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
          RunBatch(*model_, store_, sparse_id_, dense_id_, false, &st, &unused);
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

std::string Trainer::DivergenceHint() const {
  auto describe = [&](const std::string& name) {
    const proto::TableSpec* t = store_->table(name);
    if (t == nullptr) return name;
    const proto::OptimizerSpec& o = t->optimizer();
    auto kind = protocol::OptimizerKindOf(o);  // the store validated it
    if (!kind.ok() || *kind == proto::OPTIMIZER_SUM) {
      return name + " (sum: gradients are added as they are; give it sgd or " +
             "adagrad with a learning rate)";
    }
    if (*kind == proto::OPTIMIZER_FTRL) {
      return name + " (ftrl, ftrl_alpha " + Number(o.ftrl_alpha()) + ")";
    }
    return name + " (" + std::string(protocol::OptimizerKindName(*kind)) +
           ", learning_rate " + Number(o.learning_rate()) + ")";
  };
  std::string tables = "table " + describe(options_.sparse_table);
  if (model_->dense_size() > 0) {
    tables += " or table " + describe(options_.dense_table);
  }
  return "lower the learning rate of " + tables +
         ", or look for huge feature values in the data";
}

StatusOr<TrainResult> Trainer::Run() {
  SourceOptions so;
  so.format = options_.format;
  so.strict = options_.strict_data;
  so.worker_id = options_.worker_id;
  so.num_workers = options_.num_workers;
  so.seed = options_.seed;
  so.holdout_every = options_.eval_data.empty() ? options_.holdout_every : 0;
  PS_ASSIGN_OR_RETURN(auto source,
                      ExampleSource::Open(options_.train_data, so));
  if (!options_.eval_data.empty()) {
    // Fail now, not after hours of training.
    PS_RETURN_IF_ERROR(data::LineReader::Open(options_.eval_data).status());
  }

  TrainResult result;
  std::atomic<uint64_t> examples{0};
  std::mutex mu;  // the fields below, and the store's EndStep
  double loss_sum = 0, epoch_loss_sum = 0;
  uint64_t loss_count = 0, epoch_count = 0;
  Status first_error;
  std::atomic<bool> stop{false};
  PredictionWindow window(50000);
  uint64_t examples_per_epoch = 0;  // known after the first epoch
  const auto start = Clock::now();
  uint64_t next_eval = options_.eval_every;

  auto progress_line = [&](uint32_t epoch, bool final_line) {
    const double elapsed = SecondsSince(start);
    const uint64_t n = examples.load();
    double loss;
    {
      std::lock_guard<std::mutex> lock(mu);
      loss = loss_count > 0 ? loss_sum / loss_count : 0;
      loss_sum = 0;
      loss_count = 0;
    }
    double done = -1;
    double f = source->fraction_read();
    if (examples_per_epoch > 0) {
      done = static_cast<double>(n) / (examples_per_epoch * options_.epochs);
    } else if (f >= 0) {
      done = (epoch + f) / options_.epochs;
    }
    const double eta =
        done > 0 ? elapsed * (1 - std::min(done, 1.0)) / done : -1;
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "epoch %u/%u  %s examples  %s samples/s  loss %.4f  "
                  "AUC %.4f  ETA %s",
                  epoch + 1, options_.epochs, Count(n).c_str(),
                  Count(n / std::max(elapsed, 1e-9)).c_str(), loss,
                  window.Auc(), Duration(eta).c_str());
    if (options_.progress_in_place) {
      std::fprintf(stderr, "\r%-100s%s", buf, final_line ? "\n" : "");
    } else {
      std::fprintf(stderr, "%s\n", buf);
    }
    std::fflush(stderr);
  };

  auto evaluate_now = [&](bool final_eval) -> Status {
    if (!options_.evaluate) return Status::OK();
    PS_ASSIGN_OR_RETURN(EvalPoint p,
                        Evaluate(final_eval ? options_.threads : 1));
    p.trained_examples = examples.load();
    result.history.push_back(p);
    if (options_.progress_in_place) std::fprintf(stderr, "\n");
    std::fprintf(stderr,
                 "eval after %s examples: AUC %.4f logloss %.4f (%s "
                 "examples)\n",
                 Count(p.trained_examples).c_str(), p.auc, p.logloss,
                 Count(p.examples).c_str());
    if (final_eval) {
      result.final_eval = p;
      result.evaluated = true;
    }
    return Status::OK();
  };

  // Checkpoints: steps taken from the data and steps ended (guarded by
  // step_mu), and the due step whose checkpoint holds back the next batch.
  const bool checkpoints = options_.checkpoint_due && options_.checkpoint;
  std::mutex step_mu;
  std::condition_variable step_cv;
  uint64_t taken_steps = options_.start_step, ended_steps = taken_steps;
  uint64_t pending_cut = 0;
  // Steps of this worker taken without checkpoints (with them:
  // taken_steps), only to name the step at which training diverged.
  std::atomic<uint64_t> steps_begun{options_.start_step};
  auto fail = [&](const Status& s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.ok()) first_error = s;
      stop = true;
    }
    std::lock_guard<std::mutex> lock(step_mu);
    step_cv.notify_all();
  };

  const uint32_t first_epoch = options_.start_epoch;
  for (uint32_t epoch = first_epoch; epoch < options_.epochs && !stop;
       ++epoch) {
    const bool resumed_mid_epoch =
        epoch == first_epoch && options_.start_consumed > 0;
    if (epoch > 0 && !resumed_mid_epoch) {
      PS_RETURN_IF_ERROR(source->Rewind());
    }
    if (resumed_mid_epoch) {
      PS_RETURN_IF_ERROR(source->Skip(options_.start_consumed));
    }
    const uint64_t epoch_start_examples = examples.load();
    {
      std::lock_guard<std::mutex> lock(mu);
      epoch_loss_sum = 0;
      epoch_count = 0;
    }
    std::atomic<uint32_t> running{options_.threads};
    std::condition_variable done_cv;
    auto work = [&]() {
      ThreadState st;
      while (!stop) {
        st.batch.Clear();
        StatusOr<size_t> got = size_t{0};
        uint64_t step = 0;
        bool cut_after = false;
        if (checkpoints) {
          std::unique_lock<std::mutex> lock(step_mu);
          step_cv.wait(lock, [&] { return stop || pending_cut == 0; });
          if (stop) break;
          got = source->Next(options_.batch_size, &st.batch, &st.scratch);
          if (got.ok() && *got > 0) {
            step = ++taken_steps;
            StatusOr<bool> due = options_.checkpoint_due(step);
            if (!due.ok()) {
              got = due.status();
            } else if (*due) {
              pending_cut = step;
              cut_after = true;
            }
          }
        } else {
          got = source->Next(options_.batch_size, &st.batch, &st.scratch);
          if (got.ok() && *got > 0) step = ++steps_begun;
        }
        StatusOr<double> loss = got.status();
        if (got.ok() && *got == 0) break;
        std::string diverged;
        if (got.ok()) {
          loss = RunBatch(*model_, store_, sparse_id_, dense_id_, true, &st,
                          &diverged);
        }
        if (!diverged.empty()) {
          fail(InvalidArgument("training diverged at step " +
                               std::to_string(step) + ": " + diverged + "; " +
                               DivergenceHint()));
          break;
        }
        Status s;
        {
          std::lock_guard<std::mutex> lock(mu);
          s = loss.ok() ? store_->EndStep() : loss.status();
          if (s.ok()) {
            loss_sum += *loss;
            epoch_loss_sum += *loss;
            loss_count += st.batch.size();
            epoch_count += st.batch.size();
            examples += st.batch.size();
            window.Add(st.probs, st.batch.labels);
          }
        }
        if (!s.ok()) {
          fail(s);
          break;
        }
        if (!checkpoints) continue;
        std::unique_lock<std::mutex> lock(step_mu);
        ++ended_steps;
        step_cv.notify_all();
        if (!cut_after) continue;
        // Every earlier step ended and no later one started: the data
        // position is exactly that of the steps up to this one.
        step_cv.wait(lock, [&] { return stop || ended_steps == step; });
        if (stop) break;
        const uint64_t consumed = source->consumed();
        lock.unlock();
        s = options_.checkpoint(step, epoch, consumed);
        lock.lock();
        pending_cut = 0;
        step_cv.notify_all();
        lock.unlock();
        if (!s.ok()) {
          fail(s.WithContext("checkpoint after step " + std::to_string(step)));
          break;
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      if (--running == 0) done_cv.notify_all();
    };
    std::vector<std::thread> pool;
    for (uint32_t i = 0; i < options_.threads; ++i) pool.emplace_back(work);
    // This thread reports progress and runs interval evaluations.
    auto last_report = Clock::now();
    const double period =
        options_.progress_secs > 0 ? options_.progress_secs : 1e9;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu);
        done_cv.wait_for(lock, std::chrono::milliseconds(100),
                         [&] { return running == 0; });
        if (running == 0) break;
      }
      if (SecondsSince(last_report) >= period) {
        progress_line(epoch, false);
        last_report = Clock::now();
      }
      if (next_eval > 0 && examples.load() >= next_eval) {
        next_eval += options_.eval_every;
        Status s = evaluate_now(false);
        if (!s.ok()) fail(s);
      }
    }
    for (auto& t : pool) t.join();
    if (!first_error.ok()) return first_error;
    if (examples_per_epoch == 0 && !resumed_mid_epoch) {
      examples_per_epoch = examples.load() - epoch_start_examples;
    }
    if (examples.load() == epoch_start_examples && !resumed_mid_epoch) {
      return InvalidArgument("no training examples for worker " +
                             std::to_string(options_.worker_id) + " in " +
                             options_.train_data);
    }
    if (options_.progress_secs > 0) progress_line(epoch, true);
    result.train_logloss = epoch_count > 0 ? epoch_loss_sum / epoch_count : 0;
    if (epoch + 1 < options_.epochs) PS_RETURN_IF_ERROR(evaluate_now(false));
  }
  result.train_seconds = SecondsSince(start);
  result.train_examples = examples.load();
  result.samples_per_sec = result.train_examples / result.train_seconds;
  data::ReaderStats stats = source->stats();
  result.malformed_lines = stats.malformed;
  result.first_malformed = stats.first_malformed;

  // Every push applied everywhere before anyone evaluates.
  PS_RETURN_IF_ERROR(store_->Flush());
  PS_RETURN_IF_ERROR(store_->Barrier());
  PS_RETURN_IF_ERROR(evaluate_now(true));
  return result;
}

std::string TrainResultJson(const TrainResult& r, const std::string& model,
                            bool local, const TrainerOptions& o) {
  std::ostringstream j;
  j.precision(6);
  j << "{\"model\": \"" << model
    << "\", \"local\": " << (local ? "true" : "false")
    << ", \"worker_id\": " << o.worker_id
    << ", \"num_workers\": " << o.num_workers << ", \"threads\": " << o.threads
    << ", \"epochs\": " << o.epochs << ", \"batch_size\": " << o.batch_size
    << ", \"train_examples\": " << r.train_examples
    << ", \"train_seconds\": " << r.train_seconds
    << ", \"samples_per_sec\": " << r.samples_per_sec
    << ", \"train_logloss\": " << r.train_logloss
    << ", \"malformed_lines\": " << r.malformed_lines;
  if (r.evaluated) {
    j << ", \"eval_auc\": " << r.final_eval.auc
      << ", \"eval_logloss\": " << r.final_eval.logloss
      << ", \"eval_examples\": " << r.final_eval.examples;
  }
  j << ", \"history\": [";
  for (size_t i = 0; i < r.history.size(); ++i) {
    const EvalPoint& p = r.history[i];
    j << (i ? ", " : "") << "{\"trained_examples\": " << p.trained_examples
      << ", \"auc\": " << p.auc << ", \"logloss\": " << p.logloss << "}";
  }
  j << "]}\n";
  return j.str();
}

}  // namespace ps::train
